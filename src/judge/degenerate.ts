import { STOPWORDS } from '../text/similarity.js';
import { CANDIDATE_LIMIT_DEFAULTS } from '../settings/defaults.js';

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
 * zero-width spaces, possibly with whitespace), `too_long`, `master_key_filler` (a known filler phrase or a
 * few words with no content word), `too_short`.
 */
export type RejectionReason = 'empty' | 'control_only' | 'too_long' | 'master_key_filler' | 'too_short';

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
]);

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

/** Code points in `text`, counting at most `cap + 1` (enough to compare against `cap`). */
function countChars(text: string, cap: number): number {
  let n = 0;
  for (const _ of text) {
    n += 1;
    if (n > cap) break;
  }
  return n;
}

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

function isFiller(trimmed: string): boolean {
  const normalized = normalize(trimmed);
  if (normalized.length === 0 || FILLER_PHRASES.has(normalized)) return true;
  const words = normalized.split(WORD_SPLIT).filter((w) => w.length > 0);
  if (words.length > FILLER_MAX_WORDS) return false;
  return words.every((w) => w.length < 2 || STOPWORDS.has(w) || FILLER_WORDS.has(w) || /^\p{N}+$/u.test(w));
}

/**
 * Decides whether a candidate is degenerate. Pure and cheap: the filler rules only run on texts within
 * `maxChars`. Lengths are counted on the trimmed text.
 */
export function checkCandidate(candidate: string, limits: CandidateLimits): CandidateCheck {
  const trimmed = candidate.trim();
  if (trimmed.length === 0) return { ok: false, reason: 'empty' };
  if (CONTROL_OR_SPACE.test(trimmed)) return { ok: false, reason: 'control_only' };
  const chars = countChars(trimmed, limits.maxChars);
  if (chars > limits.maxChars) return { ok: false, reason: 'too_long' };
  if (isFiller(trimmed)) return { ok: false, reason: 'master_key_filler' };
  if (chars < limits.minChars) return { ok: false, reason: 'too_short' };
  return { ok: true };
}
