/**
 * The folded copy every matching rule reads (DESIGN §13, "two texts"): what the judge reads is the author's
 * text (src/text/normalize.ts); fillers, the question echo, chat tokens, end-of-turn tokens and reasoning
 * markers are matched on this copy instead, and a match is mapped back to the author's text by offset.
 * A leaf: pure functions over the generated Unicode table.
 *
 * Per code point, in order: compatibility decomposition (NFKD: fullwidth, ligatures, math alphanumerics,
 * superscripts), full case folding (upper- then lower-case: `ß` → `ss`, `ς` → `σ`), canonical decomposition
 * again, and the UTS #39 confusables skeleton (Unicode's own data, src/text/confusables-data.ts, generated
 * from src/text/unicode/confusables.txt: Cyrillic `а` → `a`, Greek `ο` → `o`), repeated until the result
 * folds to itself. ASCII only lower-cases (see src/ablations/docs/confusables.ts for why). The result is
 * in NFD: accents are separate combining marks, which the filler rule drops.
 *
 * Cost: one table lookup per ASCII character, one cached lookup per other code point (the cache holds up
 * to FOLD_CACHE_SIZE code points; a candidate in any script reuses its few thousand characters).
 */
import { CONFUSABLES_DATA } from './confusables-data.js';

/** Code points whose fold is cached (cleared when full, so memory stays bounded). */
export const FOLD_CACHE_SIZE = 65_536;

let skeletons: Map<number, string> | undefined;
const cache = new Map<number, string>();
/** Whether every UTF-16 unit of `s` is ASCII (a char-code loop: far cheaper than a `u` regex). */
function isAscii(s: string): boolean {
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) > 0x7f) return false;
  return true;
}

/** The confusables table, parsed on first use. */
function skeletonTable(): Map<number, string> {
  if (skeletons !== undefined) return skeletons;
  const table = new Map<number, string>();
  for (const entry of CONFUSABLES_DATA.split(';')) {
    const colon = entry.indexOf(':');
    const source = Number.parseInt(entry.slice(0, colon), 16);
    const target = entry
      .slice(colon + 1)
      .split(',')
      .map((h) => String.fromCodePoint(Number.parseInt(h, 16)))
      .join('');
    table.set(source, target);
  }
  skeletons = table;
  return table;
}

const caseFold = (s: string): string => s.toUpperCase().toLowerCase();

/** Each code point of `s` through the skeleton table (ASCII stays). */
function skeleton(s: string): string {
  const table = skeletonTable();
  let out = '';
  for (const c of s) {
    const cp = c.codePointAt(0) ?? 0;
    out += cp < 0x80 ? c : (table.get(cp) ?? c);
  }
  return out;
}

const ASCII_ONLY = /^[^\u0080-\u{10FFFF}]+$/u;

/**
 * One round: NFKD, then the skeleton. A code point whose own skeleton is ASCII takes it, lower-cased
 * (capital Cyrillic `Т` is `T` in the data, its small form the small capital `ᴛ`); any other takes the
 * skeleton of its case fold, so both cases of a letter fold alike (`Σ` and `σ`). Then NFD.
 */
function foldRound(s: string): string {
  let out = '';
  for (const c of s.normalize('NFKD')) {
    const own = skeleton(c);
    out += ASCII_ONLY.test(own) ? own.toLowerCase() : skeleton(caseFold(c).normalize('NFKD'));
  }
  return caseFold(out).normalize('NFD');
}

const ASCII_FOLD: readonly string[] = Array.from({ length: 0x80 }, (_, i) =>
  String.fromCharCode(i).toLowerCase(),
);

/** The fold of one code point (memoised). */
export function foldCodePoint(cp: number): string {
  if (cp < 0x80) return ASCII_FOLD[cp] ?? '';
  const hit = cache.get(cp);
  if (hit !== undefined) return hit;
  let s = String.fromCodePoint(cp);
  // A target can itself decompose or case-fold: fold again until nothing changes (the data converges fast).
  for (let round = 0; round < 6; round++) {
    const next = foldRound(s);
    if (next === s) break;
    s = next;
  }
  if (cache.size >= FOLD_CACHE_SIZE) cache.clear();
  cache.set(cp, s);
  return s;
}

