/**
 * The final answer of a reasoning model's completion (REASONING_FORMAT). A leaf: pure string functions.
 *
 * - `think`: `<think>…</think>`, `<thinking>…</thinking>`, `<reasoning>…</reasoning>` blocks (any case,
 *   spaces inside the brackets allowed). The answer is the text after the last closing tag; a closing tag
 *   without its opening one is the usual Qwen3 / DeepSeek-R1 case (the chat template put `<think>` in the
 *   prompt). An opening tag at the start of a line with no closing tag after it is a cut-off trace:
 *   `truncated`; one inside a sentence ("the policy emits <think> tags") is a mention and stays text.
 * - `harmony`: gpt-oss channels, `<|channel|>analysis<|message|>…<|end|>…<|channel|>final<|message|>…`.
 *   The answer is the body of the last `final` message (its `<|return|>` may be missing: stop tokens are
 *   usually not decoded). A message after it that never ended, or no `final` message and a last message
 *   that never ended, is `truncated`. The form with special tokens skipped in the decode (`analysis…
 *   assistantfinal…`) is recognised by its `assistantfinal` marker when the text starts with `analysis`.
 * - `auto` (the default): `harmony` when the text has a harmony channel, then `think` on what is left.
 * - `none`: the text as it is.
 *
 * Run it on normalised text (src/text/normalize.ts), so `<thi\u200Bnk>` and fullwidth brackets are tags.
 */
import { codePoints } from './normalize.js';

export const REASONING_FORMATS = ['auto', 'think', 'harmony', 'none'] as const;
export type ReasoningFormat = (typeof REASONING_FORMATS)[number];

export type Extraction =
  /** `reasoningChars`: code points before the answer (the trace with its tags); 0 without a trace. */
  | { kind: 'answer'; answer: string; reasoningChars: number }
  /** A trace that never closed; `reasoningChars` counts the whole text. */
  | { kind: 'truncated'; reasoningChars: number };

/** An opening tag that starts a line: a model opens its trace there; one inside a sentence is a mention. */
const OPEN_TAG = /(?:^|\n)[ \t]*<\s*(?:think|thinking|reasoning)\s*>/i;
const CLOSE_TAG = /<\s*\/\s*(?:think|thinking|reasoning)\s*>/gi;
const CHANNEL = '<|channel|>';
const MESSAGE = '<|message|>';
const ENDS = ['<|end|>', '<|return|>', '<|call|>', '<|start|>'];
const SKIPPED_FINAL = 'assistantfinal';

/** Extracts the final answer of `text` in `format`. */
export function extractAnswer(text: string, format: ReasoningFormat): Extraction {
  switch (format) {
    case 'none':
      return { kind: 'answer', answer: text, reasoningChars: 0 };
    case 'think':
      return extractThink(text);
    case 'harmony':
      return extractHarmony(text);
    case 'auto': {
      const harmony = extractHarmony(text);
      if (harmony.kind === 'truncated') return harmony;
      const think = extractThink(harmony.answer);
      if (think.kind === 'truncated') return { kind: 'truncated', reasoningChars: codePoints(text) };
      return {
        kind: 'answer',
        answer: think.answer,
        reasoningChars: harmony.reasoningChars + think.reasoningChars,
      };
    }
  }
}

function extractThink(text: string): Extraction {
  let answerAt = 0;
  CLOSE_TAG.lastIndex = 0;
  for (const m of text.matchAll(CLOSE_TAG)) answerAt = m.index + m[0].length;
  const answer = text.slice(answerAt);
  if (OPEN_TAG.test(answer)) return { kind: 'truncated', reasoningChars: codePoints(text) };
  return { kind: 'answer', answer, reasoningChars: codePoints(text.slice(0, answerAt)) };
}

interface Message {
  channel: string;
  /** Offset of the body in the text. */
  bodyAt: number;
  body: string;
  ended: boolean;
}

