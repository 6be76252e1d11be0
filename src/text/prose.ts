/**
 * Measurements of whether a text is prose with something of its own to say, for the "no method of its
 * own" rules (src/judge/no-method.ts decides; the thresholds live there). A leaf: pure functions.
 */
import { codePoints } from './normalize.js';
import { termSet } from './similarity.js';

/** Content-term overlap of a candidate with the question (stemmed, stopwords removed: `termSet`). */
export interface EchoMeasure {
  /** Distinct content terms of the candidate. */
  terms: number;
  /** ... of which the question has too. */
  shared: number;
  /** ... the candidate adds (terms - shared). */
  added: number;
}

/**
 * Words that frame a restatement ("This research asks whether…", "We investigate the question of…") and
 * carry no method: not counted as terms of the candidate's own.
 */
const FRAMING_TERMS: ReadonlySet<string> = termSet(
  'research researcher question questions ask asks asked asking investigate investigates investigation ' +
    'explore explores exploring examine examines aim aims goal goals address addresses addressing seek seeks ' +
    'consider considers whether answer answers wonder here restate restated topic',
);

export function echoMeasure(candidate: string, question: string): EchoMeasure {
  const asked = termSet(question);
  const own = [...termSet(candidate)].filter((t) => asked.has(t) || !FRAMING_TERMS.has(t));
  let shared = 0;
  for (const t of own) if (asked.has(t)) shared += 1;
  return { terms: own.length, shared, added: own.length - shared };
}

/** Minimum run lengths, in characters, for a run to count as encoded (`percent`: escapes per token). */
export const ENCODED_MIN_RUN = { base64: 24, hex: 32, percent: 4 } as const;

// A base64 / base64url run: the alphabet with at least one digit or `+/` and mixed case, optional padding.
const BASE64_RUN = new RegExp(String.raw`[A-Za-z0-9+/_-]{${ENCODED_MIN_RUN.base64},}={0,2}`, 'g');
const HEX_RUN = new RegExp(String.raw`(?:0x)?[0-9a-fA-F]{${ENCODED_MIN_RUN.hex},}`, 'g');
// Percent-encoding: a whitespace-free token holding at least ENCODED_MIN_RUN.percent escapes (`%20`).
const TOKEN_RUN = /\S+/g;
const PERCENT_ESCAPE = /%[0-9a-fA-F]{2}/g;
const LOWER = /[a-z]/;
const UPPER = /[A-Z]/;
const DIGIT_OR_SIGN = /[0-9+/_]/;

