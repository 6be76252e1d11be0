/**
 * What is judged (DESIGN §12): the one path every candidate takes before a judge sees it, whichever route
 * or tool sent it. In order:
 * 0. a NUL or an unpaired surrogate (src/judge/invalid-text.ts): `invalid_text`, before anything reads it;
 * 1. the normaliser (src/text/normalize.ts: NFKC, format/invisible characters removed, combining-mark runs
 *    cut); a candidate that was mostly invisible is `control_only`;
 * 2. the final answer after a reasoning trace (src/text/reasoning.ts, `REASONING_FORMAT`); a trace that
 *    never closed is `truncated_reasoning`;
 * 3. chat-template control tokens removed (src/text/chat-tokens.ts);
 * 4. the degenerate checks on the answer (src/judge/degenerate.ts: lengths, fillers, the no-method rules).
 * The question and the ground truth go through step 1 too. Pure and idempotent: preparing a prepared input
 * gives the same input and the same decision, so serving can key its cache on the prepared texts and the
 * engine can prepare again without changing anything.
 */
import { stripChatTokens } from '../text/chat-tokens.js';
import { normalizeText, normalized } from '../text/normalize.js';
import { extractAnswer, type ReasoningFormat } from '../text/reasoning.js';
import {
  checkCandidate,
  DEFAULT_CANDIDATE_LIMITS,
  type CandidateLimits,
  type RejectionReason,
} from './degenerate.js';
import { invalidTextKeyForm, isInvalidText } from './invalid-text.js';
import type { JudgmentInput } from './types.js';

export type { ReasoningFormat } from '../text/reasoning.js';
export { REASONING_FORMATS } from '../text/reasoning.js';

/**
 * The version of the preparation rules (steps 1–4 and the rules they apply): part of every judgment key
 * (src/judge/key.ts), so a verdict cached under other rules is not replayed. Bump it with any change that
 * can turn an input's preparation into another text or another decision.
 */
export const PREPARATION_VERSION = '1';

/** A candidate whose invisible characters are at least this share of its non-whitespace code points is `control_only`. */
export const MAX_INVISIBLE_SHARE = 0.5;

export interface CandidateOptions {
  /** Default `auto`. */
  reasoningFormat?: ReasoningFormat | undefined;
  limits?: CandidateLimits | undefined;
  /** The (normalised) question, for the `question_restated` rule; empty turns that rule off. */
  question?: string | undefined;
}

export interface PreparedCandidate {
  /**
   * The text to judge and key: the normalised final answer when it passed, else the candidate as sent (so
   * preparing it again reaches the same rejection).
   */
  candidate: string;
  /** Code points of the reasoning trace before the answer (0 without one). */
  reasoningChars: number;
  /** Why it is a real 0 without a judgment; undefined when it is judged. */
  rejection?: RejectionReason | undefined;
}

/** Steps 0–4 for one candidate. */
export function prepareCandidate(raw: string, options: CandidateOptions = {}): PreparedCandidate {
  if (isInvalidText(raw))
    return { candidate: invalidTextKeyForm(raw), reasoningChars: 0, rejection: 'invalid_text' };
  const limits = options.limits ?? DEFAULT_CANDIDATE_LIMITS;
  const n = normalizeText(raw);
  if (n.invisible > 0 && n.invisible >= MAX_INVISIBLE_SHARE * (n.invisible + n.visible)) {
    return { candidate: raw, reasoningChars: 0, rejection: raw.trim() === '' ? 'empty' : 'control_only' };
  }
  const format = options.reasoningFormat ?? 'auto';
  const extracted = extractAnswer(n.text, format);
  if (extracted.kind === 'truncated') {
    return { candidate: raw, reasoningChars: extracted.reasoningChars, rejection: 'truncated_reasoning' };
  }
  const answer = stripChatTokens(extracted.answer);
  // Removing a control token can put an opening tag at the start of a line (`<|im_end|><think>…`): the
  // answer is read again, so preparing it once more decides the same.
  if (answer !== extracted.answer && extractAnswer(answer, format).kind === 'truncated') {
    return { candidate: raw, reasoningChars: extracted.reasoningChars, rejection: 'truncated_reasoning' };
  }
  const check = checkCandidate(answer, limits, options.question ?? '');
  if (!check.ok) return { candidate: raw, reasoningChars: extracted.reasoningChars, rejection: check.reason };
  return { candidate: answer, reasoningChars: extracted.reasoningChars };
}

export interface PreparedInput extends Omit<PreparedCandidate, 'candidate'> {
  /** The input to judge and key: question and ground truth normalised, the candidate as `prepareCandidate` says. */
  input: JudgmentInput;
}

/** Steps 1–4 for a judgment's input (the question and ground truth normalised, step 1). */
export function prepareInput(
  raw: JudgmentInput,
  options: Omit<CandidateOptions, 'question'> = {},
): PreparedInput {
  const question = normalized(raw.question);
  const prepared = prepareCandidate(raw.candidate, { ...options, question });
  return {
    input: { question, groundTruth: normalized(raw.groundTruth), candidate: prepared.candidate },
    reasoningChars: prepared.reasoningChars,
    rejection: prepared.rejection,
  };
}
