import { fold } from '../text/fold.js';
import type { Deduplicated } from '../text/repetition.js';
import { STOPWORDS } from '../text/similarity.js';
import { CANDIDATE_LIMIT_DEFAULTS } from '../settings/defaults.js';
import { checkNoMethod, type NoMethodReason } from './no-method.js';

/**
 * Degenerate candidates are decided without any LLM call (reward 0, status `rejected_input`): they are
 * either not an idea at all, or "master keys" — null answers that LLM judges are known to accept.
 */

export interface CandidateLimits {
  /** Minimum length of the trimmed candidate, in characters (Unicode code points). */
  minChars: number;
  /** Maximum length of the trimmed candidate, in characters; longer is a real 0, not a skipped sample. */
  maxChars: number;
}

export const DEFAULT_CANDIDATE_LIMITS: Readonly<CandidateLimits> = CANDIDATE_LIMIT_DEFAULTS;

/**
 * Stable rejection reasons (used in responses and as a bounded metrics label):
 * `empty` (nothing or only whitespace), `control_only` (only control/format characters such as NUL or
 * zero-width spaces, possibly with whitespace, or mostly invisible: see src/judge/candidate.ts), `too_long`,
 * `master_key_filler` (a known filler phrase or a few words with no content word), `too_short`,
 * `truncated_reasoning` (a reasoning trace that never closed: src/text/reasoning.ts), `repetitive` (mostly
 * verbatim repeats of its own sentences or paragraphs: REPETITION), and the no-method rules of
 * src/judge/no-method.ts (`encoded`, `long_token`, `non_prose`, `question_restated`).
 */
export type RejectionReason =
  | 'empty'
  | 'control_only'
  | 'too_long'
  | 'master_key_filler'
  | 'too_short'
  | 'truncated_reasoning'
  | 'repetitive'
  | 'invalid_text'
  | NoMethodReason;

/** Every rejection reason, for metrics series and per-reason trainer logs. */
export const REJECTION_REASONS: readonly RejectionReason[] = [
  'empty',
  'control_only',
  'too_long',
  'master_key_filler',
  'too_short',
  'truncated_reasoning',
  'repetitive',
  'invalid_text',
  'encoded',
  'long_token',
  'non_prose',
  'question_restated',
];

export type CandidateCheck = { ok: true } | { ok: false; reason: RejectionReason };

/** Known null answers, lowercased, without surrounding punctuation, whitespace collapsed. */
const FILLER_PHRASES: ReadonlySet<string> = new Set([
  'thought process',
  "let's solve this step by step",
  "let's solve this problem step by step",
  "let's think step by step",
  "let's think about this step by step",
  'let me think step by step',
  'let me think',
  'step by step',
  'solution',
  'the solution',
  'solution is',
  'answer',
  'the answer',
  'the answer is',
  'final answer',
  'my answer',
  'response',
  'sure',
  'sure thing',
  'sure here is my idea',
  'sure here is the idea',
  'certainly',
  'of course',
  'okay',
  'ok',
  'yes',
  'no',
  'correct',
  'true',
  'match',
  'idea',
  'research idea',
  'my idea',
  'the idea',
  'hypothesis',
  'proposed method',
  'method',
  'here is my idea',
  'here is the idea',
  'here is my research idea',
  'here is my answer',
  'here is the answer',
  'n/a',
  'na',
  'none',
  'null',
  'undefined',
  'nan',
  'tbd',
  'todo',
  'lorem ipsum',
  // Translated fillers: the same null answers in Chinese, German, French, Spanish and Russian.
  '让我们一步一步地解决这个问题',
  '让我们一步一步解决这个问题',
  '让我们逐步解决这个问题',
  '让我们一步一步地思考',
  '让我们一步步思考',
  '一步一步',
  '思考过程',
  '解决方案',
  '答案',
  '最终答案',
  '我的想法',
  '研究想法',
  '好的',
  '当然',
  'lass uns das schritt für schritt lösen',
  'lasst uns das schritt für schritt lösen',
  'lass uns schritt für schritt denken',
  'lasst uns schritt für schritt denken',
  'schritt für schritt',
  'denkprozess',
  'gedankengang',
  'die antwort',
  'antwort',
  'lösung',
  'die lösung',
  'endgültige antwort',
  'meine idee',
  'forschungsidee',
  'hier ist meine idee',
  'natürlich',
  'résolvons cela étape par étape',
  'résolvons ce problème étape par étape',
  'réfléchissons étape par étape',
  'étape par étape',
  'processus de réflexion',
  'la réponse',
  'réponse',
  'la solution',
  'réponse finale',
  'mon idée',
  'idée de recherche',
  'voici mon idée',
  'bien sûr',
  'resolvamos esto paso a paso',
  'resolvamos este problema paso a paso',
  'pensemos paso a paso',
  'paso a paso',
  'proceso de pensamiento',
  'la respuesta',
  'respuesta',
  'solución',
  'la solución',
  'respuesta final',
  'mi idea',
  'idea de investigación',
  'aquí está mi idea',
  'por supuesto',
  'claro',
  'давайте решим это шаг за шагом',
  'давайте решим эту задачу шаг за шагом',
  'давайте подумаем шаг за шагом',
  'шаг за шагом',
  'ход мыслей',
  'процесс мышления',
  'ответ',
  'решение',
  'окончательный ответ',
  'моя идея',
  'исследовательская идея',
  'вот моя идея',
  'конечно',
]);

