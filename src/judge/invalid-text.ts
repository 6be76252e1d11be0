/**
 * A rollout that is not text (issue 33): a NUL (U+0000) or an unpaired UTF-16 surrogate. Such a candidate is
 * the policy's output, so it is that candidate's defect, a real 0 (`rejected_input`, reason `invalid_text`),
 * not a 400 for every candidate of its request. A leaf: pure string functions.
 */

const NUL = '\u0000';
/** With the `u` flag a surrogate class matches only unpaired surrogates: a pair is one code point. */
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;
const LONE_SURROGATES = /[\uD800-\uDFFF]/gu;

/** True when `text` holds a NUL or an unpaired surrogate. */
export function isInvalidText(text: string): boolean {
  return text.includes(NUL) || LONE_SURROGATE.test(text);
}

/**
 * The form an invalid candidate is keyed and cached under: its unpaired surrogates as NUL. UTF-8 hashing
 * would turn a lone surrogate into U+FFFD and key it like a valid text that holds U+FFFD; with NUL instead
 * it can only meet another invalid text, and preparing it again finds it invalid again.
 */
export function invalidTextKeyForm(text: string): string {
  return text.replace(LONE_SURROGATES, NUL);
}
