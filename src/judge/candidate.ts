/**
 * What is judged (DESIGN §12, §13): the one path every candidate takes before a judge sees it, whichever
 * route or tool sent it. Routes pass the rollout as the policy wrote it (control tokens included) and
 * never prepare text themselves. In order:
 * 0. a NUL or an unpaired surrogate (src/judge/invalid-text.ts): `invalid_text`, before anything reads it;
 * 1. the normaliser (src/text/normalize.ts: NFC, format/invisible characters removed, combining-mark runs
 *    cut); a candidate that was mostly invisible is `control_only`. Then the folded copy the rules match on
 *    (src/text/fold.ts: NFKD, case folding, the UTS #39 skeleton), with offsets back to this text;
 * 2. the end of the turn (src/text/chat-tokens.ts): the text ends at the first end-of-turn or end-of-text
 *    token of any known chat template; what follows is neither judged nor counted;
 * 3. the final answer after a reasoning trace (src/text/reasoning.ts, `REASONING_FORMAT`,
 *    `REASONING_MARKERS`); a trace that never closed is `truncated_reasoning`;
 * 4. chat-template control tokens removed (src/text/chat-tokens.ts);
 * 5. whitespace made canonical (`canonicalWhitespace`: every run of Unicode White_Space one space, issue 38
 *    item 7), then repeats of its own sentences removed (src/text/repetition.ts); a candidate that was mostly
 *    repeats is `repetitive`;
 * 6. the degenerate checks on the answer (src/judge/degenerate.ts: lengths, fillers, the no-method rules).
 * The question and the ground truth go through step 1 too. The judge reads, and serving keys and caches,
 * the author's text from steps 1–5: nothing is folded, and whitespace is canonical. Steps 1–6 repeat on
 * their own output until it no longer changes (`prepareCandidate`), so the path is idempotent on every input:
 * preparing a prepared input gives the same text and the same decision, serving can key its cache on the
 * prepared texts, and the engine can prepare again without changing anything. A rejected candidate is keyed
 * by its text as sent in a key space of its own (src/judge/key.ts `KeyForm`).
 */
import { chatTokenSpans, endOfTurn, stripChatTokens } from '../text/chat-tokens.js';
import { foldText, type Folded } from '../text/fold.js';
import { codePoints, normalizeText, normalized } from '../text/normalize.js';
import { answerSpan, extractAnswer, type ReasoningFormat } from '../text/reasoning.js';
import { familyOf } from '../text/reasoning-formats.js';
import { dedupeRepeats } from '../text/repetition.js';
import {
  checkCandidate,
  DEFAULT_CANDIDATE_LIMITS,
  REPETITION,
  type CandidateLimits,
  type RejectionReason,
} from './degenerate.js';
import { invalidTextKeyForm, isInvalidText } from './invalid-text.js';
import type { JudgmentInput } from './types.js';

export type { ReasoningFormat, ReasoningSpec } from '../text/reasoning.js';
export { REASONING_FORMATS, reasoningKey } from '../text/reasoning.js';

/**
 * The version of the preparation rules (this path, its text functions and the thresholds of the degenerate
 * and no-method rules). Bump it with any change that can change a prepared text or a rejection: it is part
 * of every judgment's cache key, so a replica with other rules never replays this one's verdicts.
 */
export const PREPARATION_VERSION = '2026-38.12';

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

/** Steps 2–4: the answer of normalised `text` (with its folded copy), or the trace that never closed. */
function answerOf(
  text: string,
  format: ReasoningFormat,
): { answer: Folded; reasoningChars: number } | { truncated: number } {
  const folded = foldText(text);
  const family = familyOf(typeof format === 'string' ? format : format.format);
  const cut = endOfTurn(folded, family === 'all' || family === 'harmony');
  const turn = cut === undefined ? folded : folded.slice(0, cut);
  const span = answerSpan(turn, format);
  if (span.kind === 'truncated') return { truncated: codePoints(turn.source) };
  const reasoningChars = codePoints(turn.source.slice(0, span.start));
  const view = turn.slice(span.start, span.end);
  if (chatTokenSpans(view).length === 0) {
    // No control token to remove: the answer is the view trimmed, folded already.
    const lead = view.source.length - view.source.trimStart().length;
    return { answer: view.slice(lead, lead + view.source.trim().length), reasoningChars };
  }
  const answer = stripChatTokens(view);
  // Removing a control token can put an opening tag at the start of a line (`<|im_end|><think>…`): the
  // answer is read again, so preparing it once more decides the same.
  if (extractAnswer(answer, format).kind === 'truncated') return { truncated: reasoningChars };
  return { answer: foldText(answer), reasoningChars };
}