const MARKS = /\p{M}/gu;
const NOT_LETTER_OR_DIGIT = /[^\p{L}\p{N}]/gu;

/**
 * The comparison key of a text: the folded copy (src/text/fold.ts: compatibility forms, case, the UTS #39
 * confusables skeleton), accents dropped, and everything but letters and digits removed
 * ("Ｔｈｏｕｇｈｔ  Process!" and "Тhоught prосеss" with Cyrillic letters are both "thoughtprocess").
 */
export function fillerKey(text: string): string {
  return fold(text).replace(MARKS, '').replace(NOT_LETTER_OR_DIGIT, '');
}

const FILLER_KEYS: ReadonlySet<string> = new Set([...FILLER_PHRASES].map(fillerKey));

/** Lengths of the filler keys, for the repetition check. */
const FILLER_KEY_LENGTHS: readonly number[] = [...new Set([...FILLER_KEYS].map((k) => k.length))].filter(
  (n) => n > 0,
);

/** True when `key` is two or more copies of one filler key (cheap: a Set lookup per filler length). */
function isRepeatedFiller(key: string): boolean {
  for (const n of FILLER_KEY_LENGTHS) {
    if (n >= key.length || key.length % n !== 0) continue;
    const unit = key.slice(0, n);
    if (FILLER_KEYS.has(unit) && unit.repeat(key.length / n) === key) return true;
  }
  return false;
}

/** A known filler in any of its forms: fullwidth, case, homoglyphs, accents, repeated. */
function isFillerKey(text: string): boolean {
  const key = fillerKey(text);
  // No letter or digit at all (":", "...", "---") is a filler too.
  return key === '' || FILLER_KEYS.has(key) || isRepeatedFiller(key);
}

/** Words that carry no idea in a short reply, beyond STOPWORDS. */
const FILLER_WORDS: ReadonlySet<string> = new Set(
  `solution solutions solve solving answer answers thought thoughts thinking think process step steps let
  sure okay ok yes final response reply here below following output give given correct true false match
  matches matching certainly course idea research hypothesis`.split(/\s+/),
);

/** Only fillers of at most this many words are recognised by the word rule (a longer text is left to the judge). */
const FILLER_MAX_WORDS = 40;

const CONTROL_OR_SPACE = /^[\p{Cc}\p{Cf}\s]*$/u;
const EDGE_NOISE = /[\p{P}\p{S}\p{Cc}\p{Cf}\s]/u;
const WORD_SPLIT = /[^\p{L}\p{N}]+/u;
const WORD_RUN = /[\p{L}\p{N}]+/gu;

/** Code points in `text`, counting at most `cap + 1` (enough to compare against `cap`). */
function countChars(text: string, cap: number): number {
  let n = 0;
  for (const _ of text) {
    n += 1;
    if (n > cap) break;
  }
  return n;
}