/** The folded copy of `text` (no offsets). Idempotent: `fold(fold(t)) === fold(t)`. */
export function fold(text: string): string {
  if (isAscii(text)) return text.toLowerCase();
  return foldText(text).text;
}

/** A text with its folded copy and the offsets between them. */
export interface Folded {
  /** The text as given (what the judge reads). */
  readonly source: string;
  /** Its folded copy (what the rules match on). */
  readonly text: string;
  /** The offset in `source` of the code point that folded offset `i` (0 … text.length) comes from. */
  sourceAt(i: number): number;
  /** The first folded offset whose code point starts at or after source offset `s`. */
  foldedAt(s: number): number;
  /** The same view of `source.slice(start, end)`, without folding again. */
  slice(start: number, end?: number): Folded;
}

class FoldedView implements Folded {
  constructor(
    readonly source: string,
    readonly text: string,
    /** Source offsets per folded offset (shared by slices), or undefined when the fold keeps lengths (ASCII). */
    private readonly at: Uint32Array | undefined,
    private readonly foldBase: number,
    private readonly sourceBase: number,
  ) {}

  sourceAt(i: number): number {
    if (this.at === undefined) return i;
    return (this.at[this.foldBase + i] ?? this.sourceBase + this.source.length) - this.sourceBase;
  }

  foldedAt(s: number): number {
    if (this.at === undefined) return s;
    let lo = this.foldBase;
    let hi = this.foldBase + this.text.length;
    const target = this.sourceBase + s;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((this.at[mid] ?? Infinity) < target) lo = mid + 1;
      else hi = mid;
    }
    return lo - this.foldBase;
  }

  slice(start: number, end = this.source.length): Folded {
    const s = Math.max(0, Math.min(start, this.source.length));
    const e = Math.max(s, Math.min(end, this.source.length));
    if (this.at === undefined)
      return new FoldedView(this.source.slice(s, e), this.text.slice(s, e), undefined, 0, 0);
    const fs = this.foldedAt(s);
    const fe = this.foldedAt(e);
    return new FoldedView(
      this.source.slice(s, e),
      this.text.slice(fs, fe),
      this.at,
      this.foldBase + fs,
      this.sourceBase + s,
    );
  }
}

/** `buffer`, or a copy twice as large when it holds fewer than `size` entries. */
function ensure(buffer: Uint32Array<ArrayBuffer>, size: number): Uint32Array<ArrayBuffer> {
  if (size <= buffer.length) return buffer;
  const grown = new Uint32Array(Math.max(size, buffer.length * 2));
  grown.set(buffer);
  return grown;
}

/** Folds `source` keeping the offsets, so a match on the folded copy can cut the source. */
export function foldText(source: string): Folded {
  if (isAscii(source)) return new FoldedView(source, source.toLowerCase(), undefined, 0, 0);
  const parts: string[] = [];
  // Most code points fold to one unit; grow when expansions (ligatures, `ß`, `½`) need more.
  let offsets = new Uint32Array(source.length + 16);
  let n = 0;
  for (let i = 0; i < source.length;) {
    const c = source.charCodeAt(i);
    if (c < 0x80) {
      // An ASCII run folds to its lower case, one unit per unit.
      let j = i + 1;
      while (j < source.length && source.charCodeAt(j) < 0x80) j++;
      parts.push(source.slice(i, j).toLowerCase());
      offsets = ensure(offsets, n + (j - i) + 1);
      for (let k = i; k < j; k++) offsets[n++] = k;
      i = j;
      continue;
    }
    const cp = c >= 0xd800 && c <= 0xdbff ? (source.codePointAt(i) ?? c) : c;
    const f = foldCodePoint(cp);
    parts.push(f);
    offsets = ensure(offsets, n + f.length + 1);
    for (let k = 0; k < f.length; k++) offsets[n++] = i;
    i += cp > 0xffff ? 2 : 1;
  }
  offsets[n] = source.length;
  return new FoldedView(source, parts.join(''), offsets.subarray(0, n + 1), 0, 0);
}
