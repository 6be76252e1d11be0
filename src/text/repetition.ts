/**
 * Verbatim repeats of a paragraph or a sentence, compared on the folded copy (src/text/fold.ts: case,
 * width and look-alikes aside) with whitespace collapsed. A leaf: src/judge/candidate.ts judges the text
 * with the repeats removed and src/judge/degenerate.ts decides when a text is mostly repeats.
 */
import { foldText, type Folded } from './fold.js';

export interface Deduplicated {
  /** The text with every repeat of an earlier paragraph or sentence removed (the first one stays). */
  text: string;
  /** Visible (non-whitespace) code points removed. */
  repeated: number;
  /** Visible code points of the text given. */
  visible: number;
}

const PARAGRAPH_BREAK = /(\n[ \t]*\n\s*)/;
/** A sentence's end (`.`, `!`, `?` and their CJK forms) and the whitespace after it, or a line break. */
const SENTENCE_BREAK = /([.!?]\s+|[\u3002\uFF01\uFF1F]\s*|\n+)/;

/** Whether UTF-16 unit `c` is whitespace (`\s`). */
function isSpaceUnit(c: number): boolean {
  if (c <= 0x20) return c === 0x20 || (c >= 0x09 && c <= 0x0d);
  if (c < 0xa0) return c === 0x85;
  return (
    c === 0xa0 ||
    c === 0x1680 ||
    (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 ||
    c === 0x2029 ||
    c === 0x202f ||
    c === 0x205f ||
    c === 0x3000 ||
    c === 0xfeff
  );
}

/** Code points that are not whitespace (a char-code loop: no allocation). */
function visible(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xdc00 && c <= 0xdfff) continue; // low surrogate: counted with its high one
    if (!isSpaceUnit(c)) n += 1;
  }
  return n;
}

/** A part's comparison key from its folded text: whitespace collapsed, without the sentence end it may carry. */
const keyOf = (folded: string): string =>
  folded
    .replace(/[\s.!?\u3002\uFF01\uFF1F]+$/, '')
    .replace(/\s+/g, ' ')
    .trim();

/**
 * Removes repeated paragraphs, then repeated sentences, of at least `minChars` visible code points (a
 * shorter one, a list marker or "See above.", may recur in writing). Text without a repeat is returned
 * unchanged.
 */
export function dedupeRepeats(input: string | Folded, minChars: number): Deduplicated {
  const f = typeof input === 'string' ? foldText(input) : input;
  const text = f.source;
  const total = visible(text);
  let repeated = 0;
  /**
   * Keeps the parts of `[part, separator, part, …]` (starting at source offset `base`) not in `seen`, each
   * with the separator after it; `inner` rewrites a kept part (given its offset).
   */
  const keep = (
    parts: string[],
    base: number,
    seen: Set<string>,
    inner?: (part: string, at: number) => string,
  ): string => {
    let out = '';
    let at = base;
    for (let i = 0; i < parts.length; i += 2) {
      const part = parts[i] ?? '';
      // After a part: its sentence's end and the whitespace that follows.
      const separator = parts[i + 1] ?? '';
      const start = at;
      at += part.length + separator.length;
      const size = part.length >= minChars ? visible(part) : 0;
      if (size >= minChars) {
        const key = keyOf(f.text.slice(f.foldedAt(start), f.foldedAt(start + part.length)));
        if (seen.has(key)) {
          repeated += size;
          continue;
        }
        seen.add(key);
      }
      out += (inner === undefined ? part : inner(part, start)) + separator;
    }
    return out;
  };
  const paragraphs = new Set<string>();
  const sentences = new Set<string>();
  const byParagraph = text.split(PARAGRAPH_BREAK);
  const bySentence = (paragraph: string, at: number): string =>
    keep(paragraph.split(SENTENCE_BREAK), at, sentences);
  // One paragraph: no paragraph can repeat (and its key would fold the whole text once more).
  const out = byParagraph.length === 1 ? bySentence(text, 0) : keep(byParagraph, 0, paragraphs, bySentence);
  return repeated === 0
    ? { text, repeated: 0, visible: total }
    : { text: out.trim(), repeated, visible: total };
}