/** The filler phrases as the word rule compares them (folded, accents dropped). */
const FOLDED_PHRASES: ReadonlySet<string> = new Set(
  [...FILLER_PHRASES].map((p) => normalize(fold(p).replace(MARKS, ''))),
);

/** Lowercase, drop punctuation/symbols/whitespace at both ends, collapse inner whitespace, straight apostrophes. */
function normalize(text: string): string {
  const chars = Array.from(text.toLowerCase());
  let start = 0;
  let end = chars.length;
  while (start < end && EDGE_NOISE.test(chars[start] ?? '')) start += 1;
  while (end > start && EDGE_NOISE.test(chars[end - 1] ?? '')) end -= 1;
  return chars
    .slice(start, end)
    .map((c) => (c === '\u2019' || c === '\u2018' ? "'" : c))
    .join('')
    .split(/\s+/)
    .join(' ');
}

/** True when `text` has more than `max` runs of letters or digits (stops counting there). */
function hasMoreWords(text: string, max: number): boolean {
  let n = 0;
  for (const _ of text.matchAll(WORD_RUN)) if (++n > max) return true;
  return false;
}

/** Whether a trimmed candidate is a master-key filler (the `master_key_filler` rule alone). */
export function isFiller(trimmed: string): boolean {
  if (isFillerKey(trimmed)) return true;
  // The word rule is for short replies: a long text is left to the judge without normalising it.
  if (hasMoreWords(trimmed, FILLER_MAX_WORDS)) return false;
  const normalized = normalize(fold(trimmed).replace(MARKS, ''));
  if (normalized.length === 0 || FOLDED_PHRASES.has(normalized)) return true;
  const words = normalized.split(WORD_SPLIT).filter((w) => w.length > 0);
  return words.every((w) => w.length < 2 || STOPWORDS.has(w) || FILLER_WORDS.has(w) || /^\p{N}+$/u.test(w));
}

/**
 * `repetitive`: after removing repeats of its own paragraphs and sentences of at least `minChars` visible
 * characters (src/text/repetition.ts; what the judge reads then), the removed share of the candidate's
 * visible characters is at least `maxShare`: a text that is mostly copies of itself.
 */
export const REPETITION = Object.freeze({ minChars: 24, maxShare: 0.5 });

/** Whether a deduplicated candidate was mostly repeats of itself (REPETITION). */
export function isRepetitive(d: Pick<Deduplicated, 'repeated' | 'visible'>): boolean {
  return d.repeated > 0 && d.repeated >= REPETITION.maxShare * d.visible;
}

/**
 * Decides whether a candidate is degenerate. Pure and cheap: the filler rules only run on texts within
 * `maxChars`. Lengths are counted on the trimmed text. `question` feeds the `question_restated` rule
 * (empty: that rule is off); `repeats`, what removing the candidate's repeats took out, the `repetitive`
 * rule. Callers judging rollouts go through `prepareCandidate` (src/judge/candidate.ts), which normalises,
 * extracts the answer and removes the repeats first.
 */
export function checkCandidate(
  candidate: string,
  limits: CandidateLimits,
  question = '',
  repeats?: Pick<Deduplicated, 'repeated' | 'visible'>,
): CandidateCheck {
  const trimmed = candidate.trim();
  if (trimmed.length === 0) return { ok: false, reason: 'empty' };
  if (CONTROL_OR_SPACE.test(trimmed)) return { ok: false, reason: 'control_only' };
  const chars = countChars(trimmed, limits.maxChars);
  if (chars > limits.maxChars) return { ok: false, reason: 'too_long' };
  if (isFiller(trimmed)) return { ok: false, reason: 'master_key_filler' };
  if (repeats !== undefined && isRepetitive(repeats)) return { ok: false, reason: 'repetitive' };
  if (chars < limits.minChars) return { ok: false, reason: 'too_short' };
  const noMethod = checkNoMethod(trimmed, question);
  if (noMethod !== undefined) return { ok: false, reason: noMethod };
  return { ok: true };
}