/** camelCase pieces of a run: `ResNet50/ImageNet` → Res, Net, 50, Image, Net. */
const CAMEL_PIECE = /[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+/g;
/** Words joined by `/`, `_`, `-` or camelCase have pieces this long on average; random base64 has ~2. */
export const WORDLIKE_PIECE_CHARS = 4;

/** Whether a run reads as words joined together (`Teacher/StudentDistillation`, `ResNet50/ImageNet1k`). */
function isWordLike(run: string): boolean {
  let letters = 0;
  let pieces = 0;
  for (const m of run.matchAll(CAMEL_PIECE)) {
    if (m[0].charCodeAt(0) <= 0x39) continue;
    letters += m[0].length;
    pieces += 1;
  }
  return pieces > 0 && letters >= WORDLIKE_PIECE_CHARS * pieces;
}

/**
 * Looks like base64 rather than words: mixed case and a digit or `+/_` (an English word has neither), and
 * not words joined together (a slash-joined or camelCase term has long pieces; base64 switches case every
 * couple of characters).
 */
function isBase64Like(run: string): boolean {
  return LOWER.test(run) && UPPER.test(run) && DIGIT_OR_SIGN.test(run) && !isWordLike(run);
}

/** A URL, a DOI or a bucket path: an address, whatever its characters; no encoding rule reads it. */
const ADDRESS = /(?:[a-z][a-z0-9+.-]*:\/\/|www\.|doi:)\S+/gi;

/** `text` with every address blanked (same length, so offsets and shares stay comparable). */
export function withoutAddresses(text: string): string {
  return text.replace(ADDRESS, (m) => ' '.repeat(m.length));
}

/** Hex rather than a word: at least a quarter digits (hex-looking words such as `deadbeef` have none). */
function isHexLike(run: string): boolean {
  let digits = 0;
  for (const c of run) if (c >= '0' && c <= '9') digits += 1;
  return digits * 4 >= run.length;
}

export interface EncodedMeasure {
  /** Characters inside base64, hex and percent-encoded runs (overlaps counted once). */
  chars: number;
  /** The longest such run. */
  longest: number;
}

/** Base64, hex and percent-encoded runs of `text`, outside URLs and DOIs. */
export function encodedMeasure(raw: string): EncodedMeasure {
  const text = withoutAddresses(raw);
  const covered: Array<[number, number]> = [];
  const add = (re: RegExp, accept: (run: string) => boolean): void => {
    re.lastIndex = 0;
    for (const m of text.matchAll(re)) if (accept(m[0])) covered.push([m.index, m.index + m[0].length]);
  };
  add(BASE64_RUN, isBase64Like);
  add(HEX_RUN, isHexLike);
  add(TOKEN_RUN, (token) => (token.match(PERCENT_ESCAPE)?.length ?? 0) >= ENCODED_MIN_RUN.percent);
  covered.sort((a, b) => a[0] - b[0]);
  let chars = 0;
  let longest = 0;
  let end = -1;
  for (const [s, e] of covered) {
    longest = Math.max(longest, e - s);
    if (e <= end) continue;
    chars += e - Math.max(s, end);
    end = e;
  }
  return { chars, longest };
}

// Scripts written without spaces between words: their runs are sentences, not tokens.
const UNSPACED =
  /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Thai}\p{Script=Lao}\p{Script=Khmer}\p{Script=Myanmar}\p{Script=Tibetan}]/u;
const LETTER_RUN = /[\p{L}\p{M}]+/gu;
const TOKEN = /\S+/gu;

export interface TokenMeasure {
  /** Longest run of letters (with their marks) in a script written with spaces. */
  longestWord: number;
  /** Longest such run that repeats a shorter unit (`alignmentalignment…`): no language writes those. */
  longestRepeat: number;
  /** Longest whitespace-free token that holds no character of a script written without spaces. */
  longestToken: number;
}

/** Whether `word` is a shorter unit repeated (to its end, the last copy possibly cut). */
function isPeriodic(word: string): boolean {
  const chars = [...word];
  for (let p = 1; p <= chars.length / 2; p++) {
    let periodic = true;
    for (let i = p; i < chars.length && periodic; i++) periodic = chars[i] === chars[i - p];
    if (periodic) return true;
  }
  return false;
}

/** Longest letter runs and whitespace-free tokens of `text`, URLs and DOIs aside. */
export function tokenMeasure(raw: string): TokenMeasure {
  const text = withoutAddresses(raw);
  let longestWord = 0;
  let longestRepeat = 0;
  let longestToken = 0;
  for (const m of text.matchAll(TOKEN)) {
    const token = m[0];
    if (UNSPACED.test(token)) continue;
    longestToken = Math.max(longestToken, codePoints(token));
    for (const w of token.matchAll(LETTER_RUN)) {
      const n = codePoints(w[0]);
      longestWord = Math.max(longestWord, n);
      if (n > longestRepeat && isPeriodic(w[0].toLowerCase())) longestRepeat = n;
    }
  }
  return { longestWord, longestRepeat, longestToken };
}

export interface LetterMeasure {
  /** Code points that are neither whitespace nor markdown markup (`|`, `-`, `*`, `#`, `>`, `` ` ``, `:`, `=`, `_`, `~`). */
  visible: number;
  /** ... of which letters (with their combining marks). */
  letters: number;
}

const LETTERS = /[\p{L}\p{M}]/gu;
/** Visible, and not the markup of a markdown table, list, heading, quote or code span. */
const VISIBLE = /[^\s|*#>`:=_~-]/gu;

export function letterMeasure(text: string): LetterMeasure {
  return { visible: text.match(VISIBLE)?.length ?? 0, letters: text.match(LETTERS)?.length ?? 0 };
}