/**
 * A candidate whose preparation has not settled after this many passes (each pass exposed another layer of
 * markers or control tokens: `</think> </think> </think> …`) is `control_only`: markup, not an idea. Real
 * text settles in one pass, and markup crafted to expose one more layer per pass costs at most this many.
 */
export const MAX_PREPARATION_PASSES = 8;

/** Every run of Unicode White_Space (spaces, tabs, line breaks, CRLF, no-break and the other separators). */
const WHITE_SPACE_RUN = /\p{White_Space}+/gu;

/**
 * The whitespace-canonical form of a text (issue 38 item 7): each run of White_Space characters one space,
 * both ends trimmed. Rollouts that differ only in whitespace are one rollout: judged once, keyed once, the
 * same reward. Case is kept (`ResNet` and `resnet`, `getX` and `getx` can name different things).
 */
export function canonicalWhitespace(text: string): string {
  return text.replace(WHITE_SPACE_RUN, ' ').trim();
}

type Pass =
  | { kind: 'answer'; text: string; reasoningChars: number }
  | { kind: 'rejected'; rejection: RejectionReason; reasoningChars: number };

/** Steps 1–6 once over `raw` (steps 0 aside): the answer as one more pass would read it, or a rejection. */
function preparePass(raw: string, options: CandidateOptions, limits: CandidateLimits): Pass {
  const n = normalizeText(raw);
  if (n.invisible > 0 && n.invisible >= MAX_INVISIBLE_SHARE * (n.invisible + n.visible)) {
    return { kind: 'rejected', reasoningChars: 0, rejection: raw.trim() === '' ? 'empty' : 'control_only' };
  }
  const found = answerOf(n.text, options.reasoningFormat ?? 'auto');
  if ('truncated' in found)
    return { kind: 'rejected', reasoningChars: found.truncated, rejection: 'truncated_reasoning' };
  // Whitespace made canonical before the repeats are read: a line break is no sentence boundary that a
  // whitespace variant of the same answer would not have.
  const deduplicated = dedupeRepeats(canonicalWhitespace(found.answer.source), REPETITION.minChars);
  const text = canonicalWhitespace(deduplicated.text);
  const check = checkCandidate(text, limits, options.question ?? '', deduplicated);
  if (!check.ok) return { kind: 'rejected', reasoningChars: found.reasoningChars, rejection: check.reason };
  return { kind: 'answer', text, reasoningChars: found.reasoningChars };
}

/**
 * Steps 0–6 for one candidate, repeated on their own output until it no longer changes (issue 38 item 1): a
 * pass can change what the next one reads (trimming puts a closing tag that was a mention mid-text first on
 * its line, removing a token or a repeat joins two lines), so the answer is the first text that a pass
 * leaves as it is, and its outcome that pass's. So `prepareCandidate(p.candidate)` is `p` (text and
 * outcome) for every input: a prepared text is never keyed as one outcome and decided as another.
 */
export function prepareCandidate(raw: string, options: CandidateOptions = {}): PreparedCandidate {
  if (isInvalidText(raw))
    return { candidate: invalidTextKeyForm(raw), reasoningChars: 0, rejection: 'invalid_text' };
  const limits = options.limits ?? DEFAULT_CANDIDATE_LIMITS;
  let text = raw;
  let reasoningChars = 0;
  for (let pass = 0; pass < MAX_PREPARATION_PASSES; pass++) {
    const p = preparePass(text, options, limits);
    reasoningChars += p.reasoningChars;
    if (p.kind === 'rejected') return { candidate: raw, reasoningChars, rejection: p.rejection };
    if (p.text === text) return { candidate: text, reasoningChars };
    text = p.text;
  }
  return { candidate: raw, reasoningChars, rejection: 'control_only' };
}

export interface PreparedInput extends Omit<PreparedCandidate, 'candidate'> {
  /** The input to judge and key: question and ground truth normalised, the candidate as `prepareCandidate` says. */
  input: JudgmentInput;
}

/** Steps 1–6 for a judgment's input (the question and ground truth normalised, step 1). */
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
