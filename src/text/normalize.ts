/**
 * The one normaliser for text a judge sees (candidates first, then question and ground truth): the author's
 * text, as written, without what no reader sees. A leaf: pure string functions, no imports.
 *
 * 1. NFC (canonical composition only: `e` + U+0301 is `é`, U+212B ANGSTROM SIGN is `Å`). Not NFKC, which
 *    folds compatibility characters for matching identifiers and changes meaning in writing: `10⁻⁴` would
 *    read `10−4`, `2⁸` `28`, `m²` `m2`, `½` `1⁄2`. The rules match on a folded copy instead (src/text/fold.ts).
 * 2. Invisible characters removed: Unicode format characters (general category Cf: zero-width space and
 *    joiners, word joiner, BOM, soft hyphen, bidi embeddings/overrides/isolates/marks, the tag block
 *    U+E0000–E007F), every other default-ignorable code point (variation selectors U+FE00–FE0F and
 *    U+E0100–E01EF, Mongolian free variation selectors, combining grapheme joiner, Hangul fillers), control
 *    characters (Cc) other than the White_Space ones (tab, line feed, vertical tab, form feed, carriage return,
 *    next line), and the braille blank U+2800.
 * 3. Runs of what joins one grapheme cluster cut to MAX_COMBINING_RUN ("Zalgo" text): the combining marks of
 *    every script (general category M) and everything else UAX #29 lets extend or open a cluster (see
 *    CLUSTER_RUNS). The catalogue is Unicode's own grapheme rules; test/text/combining-runs.test.ts checks
 *    the classes against the platform's segmenter (Intl.Segmenter, ICU) over every code point.
 *
 * Removing rather than replacing keeps words whole: `pro\u00ADcess` and `pro\u200Dcess` read `process`.
 */

/**
 * Combining marks kept after one base character; more is decoration, not writing. Writing needs up to 4:
 * Vietnamese 2 (ệ), Arabic shadda + haraka 2, Tibetan stacks 3 (ྒྲུ), Biblical Hebrew 4 (dagesh, shin dot,
 * vowel, cantillation: שָּׁ֣).
 */
export const MAX_COMBINING_RUN = 4;

/**
 * The runs UAX #29 (grapheme clusters) chains into one cluster, each as a character class. A run of one
 * class is cut to its first MAX_COMBINING_RUN code points:
 * - Extend and SpacingMark: general category M (Mn, Mc, Me), the other Grapheme_Extend characters (halfwidth
 *   katakana sound marks U+FF9E/F), emoji modifiers (U+1F3FB–1F3FF) and Thai/Lao AM (U+0E33, U+0EB3);
 * - Hangul conjoining jamo L, V and T (Hangul_Syllable_Type; Kirat Rai vowel signs chain as V): a syllable
 *   takes few of each, archaic ones included (ᄒᆞᆫ);
 * - Prepend letters (Malayalam dot reph U+0D4E and its kin; the Cf ones go in step 2).
 */
const CLUSTER_RUNS: readonly string[] = [
  String.raw`\p{M}\p{Grapheme_Extend}\p{Emoji_Modifier}\u0E33\u0EB3`,
  String.raw`\u1100-\u115F\uA960-\uA97C`,
  String.raw`\u1160-\u11A7\uD7B0-\uD7C6\u{16D63}\u{16D67}-\u{16D6A}`,
  String.raw`\u11A8-\u11FF\uD7CB-\uD7FB`,
  String.raw`\u0D4E\u{111C2}\u{111C3}\u{113D1}\u{1193F}\u{11941}\u{11A84}-\u{11A89}\u{11D46}\u{11F02}`,
];

// Controls that are White_Space (VT, FF, NEL) separate words like a space: kept, for the whitespace-canonical
// form of what is judged (src/judge/candidate.ts) to read as one space, not removed to join two words.
const INVISIBLE = /[\p{Cf}\p{Default_Ignorable_Code_Point}\u2800]|[^\P{Cc}\t\n\r\v\f\u0085]/gu;
const MAYBE_SPECIAL = /[^\u0020-\u007e\t\n\r]/;
const MARK_RUN = new RegExp(CLUSTER_RUNS.map((c) => `[${c}]{${MAX_COMBINING_RUN + 1},}`).join('|'), 'gu');
const SPACE = /\s/u;

export interface NormalizedText {
  /** The normalised text (not trimmed). */
  text: string;
  /** Invisible code points removed (step 2). */
  invisible: number;
  /** Visible code points left: not whitespace (after normalisation). */
  visible: number;
}

/**
 * Normalises `text` (steps 1–3 above) and counts what it removed. Idempotent:
 * `normalizeText(normalizeText(t).text).text === normalizeText(t).text`.
 */
export function normalizeText(text: string): NormalizedText {
  // Printable ASCII with tabs and line breaks is already normal (NFC leaves it alone, nothing to remove).
  if (!MAYBE_SPECIAL.test(text)) return { text, invisible: 0, visible: countVisible(text) };
  let invisible = 0;
  const out = text
    .normalize('NFC')
    .replace(INVISIBLE, () => {
      invisible += 1;
      return '';
    })
    .replace(MARK_RUN, cutRun)
    // Removal can bring a base and marks together again; NFC once more keeps the result idempotent.
    .normalize('NFC');
  return { text: out, invisible, visible: countVisible(out) };
}

const cutRun = (run: string): string => [...run].slice(0, MAX_COMBINING_RUN).join('');

/** `text` with every run of CLUSTER_RUNS cut to MAX_COMBINING_RUN code points (step 3 alone). */
export function cutClusterRuns(text: string): string {
  return text.replace(MARK_RUN, cutRun);
}

/** `normalizeText(text).text`. */
export function normalized(text: string): string {
  return normalizeText(text).text;
}

/** True when `text` holds a character the normaliser removes (an invisible or format character). */
export function hasInvisible(text: string): boolean {
  INVISIBLE.lastIndex = 0;
  const found = INVISIBLE.test(text);
  INVISIBLE.lastIndex = 0;
  return found;
}

/** Code points of `text` (what every length of a text a judge sees is counted in). */
export function codePoints(text: string): number {
  let n = 0;
  for (const _ of text) n += 1;
  return n;
}

/** Code points that are not whitespace (a char-code loop: no allocation on the ASCII majority). */
function countVisible(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0xdc00 && c <= 0xdfff) continue; // low surrogate: counted with its high one
    if (c > 0x20 && c < 0x7f) n += 1;
    else if (c >= 0x80 && !SPACE.test(String.fromCharCode(c))) n += 1;
  }
  return n;
}
