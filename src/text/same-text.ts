/**
 * The one normalisation under which two texts are compared (issue 38 item 3): a prompt against the start of
 * an OpenRLHF query, a rollout's question against another's. A leaf.
 *
 * Both sides are read in the same segments — a code point and the combining marks after it — each in its
 * NFKD form, and whitespace is not compared. Canonical (and compatibility) decomposition is local to such a
 * segment (reordering never crosses a starter), so the concatenated forms are NFKD of the whole text:
 * canonically equivalent texts (`é` and `e` + U+0301, precomposed Vietnamese and its decomposed marks,
 * conjoining Hangul jamo and precomposed syllables) compare equal, and one side is never composed as a whole
 * while the other is read code point by code point.
 */

const MARK = /\p{M}/u;
const SPACE = /\p{White_Space}/u;

/** The segment of `text` starting at UTF-16 offset `at`: its end offset and its NFKD form without whitespace. */
export function segmentAt(text: string, at: number): { end: number; form: string } {
  const first = text.codePointAt(at);
  if (first === undefined) return { end: at, form: '' };
  let end = at + (first > 0xffff ? 2 : 1);
  for (;;) {
    const cp = text.codePointAt(end);
    if (cp === undefined || !MARK.test(String.fromCodePoint(cp))) break;
    end += cp > 0xffff ? 2 : 1;
  }
  let form = '';
  for (const c of text.slice(at, end).normalize('NFKD')) if (!SPACE.test(c)) form += c;
  return { end, form };
}

/** `text` as it is compared: every segment's form, concatenated (NFKD, whitespace removed). */
export function comparableForm(text: string): string {
  let out = '';
  for (let at = 0; at < text.length;) {
    const s = segmentAt(text, at);
    out += s.form;
    at = s.end;
  }
  return out;
}

/** Whether two texts are the same under the comparison normalisation (NFKD, whitespace aside). */
export function sameText(a: string, b: string): boolean {
  return comparableForm(a) === comparableForm(b);
}
