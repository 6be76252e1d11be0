/**
 * "No method of its own → no judgment": deterministic, cheap rules (no LLM call) for candidates that carry
 * no idea a reviewer could read, each with a stable reason. The measurements are in src/text/prose.ts; the
 * thresholds are here, and docs/inputs.md states them with the positives each rule rejects on the shared
 * labelled sets (test/judge/no-method-datasets.test.ts measures them).
 */
import { fold } from '../text/fold.js';
import { echoMeasure, encodedMeasure, letterMeasure, tokenMeasure } from '../text/prose.js';

export type NoMethodReason = 'encoded' | 'long_token' | 'non_prose' | 'question_restated';

/**
 * The rules' thresholds:
 * - `encoded`: base64 / hex / percent-encoded runs (src/text/prose.ts: outside URLs and DOIs; a base64 run
 *   reads as random, not as words joined by `/` or camelCase) cover at least `encodedChars` characters, or at
 *   least `encodedShare` of the visible characters;
 * - `long_token`: a run of letters longer than `maxWordChars` (the longest English dictionary word has
 *   45) that repeats a shorter unit (`alignmentalignment…`), any run of letters longer than
 *   `maxCompoundChars` (German compounds reach ~80), or a whitespace-free token longer than `maxTokenChars`
 *   (scripts written without spaces, URLs and DOIs excepted);
 * - `non_prose`: fewer than `minLetterShare` of the visible characters (markdown markup aside) are letters;
 * - `question_restated`: the question is one (`isAsking`: at least `echoMinAskedTerms` content terms and
 *   phrased as a question, or at least `echoMinQuestionTerms` content terms; a short title is not), at
 *   least `echoMinSharedShare` of the candidate's content terms are the question's, and the candidate adds
 *   at most `echoMaxAddedTerms` terms of its own.
 */
export const NO_METHOD_THRESHOLDS = Object.freeze({
  encodedChars: 64,
  encodedShare: 0.2,
  maxWordChars: 45,
  maxCompoundChars: 100,
  maxTokenChars: 100,
  minLetterShare: 0.5,
  echoMinQuestionTerms: 10,
  echoMinAskedTerms: 4,
  echoMinSharedShare: 0.75,
  echoMaxAddedTerms: 2,
});

const INTERROGATIVE =
  /^\s*(?:how|what|why|which|who|when|where|can|could|is|are|does|do|should|would|will)\b/i;

/**
 * Whether `question` asks something a candidate could merely restate: phrased as a question (ends with `?`
 * or opens with an interrogative word) with `echoMinAskedTerms` content terms, or `echoMinQuestionTerms`
 * content terms in any form. A paper title used as the question (OpenReview) usually names the method, and
 * an idea that restates it can be a real match, so it is left to the judge.
 */
export function isAsking(question: string): boolean {
  const t = NO_METHOD_THRESHOLDS;
  const terms = echoMeasure(question, question).terms;
  if (terms >= t.echoMinQuestionTerms) return true;
  return terms >= t.echoMinAskedTerms && (/\?\s*$/.test(question) || INTERROGATIVE.test(question));
}

/** The folded copy the echo is measured on: look-alike letters, case and accents aside. */
const echoText = (text: string): string => fold(text).replace(/\p{M}/gu, '');

/**
 * Whether the candidate restates the question (the `question_restated` rule alone), compared on the
 * folded copy: an echo written with Cyrillic `а`, `е`, `о` for Latin letters is an echo.
 */
export function isQuestionRestated(candidate: string, question: string): boolean {
  const t = NO_METHOD_THRESHOLDS;
  if (question.length === 0 || !isAsking(question)) return false;
  const e = echoMeasure(echoText(candidate), echoText(question));
  return e.terms > 0 && e.shared >= t.echoMinSharedShare * e.terms && e.added <= t.echoMaxAddedTerms;
}

/** Every rule a candidate breaks, in the order they are reported (`encoded` first, the echo last). */
export function noMethodRules(candidate: string, question: string): NoMethodReason[] {
  const t = NO_METHOD_THRESHOLDS;
  const broken: NoMethodReason[] = [];
  const letters = letterMeasure(candidate);
  const encoded = encodedMeasure(candidate);
  if (
    encoded.chars > 0 &&
    (encoded.chars >= t.encodedChars || encoded.chars >= t.encodedShare * letters.visible)
  )
    broken.push('encoded');
  const tokens = tokenMeasure(candidate);
  if (
    tokens.longestRepeat > t.maxWordChars ||
    tokens.longestWord > t.maxCompoundChars ||
    tokens.longestToken > t.maxTokenChars
  )
    broken.push('long_token');
  if (letters.visible > 0 && letters.letters < t.minLetterShare * letters.visible) broken.push('non_prose');
  if (isQuestionRestated(candidate, question)) broken.push('question_restated');
  return broken;
}

/** The first rule a candidate breaks, or undefined. Run on normalised text (after the filler checks). */
export function checkNoMethod(candidate: string, question: string): NoMethodReason | undefined {
  return noMethodRules(candidate, question)[0];
}
