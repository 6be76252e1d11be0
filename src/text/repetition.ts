/**
 * Verbatim repeats of a paragraph or a sentence, compared on the folded copy (src/text/fold.ts: case,
 * width and look-alikes aside) with whitespace collapsed. A leaf: src/judge/candidate.ts judges the text
 * with the repeats removed and src/judge/degenerate.ts decides when a text is mostly repeats.
 */
import { fold } from './fold.js';

export interface Deduplicated {
  /** The text with every repeat of an earlier paragraph or sentence removed (the first one stays). */
  text: string;
  /** Visible (non-whitespace) code points removed. */
  repeated: number;
  /** Visible code points of the text given. */
  visible: number;
}

const PARAGRAPH_BREAK = /(\n[ \t]*\n\s*)/;
/** After a sentence's end (`.`, `!`, `?` and their CJK forms) and whitespace, or at a line break. */
const SENTENCE_BREAK = /((?<=[.!?\u3002\uFF01\uFF1F])\s+|\n+)/u;

const visible = (s: string): number => {
  let n = 0;
  for (const c of s) if (!/\s/u.test(c)) n += 1;
  return n;
};

const keyOf = (s: string): string => fold(s).replace(/\s+/g, ' ').trim();

/**
 * Removes repeated paragraphs, then repeated sentences, of at least `minChars` visible code points (a
 * shorter one, a list marker or "See above.", may recur in writing). Text without a repeat is returned
 * unchanged.
 */
export function dedupeRepeats(text: string, minChars: number): Deduplicated {
  const total = visible(text);
  let repeated = 0;
  /** Keeps the parts of `[part, separator, part, …]` not in `seen`, each with the separator before it. */
  const keep = (parts: string[], seen: Set<string>, inner?: (part: string) => string): string => {
    let out = '';
    for (let i = 0; i < parts.length; i += 2) {
      const part = parts[i] ?? '';
      // The separator before a part, unless every part before it was a repeat.
      const separator = out === '' ? '' : (parts[i - 1] ?? '');
      const key = keyOf(part);
      if (key.length >= minChars && visible(part) >= minChars) {
        if (seen.has(key)) {
          repeated += visible(part);
          continue;
        }
        seen.add(key);
      }
      out += separator + (inner === undefined ? part : inner(part));
    }
    return out;
  };
  const paragraphs = new Set<string>();
  const sentences = new Set<string>();
  const out = keep(text.split(PARAGRAPH_BREAK), paragraphs, (paragraph) =>
    keep(paragraph.split(SENTENCE_BREAK), sentences),
  );
  return repeated === 0
    ? { text, repeated: 0, visible: total }
    : { text: out.trim(), repeated, visible: total };
}
