/**
 * Chat-template control tokens of the common model families, as text: where a turn ends, what to remove
 * from a candidate, where the rollout and the question are in a templated prompt. A leaf. Every token is
 * matched on the folded copy (src/text/fold.ts), so fullwidth, case and look-alike spellings are tokens too.
 *
 * Families: ChatML / Qwen / Phi-4 (`<|im_start|>role … <|im_end|>`, `<|im_sep|>`), Llama 3
 * (`<|begin_of_text|>`, `<|start_header_id|>role<|end_header_id|>`, `<|eot_id|>`), Gemma
 * (`<bos>`, `<start_of_turn>role … <end_of_turn>`), DeepSeek (`<｜begin▁of▁sentence｜>`, `<｜User｜>`,
 * `<｜Assistant｜>`, fullwidth bars), Mistral / Llama 2 (`<s>`, `</s>`, `[INST]`, `[/INST]`, `<<SYS>>`,
 * `[SYSTEM_PROMPT]`, `[TOOL_CALLS]` …), Phi-3 (`<|user|>`, `<|assistant|>`, `<|end|>`), gpt-oss harmony
 * (`<|start|>user<|message|>… <|end|>`), and tokenizer
 * specials (`<pad>`, `<unk>`, `<eos>`, `[PAD]`, `[CLS]`, `[SEP]`, `<|endoftext|>`). What is removed is the
 * tokenizers' catalogue of special tokens (src/text/chat-tokens-data.ts: Gemma 4's one-sided `<|turn>`, GLM's
 * `[gMASK]` / `<sop>`, Command R's `<BOS_TOKEN>`, EXAONE's `[|user|]`, MiniMax's `]~b]` …) and the shapes above.
 */
import { CONTROL_TOKENS } from './chat-tokens-data.js';
import { fold, foldText, type Folded } from './fold.js';
import { isMention, literal } from './markers.js';
import { comparableForm, segmentAt } from './same-text.js';

/**
 * The tokens that end a turn or the text, as chat templates and tokenizers spell them: llama.cpp's
 * end-of-generation texts (ggml-org/llama.cpp src/llama-vocab.cpp, `llama_vocab::impl::load`: the tokens it
 * stops on whatever a GGUF declares), then the turn ends of templates it does not list.
 */
export const END_OF_TURN_TOKENS: ReadonlyArray<{ token: string; family: string }> = [
  { token: '<|eot_id|>', family: 'Llama 3' },
  { token: '<|eom_id|>', family: 'Llama 3 (end of a tool-calling message)' },
  { token: '<|im_end|>', family: 'ChatML: Qwen, Phi-4, Kimi K2, Nemotron, OLMo' },
  { token: '<|end|>', family: 'Phi-3 (a harmony text: the end of one message, not of the turn)' },
  { token: '<|return|>', family: 'gpt-oss harmony' },
  { token: '<|call|>', family: 'gpt-oss harmony (a harmony text: a tool call, not the end of the turn)' },
  { token: '<|flush|>', family: 'Solar Open' },
  { token: '<|calls|>', family: 'Solar Open' },
  { token: '<end_of_turn>', family: 'Gemma 1–3' },
  { token: '<turn|>', family: 'Gemma 4' },
  { token: '<|tool_response>', family: 'Gemma 4 (waits for a tool)' },
  { token: '<|endoftext|>', family: 'GPT-2, Qwen, Phi, GLM, OLMo' },
  { token: '<|end_of_text|>', family: 'Llama 3 base, Granite' },
  { token: '</s>', family: 'Llama 2, Mistral, ERNIE (not a `<s>…</s>` strikethrough on one line)' },
  { token: '<eos>', family: 'Gemma' },
  { token: '<EOT>', family: 'CodeLlama infill (`_<EOT>` too)' },
  { token: '[EOT]', family: 'Kimi K2' },
  { token: '[EOS]', family: 'Kimi K2' },
  { token: '<end_of_utterance>', family: 'SmolDocling' },
  { token: '<｜end▁of▁sentence｜>', family: 'DeepSeek' },
  { token: '[e~[', family: 'MiniMax M2' },
  // Templates' own turn ends, beyond llama.cpp's list.
  { token: '<|END_OF_TURN_TOKEN|>', family: 'Cohere Command R / A' },
  { token: '[|endofturn|]', family: 'EXAONE' },
  { token: '<seed:eos>', family: 'Seed-OSS' },
  { token: '<|eot|>', family: 'MuseGlimmer' },
  { token: '<|content_model_end_sampling|>', family: 'Inkling' },
  { token: '<|close|>message<|sep|>', family: 'Kimi K3' },
  { token: '<|user|>', family: 'GLM-4 (its stop tokens: the next user turn)' },
  { token: '<|observation|>', family: 'GLM-4 (its stop tokens: a tool result)' },
];

