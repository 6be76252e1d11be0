/** `text` spelled in the Unicode tag block (U+E0000–E007F): invisible, but some LLMs read it. */
export const toTags = (text: string): string =>
  [...text].map((c) => String.fromCodePoint(0xe0000 + (c.codePointAt(0) ?? 0))).join('');