/** The harmony messages of `text`: one per `<|channel|>`, each up to its end token or the next channel. */
function harmonyMessages(text: string): Message[] {
  const out: Message[] = [];
  let at = text.indexOf(CHANNEL);
  while (at >= 0) {
    const next = text.indexOf(CHANNEL, at + CHANNEL.length);
    const segmentEnd = next < 0 ? text.length : next;
    const segment = text.slice(at + CHANNEL.length, segmentEnd);
    const m = segment.indexOf(MESSAGE);
    const header = m < 0 ? segment : segment.slice(0, m);
    const bodyStart = m < 0 ? segment.length : m + MESSAGE.length;
    let bodyEnd = segment.length;
    let ended = false;
    for (const end of ENDS) {
      const e = segment.indexOf(end, bodyStart);
      if (e >= 0 && e < bodyEnd) {
        bodyEnd = e;
        ended = true;
      }
    }
    out.push({
      channel: header.trim().split(/\s/)[0]?.toLowerCase() ?? '',
      bodyAt: at + CHANNEL.length + bodyStart,
      body: segment.slice(bodyStart, bodyEnd),
      ended,
    });
    at = next;
  }
  return out;
}

function extractHarmony(text: string): Extraction {
  if (!text.includes(CHANNEL)) {
    const marker = text.lastIndexOf(SKIPPED_FINAL);
    if (marker >= 0 && /^\s*analysis/.test(text)) {
      const answerAt = marker + SKIPPED_FINAL.length;
      return {
        kind: 'answer',
        answer: text.slice(answerAt),
        reasoningChars: codePoints(text.slice(0, answerAt)),
      };
    }
    return { kind: 'answer', answer: text, reasoningChars: 0 };
  }
  const messages = harmonyMessages(text);
  let final = -1;
  messages.forEach((m, i) => {
    if (m.channel === 'final') final = i;
  });
  const last = messages[messages.length - 1];
  if (final < 0) {
    // No final answer: a message cut off is a truncated trace; else the answer is what follows the last end.
    if (last === undefined || !last.ended) return { kind: 'truncated', reasoningChars: codePoints(text) };
    const endAt = last.bodyAt + last.body.length;
    return {
      kind: 'answer',
      answer: stripEnd(text.slice(endAt)),
      reasoningChars: codePoints(text.slice(0, endAt)),
    };
  }
  for (const m of messages.slice(final + 1)) {
    if (!m.ended) return { kind: 'truncated', reasoningChars: codePoints(text) };
  }
  const chosen = messages[final];
  if (chosen === undefined) return { kind: 'truncated', reasoningChars: codePoints(text) };
  return { kind: 'answer', answer: chosen.body, reasoningChars: codePoints(text.slice(0, chosen.bodyAt)) };
}

/** The text after a message's end token, without the token itself. */
function stripEnd(rest: string): string {
  for (const end of ENDS) if (rest.startsWith(end)) return rest.slice(end.length);
  return rest;
}

const OPEN_TAG_AT_END = /<\s*(?:think|thinking|reasoning)\s*>\s*$/i;
const HARMONY_OPEN_AT_END = /<\|channel\|>\s*(?:analysis|commentary)\b[^<]*<\|message\|>\s*$/;

/**
 * The trace opener a chat-templated prompt ends with (Qwen3 and DeepSeek-R1 templates put `<think>` in the
 * generation prompt; a harmony prompt may end inside an analysis message), or undefined. A trainer adapter
 * prefixes the rollout with it, so a rollout cut off inside that trace is `truncated`, not judged.
 */
export function traceOpenedBy(prompt: string, format: ReasoningFormat): string | undefined {
  if (format === 'none') return undefined;
  if (format !== 'harmony') {
    const m = OPEN_TAG_AT_END.exec(prompt);
    if (m !== null) return m[0];
  }
  if (format !== 'think') {
    const m = HARMONY_OPEN_AT_END.exec(prompt);
    if (m !== null) return m[0];
  }
  return undefined;
}