/** In a harmony text these end a message (another follows in the same turn), not the turn. */
const HARMONY_MESSAGE_ENDS: ReadonlySet<string> = new Set([fold('<|end|>'), fold('<|call|>')]);
const STRIKE_OPEN = fold('<s>');
const STRIKE_CLOSE = fold('</s>');
const CHANNEL = '<|channel|>';

const EOT_RE = new RegExp(
  END_OF_TURN_TOKENS.map((t) => literal(t.token))
    .sort((a, b) => b.length - a.length)
    .join('|'),
  'g',
);

/**
 * The offset in `f.source` where the turn ends: the first end-of-turn token (END_OF_TURN_TOKENS) that is
 * not a mention (src/text/markers.ts). In a harmony text (`harmony`: the format reads gpt-oss channels and
 * the text has one) `<|end|>` and `<|call|>` end a message, not the turn. Undefined: the text never ends
 * its turn (a completion decoded without special tokens, or one the engine stopped itself).
 */
export function endOfTurn(f: Folded, harmony: boolean): number | undefined {
  const t = f.text;
  const isHarmony = harmony && t.includes(CHANNEL);
  EOT_RE.lastIndex = 0;
  for (const m of t.matchAll(EOT_RE)) {
    const s = m.index;
    const e = s + m[0].length;
    if (isHarmony && HARMONY_MESSAGE_ENDS.has(m[0])) continue;
    if (isMention(t, s, e)) continue;
    if (m[0] === STRIKE_CLOSE) {
      const lineStart = t.lastIndexOf('\n', s) + 1;
      if (t.slice(lineStart, s).includes(STRIKE_OPEN)) continue;
    }
    return f.sourceAt(s);
  }
  return undefined;
}

/** `<|…|>` and DeepSeek's `<｜…｜>` (folded to `|`), with an optional role word after role-opening tokens. */
const PIPE_TOKEN = String.raw`<\|[a-z0-9_\u2581 .-]{1,48}\|>`;
const ANGLE_TOKENS = String.raw`</?s>|<(?:bos|eos|pad|unk|mask|start_of_turn|end_of_turn|start_of_image|end_of_image)>|<</?sys>>`;
const BRACKET_TOKENS = String.raw`\[/?(?:inst|system_prompt|available_tools|tool_calls|tool_results|tool_content)\]|\[(?:pad|cls|sep|unk|mask|bos|eos)\]`;
const ROLE_WORD = String.raw`(?:system|user|assistant|model|tool|developer|ipython)`;

/** A role header: the token that opens a turn and the role word that follows it. */
const HEADER_RE = new RegExp(
  String.raw`<\|start_header_id\|>[^<\n]{0,64}<\|end_header_id\|>|(?:<\|im_start\|>|<start_of_turn>)${ROLE_WORD}?[ \t]*\n?`,
  'g',
);
/**
 * Every special token of the tokenizer catalogue (src/text/chat-tokens-data.ts), folded, longest first;
 * then the shapes of its numbered runs and of Gemma 4's one-sided pairs (`<|turn>` … `<turn|>`).
 */
const CATALOGUE_TOKENS = [...new Set(CONTROL_TOKENS.map((t) => literal(fold(t))))]
  .sort((a, b) => b.length - a.length)
  .join('|');
