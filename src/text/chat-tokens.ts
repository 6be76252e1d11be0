/**
 * Chat-template control tokens of the common model families, as text. A leaf (no imports): the judge
 * engine neutralises candidates with it, the trainer adapters find the rollout and the question with it.
 *
 * Families: ChatML / Qwen / Phi-4 (`<|im_start|>role … <|im_end|>`, `<|im_sep|>`), Llama 3
 * (`<|begin_of_text|>`, `<|start_header_id|>role<|end_header_id|>`, `<|eot_id|>`), Gemma
 * (`<bos>`, `<start_of_turn>role … <end_of_turn>`), DeepSeek (`<｜begin▁of▁sentence｜>`, `<｜User｜>`,
 * `<｜Assistant｜>`, fullwidth bars), Mistral / Llama 2 (`<s>`, `</s>`, `[INST]`, `[/INST]`, `<<SYS>>`,
 * `[SYSTEM_PROMPT]`, `[TOOL_CALLS]` …), Phi-3 (`<|user|>`, `<|assistant|>`, `<|end|>`), and tokenizer
 * specials (`<pad>`, `<unk>`, `<eos>`, `[PAD]`, `[CLS]`, `[SEP]`, `<|endoftext|>`).
 */

/** `<|…|>` and DeepSeek's `<｜…｜>` (fullwidth bar), with an optional role word after role-opening tokens. */
const PIPE_TOKEN = String.raw`<[|\uFF5C][A-Za-z0-9_\u2581 .-]{1,48}[|\uFF5C]>`;
const ANGLE_TOKENS = String.raw`</?s>|<(?:bos|eos|pad|unk|mask|start_of_turn|end_of_turn|start_of_image|end_of_image)>|<</?SYS>>`;
const BRACKET_TOKENS = String.raw`\[/?(?:INST|SYSTEM_PROMPT|AVAILABLE_TOOLS|TOOL_CALLS|TOOL_RESULTS|TOOL_CONTENT)\]|\[(?:PAD|CLS|SEP|UNK|MASK|BOS|EOS)\]`;
const ROLE_WORD = String.raw`(?:system|user|assistant|model|tool|developer|ipython)`;

/** A role header: the token that opens a turn and the role word that follows it. */
const HEADER_RE = new RegExp(
  String.raw`<\|start_header_id\|>[^<\n]{0,64}<\|end_header_id\|>|(?:<\|im_start\|>|<start_of_turn>)${ROLE_WORD}?[ \t]*\n?`,
  'g',
);
const TOKEN_RE = new RegExp(`${PIPE_TOKEN}|${ANGLE_TOKENS}|${BRACKET_TOKENS}`, 'g');
/** Quick pre-check: text without any of these characters has no control token. */
const MAYBE_TOKEN = /[<[]/;

/**
 * Removes every control token and role header of the families above (each replaced by a line break, so
 * words on either side stay apart), then trims each end. Text without them is returned trimmed.
 */
export function stripChatTokens(text: string): string {
  if (!MAYBE_TOKEN.test(text)) return text.trim();
  return text
    .replace(HEADER_RE, '\n')
    .replace(TOKEN_RE, '\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}

/** True when `text` holds at least one control token. */
export function hasChatTokens(text: string): boolean {
  if (!MAYBE_TOKEN.test(text)) return false;
  HEADER_RE.lastIndex = 0;
  TOKEN_RE.lastIndex = 0;
  return HEADER_RE.test(text) || TOKEN_RE.test(text);
}

/** The opening of a user turn and what ends it, per family. */
const USER_TURNS: readonly RegExp[] = [
  /<\|im_start\|>user[ \t]*\n?([\s\S]*?)(?=<\|im_end\|>|<\|im_start\|>|$)/g,
  /<\|start_header_id\|>user<\|end_header_id\|>\n*([\s\S]*?)(?=<\|eot_id\|>|<\|start_header_id\|>|$)/g,
  /<start_of_turn>user[ \t]*\n?([\s\S]*?)(?=<end_of_turn>|<start_of_turn>|$)/g,
  /<[|\uFF5C]User[|\uFF5C]>([\s\S]*?)(?=<[|\uFF5C](?:Assistant|end\u2581of\u2581sentence)[|\uFF5C]>|<[|\uFF5C]User[|\uFF5C]>|$)/g,
  /<\|user\|>\n?([\s\S]*?)(?=<\|end\|>|<\|assistant\|>|$)/g,
  /\[INST\]([\s\S]*?)(?=\[\/INST\]|$)/g,
];

/**
 * The text of the last user turn of a chat-templated prompt (control tokens and a Llama 2 `<<SYS>>` block
 * removed), or undefined when the prompt has no recognisable user turn.
 */
export function lastUserTurn(prompt: string): string | undefined {
  let best: { at: number; text: string } | undefined;
  for (const re of USER_TURNS) {
    re.lastIndex = 0;
    for (const m of prompt.matchAll(re)) {
      if (best === undefined || m.index > best.at) best = { at: m.index, text: m[1] ?? '' };
    }
  }
  if (best === undefined) return undefined;
  return stripChatTokens(best.text.replace(/<<SYS>>[\s\S]*?<<\/SYS>>/g, ''));
}

/** Whitespace and control tokens are skipped when aligning a decoded query with its prompt. */
const isSpace = (c: string): boolean => /\s/u.test(c);

/**
 * The response part of an OpenRLHF `query` (decoded prompt + response): the prompt is matched after
 * removing control tokens from both and ignoring whitespace and Unicode normalisation differences (NFKC),
 * so leading pad/BOS tokens or a slightly different decode still find it. Undefined when the query does
 * not start with the prompt.
 */
export function responseAfterPrompt(query: string, prompt: string): string | undefined {
  const q = stripChatTokens(query).normalize('NFKC');
  const p = stripChatTokens(prompt).normalize('NFKC');
  let qi = 0;
  for (const pc of p) {
    if (isSpace(pc)) continue;
    while (qi < q.length && isSpace(q.charAt(qi))) qi += 1;
    const qc = q.codePointAt(qi);
    if (qc === undefined || String.fromCodePoint(qc) !== pc) return undefined;
    qi += qc > 0xffff ? 2 : 1;
  }
  return stripChatTokens(q.slice(qi));
}
