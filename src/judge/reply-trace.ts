/**
 * A reasoning judge's reply split into its trace and its final message (issue 37 item 1). The answer is the
 * final message only: the trace comes in a reasoning field (`reasoning_content`, vLLM and SGLang with a
 * `--reasoning-parser`, DeepSeek's API; `reasoning`, newer vLLM, Ollama, OpenRouter) or inline in the content
 * when the engine runs without a parser — in any family of the catalogue the policy's rollouts are read with
 * (src/text/reasoning-formats.ts: `<think>`, `<seed:think>`, `[THINK]`, `◁think▷`, harmony channels, Granite's
 * "Here is my thought process:", …), or with only the closing marker when the chat template opened the trace.
 * A JSON object drafted inside the trace never counts; a trace that never closed is a cut reply. Pure.
 */
import { foldText } from '../text/fold.js';
import { answerSpan } from '../text/reasoning.js';
import { FAMILIES, FORMAT_TABLE, type ReasoningFormatName } from '../text/reasoning-formats.js';
import { jsonBody } from './reply.js';

/** Where a reply's trace came from. */
export type TraceSource = 'field' | 'inline';

export interface SplitReply {
  /** The final message: what the executor parses as the role's JSON ('' when the reply is all trace). */
  answer: string;
  /** The trace, '' when there is none (markers of an inline trace included). */
  reasoning: string;
  /** Where the trace was; undefined without one. */
  source: TraceSource | undefined;
  /** An inline trace that never closed: the reply is all trace, a cut reply whatever its finish_reason. */
  unclosed: boolean;
}

/**
 * The formats tried, in order: `auto` (every family whose markers cannot occur in prose), then each family
 * whose markers are prose (Granite's "Here is my thought process:"), which `auto` leaves out for a rollout's
 * sake; a judge's answer is JSON, so prose before it is never the answer.
 */
const FORMATS: readonly ReasoningFormatName[] = [
  'auto',
  ...FORMAT_TABLE.filter(([, family]) => FAMILIES.some((f) => f.id === family && f.prose === true)).map(
    ([name]) => name,
  ),
];

/** Whether `text` is already a JSON object (no trace in front of it): then nothing is split off. */
function isJsonObject(text: string): boolean {
  const body = jsonBody(text);
  if (!body.startsWith('{') || !body.endsWith('}')) return false;
  try {
    JSON.parse(body);
    return true;
  } catch {
    return false;
  }
}

/**
 * Splits a reply's `content` and its reasoning field (`field`, when the server sent one). A content that is
 * already a JSON object is the answer as it is: markers quoted inside its strings (a judge quoting a rollout's
 * `</think>`) are not read. Otherwise the first format of FORMATS that finds a trace splits it; a content
 * with no trace in any family is the answer as it is (the executor then finds it invalid, or not).
 */
export function splitReply(content: string, field: string | undefined): SplitReply {
  const fieldTrace = field ?? '';
  const none: SplitReply = {
    answer: content,
    reasoning: fieldTrace,
    source: fieldTrace === '' ? undefined : 'field',
    unclosed: false,
  };
  if (content === '' || isJsonObject(content)) return none;
  const folded = foldText(content);
  for (const format of FORMATS) {
    const span = answerSpan(folded, format);
    if (span.kind === 'truncated') {
      return { answer: '', reasoning: joined(fieldTrace, content), source: 'inline', unclosed: true };
    }
    if (span.start === 0 && span.end === content.length) continue;
    const trace = content.slice(0, span.start);
    return {
      answer: content.slice(span.start, span.end),
      reasoning: joined(fieldTrace, trace),
      source: 'inline',
      unclosed: false,
    };
  }
  return none;
}

const joined = (a: string, b: string): string => (a === '' ? b : b === '' ? a : `${a}\n${b}`);

/** Characters per token of an English reasoning trace (see estimateReasoningTokens). */
const TRACE_CHARS_PER_TOKEN = 4.5;

/**
 * Tokens of a trace the server did not count (no `completion_tokens_details.reasoning_tokens`): its characters
 * ÷ 4.5. English prose runs at ~4–4.7 characters per token in the BPE vocabularies judges use (cl100k ~4,
 * o200k / Qwen / Llama 3 higher); the fake judge's sub-word vocabulary (test/fakes/thinking.ts) at 4.55, where
 * this is within 2 % (chars ÷ 4 was 13 % over). Tokenizer-free, so an estimate: marked as such wherever it is
 * reported (`reasoning_tokens_estimated`).
 */
export function estimateReasoningTokens(trace: string): number {
  return trace === '' ? 0 : Math.max(1, Math.round(trace.length / TRACE_CHARS_PER_TOKEN));
}

/** How much of a trace a transcript keeps: this many characters from its start and as many from its end. */
export const TRACE_KEEP_CHARS = 1_500;

/**
 * A trace bounded for transcripts and audits: whole up to 2 × TRACE_KEEP_CHARS, else its head and its tail
 * (where the model decides) around a marker that says how much was left out.
 */
export function boundTrace(trace: string): string {
  if (trace.length <= 2 * TRACE_KEEP_CHARS) return trace;
  const omitted = trace.length - 2 * TRACE_KEEP_CHARS;
  return `${trace.slice(0, TRACE_KEEP_CHARS)}\n[… ${omitted} characters of the trace omitted …]\n${trace.slice(-TRACE_KEEP_CHARS)}`;
}