const NUMBERED_TOKENS = String.raw`<(?:unused|extra_id_|special_|mask:)[0-9]{1,4}>`;
const ONE_SIDED_TOKENS = String.raw`<\|[a-z][a-z_]{1,31}>|<[a-z][a-z_]{1,31}\|>`;
const TOKEN_RE = new RegExp(
  `${CATALOGUE_TOKENS}|${PIPE_TOKEN}|${ANGLE_TOKENS}|${BRACKET_TOKENS}|${NUMBERED_TOKENS}|${ONE_SIDED_TOKENS}`,
  'g',
);
/** Quick pre-check on the folded copy: without these characters there is no control token. */
const MAYBE_TOKEN = /[<[\]]/;

/** The spans of `f.source` that are role headers or control tokens, in order, not overlapping. */
export function chatTokenSpans(f: Folded): Array<[number, number]> {
  if (!MAYBE_TOKEN.test(f.text)) return [];
  const spans: Array<[number, number]> = [];
  for (const re of [HEADER_RE, TOKEN_RE]) {
    re.lastIndex = 0;
    for (const m of f.text.matchAll(re)) spans.push([m.index, m.index + m[0].length]);
  }
  spans.sort((a, b) => a[0] - b[0] || b[1] - a[1]);
  const out: Array<[number, number]> = [];
  let end = -1;
  for (const [s, e] of spans) {
    if (s < end) continue;
    out.push([f.sourceAt(s), f.sourceAt(e)]);
    end = e;
  }
  return out;
}

/**
 * Removes every control token and role header of the families above (each replaced by a line break, so
 * words on either side stay apart), then trims each end. Text without them is returned trimmed.
 */
export function stripChatTokens(text: string | Folded): string {
  const f = typeof text === 'string' ? foldText(text) : text;
  const spans = chatTokenSpans(f);
  if (spans.length === 0) return f.source.trim();
  let out = '';
  let at = 0;
  for (const [s, e] of spans) {
    out += `${f.source.slice(at, s)}\n`;
    at = e;
  }
  return `${out}${f.source.slice(at)}`.replace(/\n{3,}/g, '\n\n').trim();
}

/** True when `text` holds at least one control token. */
export function hasChatTokens(text: string): boolean {
  return chatTokenSpans(foldText(text)).length > 0;
}

/** The opening of a user turn and what ends it, per family (on the folded copy). */
const USER_TURNS: readonly RegExp[] = [
  /<\|im_start\|>user[ \t]*\n?([\s\S]*?)(?=<\|im_end\|>|<\|im_start\|>|$)/g,
  /<\|start_header_id\|>user<\|end_header_id\|>\n*([\s\S]*?)(?=<\|eot_id\|>|<\|start_header_id\|>|$)/g,
  /<start_of_turn>user[ \t]*\n?([\s\S]*?)(?=<end_of_turn>|<start_of_turn>|$)/g,
  /<\|user\|>([\s\S]*?)(?=<\|(?:assistant|end\u2581of\u2581sentence)\|>|<\|user\|>|<\|end\|>|$)/g,
  /\[inst\]([\s\S]*?)(?=\[\/inst\]|$)/g,
  /<\|start\|>user<\|message\|>([\s\S]*?)(?=<\|end\|>|<\|start\|>|$)/g,
];

/**
 * The text of the last user turn of a chat-templated prompt (control tokens and a Llama 2 `<<SYS>>` block
 * removed), or undefined when the prompt has no recognisable user turn.
 */
export function lastUserTurn(prompt: string): string | undefined {
  const f = foldText(prompt);
  let best: { at: number; start: number; end: number } | undefined;
  for (const re of USER_TURNS) {
    re.lastIndex = 0;
    for (const m of f.text.matchAll(re)) {
      const start = m.index + m[0].length - (m[1] ?? '').length;
      if (best === undefined || m.index > best.at)
        best = { at: m.index, start, end: start + (m[1] ?? '').length };
    }
  }
  if (best === undefined) return undefined;
  const turn = f.slice(f.sourceAt(best.start), f.sourceAt(best.end));
  return stripChatTokens(turn.source.replace(/<<SYS>>[\s\S]*?<<\/SYS>>/gi, ''));
}

