/**
 * Markers (reasoning tags, chat and end-of-turn tokens) as the rules match them: on the folded copy
 * (src/text/fold.ts), so `＜ｔｈｉｎｋ＞`, `<THINK>` and `<thіnk>` with a Cyrillic `і` are the same marker, and
 * with a test that tells a marker a model emitted from one a sentence mentions. A leaf.
 */
import { fold } from './fold.js';

/** `marker` as a regular-expression source matching its folded form. */
export function literal(marker: string): string {
  return fold(marker).replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
}

const QUOTES = new Set(['`', '"', "'", '«', '»']);
const SPACE = /[ \t]/;
const LETTER = /\p{L}/u;

/**
 * Whether the marker at folded `[start, end)` of `text` is mentioned rather than emitted: quoted (`` `</s>` ``,
 * `"<eos>"`), or set inside a sentence (a space before it, and after it a space or punctuation followed by
 * more words on the same line: "emit an <eos> token when done"). A model's own marker sits against its text
 * (`idea.<|im_end|>`), on a line of its own, or at the end of the text.
 */
export function isMention(text: string, start: number, end: number): boolean {
  const before = text.charAt(start - 1);
  const after = text.charAt(end);
  if (QUOTES.has(before) && QUOTES.has(after)) return true;
  if (!SPACE.test(before)) return false;
  if (!(SPACE.test(after) || /[,.;:!?)]/.test(after))) return false;
  const lineEnd = text.indexOf('\n', end);
  return LETTER.test(text.slice(end, lineEnd < 0 ? text.length : lineEnd));
}

/**
 * Whether folded offset `start` of `text` begins a line: only spaces or tabs before it on its line, or
 * since offset `floor` (where a trace ended: what follows a closing marker starts afresh).
 */
export function atLineStart(text: string, start: number, floor = 0): boolean {
  for (let i = start - 1; i >= floor; i--) {
    const c = text.charAt(i);
    if (c === '\n') return true;
    if (c !== ' ' && c !== '\t') return false;
  }
  return true;
}