/** Role headers that open the assistant's turn (folded). */
const ASSISTANT_HEADER =
  /<\|start\|>assistant(?=<\|channel\|>)|<\|im_start\|>assistant[ \t]*\n?|<\|start_header_id\|>assistant<\|end_header_id\|>\n*|<start_of_turn>model[ \t]*\n?|<\|assistant\|>\n?|\[\/inst\]/g;

/**
 * A query sent without its prompt, split where the rollout starts: after the LAST assistant header when the
 * query is chat-templated (the rollout is the last assistant turn, as /verify takes the last assistant
 * message; an earlier one is a few-shot example or a previous turn), else the whole query is the rollout
 * and there is no prompt.
 */
export function splitAtLastAssistantHeader(query: string): { prompt: string | undefined; rollout: string } {
  const f = foldText(query);
  let last: RegExpExecArray | undefined;
  ASSISTANT_HEADER.lastIndex = 0;
  for (const m of f.text.matchAll(ASSISTANT_HEADER)) last = m;
  if (last === undefined) return { prompt: undefined, rollout: query };
  return {
    prompt: query.slice(0, f.sourceAt(last.index + last[0].length)),
    rollout: query.slice(f.sourceAt(last.index + last[0].length)),
  };
}

/** The rollout in a query sent without its prompt: `splitAtLastAssistantHeader(query).rollout`. */
export function afterAssistantHeader(query: string): string {
  return splitAtLastAssistantHeader(query).rollout;
}

const isSpace = (c: string): boolean => /\s/u.test(c);

/**
 * The response part of an OpenRLHF `query` (decoded prompt + response), as the query spells it: control
 * tokens kept (the preparation path reads the trace and the end of the turn from them). The prompt is found
 * by comparing without control tokens and whitespace and under NFKD on both sides (src/text/same-text.ts), so
 * canonically equivalent spellings, leading pad/BOS tokens or a
 * slightly different decode still match; the control tokens and headers that end the prompt are skipped.
 * Undefined when the query does not start with the prompt.
 */
export function responseAfterPrompt(query: string, prompt: string): string | undefined {
  // Both sides in one normalisation, segment by segment (src/text/same-text.ts: NFKD, issue 38 item 3).
  const p = [...comparableForm(stripChatTokens(prompt))];
  const q = foldText(query);
  const skips = chatTokenSpans(q);
  let next = 0;
  let pi = 0;
  let qi = 0;
  /** Skips whitespace and control tokens at the query offset. */
  const skip = (): void => {
    for (;;) {
      while (next < skips.length && (skips[next]?.[1] ?? 0) <= qi) next++;
      const span = skips[next];
      if (span !== undefined && span[0] === qi) qi = span[1];
      else if (qi < query.length && isSpace(query.charAt(qi))) qi += 1;
      else return;
    }
  };
  while (pi < p.length) {
    skip();
    if (qi >= query.length) return undefined;
    const segment = segmentAt(query, qi);
    for (const c of segment.form) {
      if (c !== p[pi]) return undefined;
      pi += 1;
    }
    qi = segment.end;
  }
  // The prompt's own ending (`<|im_end|>\n<|im_start|>assistant\n`): as many control tokens as it has.
  const tail = foldText(prompt.slice(lastContentIndex(prompt) + 1));
  for (let k = chatTokenSpans(tail).length; k > 0; k--) {
    const before = qi;
    while (qi < query.length && isSpace(query.charAt(qi))) qi += 1;
    while (next < skips.length && (skips[next]?.[1] ?? 0) <= qi) next++;
    const span = skips[next];
    if (span === undefined || span[0] !== qi) {
      qi = before;
      break;
    }
    qi = span[1];
  }
  return query.slice(qi);
}

/** The offset of the last character of `prompt` that is neither whitespace nor inside a control token. */
function lastContentIndex(prompt: string): number {
  const f = foldText(prompt);
  const spans = chatTokenSpans(f);
  for (let i = prompt.length - 1; i >= 0; i--) {
    if (isSpace(prompt.charAt(i))) continue;
    if (spans.some(([s, e]) => i >= s && i < e)) continue;
    return i;
  }
  return -1;
}
