/**
 * The OpenAI chat-completions wire format, pure: our LlmRequest → request body, a response body → the
 * completion text and usage, an error body → a one-line message. No I/O; the transport (openai.ts) and
 * the bench's floor client both use it, so the bench sends exactly what the server sends.
 */
import type {
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionMessageParam,
} from 'openai/resources/chat/completions';

import type { ResponseFormat } from '../../settings/routing-file.js';
import { estimateReasoningTokens, splitReply } from '../reply-trace.js';
import type { LlmRequest, ReplyReasoning } from '../types.js';

const ERROR_SNIPPET_CHARS = 300;

export type TokensParam = 'max_tokens' | 'max_completion_tokens';

/** What one request is sent as. */
export interface RequestDialect {
  tokensParam: TokensParam;
  /** temperature and top_p are left out (the model samples at its default). */
  defaultSamplingOnly: boolean;
}

/** The parts of a request that go on the wire. */
export type WireRequest = Pick<
  LlmRequest,
  | 'model'
  | 'messages'
  | 'schemaName'
  | 'jsonSchema'
  | 'seed'
  | 'temperature'
  | 'topP'
  | 'maxTokens'
  | 'reasoningEffort'
>;

/** Chat-completions' own dialect (`max_tokens`, sampling values sent): what every engine but OpenAI's reasoning models takes. */
const PLAIN_DIALECT: RequestDialect = { tokensParam: 'max_tokens', defaultSamplingOnly: false };

export interface Completion {
  text: string;
  model: string;
  promptTokens: number;
  completionTokens: number;
  /** `usage.prompt_tokens_details.cached_tokens` (vLLM, OpenAI); null when the backend does not report it. */
  cachedPromptTokens: number | null;
  /** `choices[0].finish_reason` (`stop`, `length`, …); `unknown` when the server sent none. */
  finishReason: string;
  /** The reply's reasoning trace (a reasoning field, or inline in the content); undefined without one. */
  reasoning: ReplyReasoning | undefined;
  /**
   * `usage.completion_tokens_details.reasoning_tokens`; where the server reports none (or 0) but a trace
   * came, estimated from the trace (`reasoningTokensEstimated`); else 0.
   */
  reasoningTokens: number;
  reasoningTokensEstimated: boolean;
}

/** A 200 body read as a completion, or why it is not one (unparsable: no content, not JSON…). */
export type ReadCompletion =
  { ok: true; completion: Completion } | { ok: false; message: string; cause?: unknown };

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const count = (value: unknown): number => (typeof value === 'number' && Number.isFinite(value) ? value : 0);

/** A reported count, or null when absent or not a finite non-negative number: unknown is not 0. */
const reported = (value: unknown): number | null =>
  typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : null;

/** The message of an OpenAI-style error body, else the raw text, shortened. */
export function errorSnippet(text: string): string {
  let message = text;
  try {
    const parsed: unknown = JSON.parse(text);
    if (isRecord(parsed) && isRecord(parsed['error']) && typeof parsed['error']['message'] === 'string') {
      message = parsed['error']['message'];
    } else if (isRecord(parsed) && typeof parsed['message'] === 'string') {
      message = parsed['message'];
    }
  } catch {
    // not JSON: keep the text
  }
  const oneLine = message.replace(/\s+/g, ' ').trim();
  return oneLine.length > ERROR_SNIPPET_CHARS ? `${oneLine.slice(0, ERROR_SNIPPET_CHARS)}…` : oneLine;
}

/**
 * The fields of an error body that say what went wrong, from OpenAI-style `{error: {...}}` or the
 * top-level shape of vLLM / SGLang (`{object: "error", message, type, code}`). `nCtx` / `nPromptTokens`
 * are llama.cpp's fields on `exceed_context_size_error`.
 */
export interface WireError {
  message: string;
  type: string | undefined;
  code: string | undefined;
  param: string | undefined;
  nCtx: number | undefined;
  nPromptTokens: number | undefined;
}

const str = (value: unknown): string | undefined =>
  typeof value === 'string' ? value : typeof value === 'number' ? String(value) : undefined;
const int = (value: unknown): number | undefined =>
  typeof value === 'number' && Number.isSafeInteger(value) && value > 0 ? value : undefined;

/** Reads an error body; a body that is not JSON is its own (shortened) message with no fields. */
export function readWireError(text: string): WireError {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  const inner = isRecord(parsed) && isRecord(parsed['error']) ? parsed['error'] : parsed;
  if (!isRecord(inner)) {
    return {
      message: errorSnippet(text),
      type: undefined,
      code: undefined,
      param: undefined,
      nCtx: undefined,
      nPromptTokens: undefined,
    };
  }
  return {
    message: errorSnippet(text),
    type: str(inner['type']),
    code: str(inner['code']),
    param: str(inner['param']),
    nCtx: int(inner['n_ctx']),
    nPromptTokens: int(inner['n_prompt_tokens']),
  };
}

/** Same status, type, code and message: a failure that will repeat if the same request is sent again. */
export const errorSignature = (status: number, error: WireError): string =>
  `${status}|${error.type ?? ''}|${error.code ?? ''}|${error.message}`;

/**
 * The prompt does not fit the model's context: llama.cpp's `exceed_context_size_error` (with `n_ctx`),
 * OpenAI's `context_length_exceeded` code. vLLM and SGLang answer a plain 400 `BadRequestError` with no
 * distinguishing field, so for them (and only when type/code say nothing else) their fixed wording is read.
 */
export function isContextOverflow(status: number, error: WireError): boolean {
  if (status !== 400 && status !== 413) return false;
  if (error.type === 'exceed_context_size_error' || error.code === 'context_length_exceeded') return true;
  if (error.nCtx !== undefined && error.nPromptTokens !== undefined) return true;
  const plain =
    error.type === undefined || error.type === 'BadRequestError' || error.type === 'invalid_request_error';
  return plain && /maximum context length|longer than the model's context length/i.test(error.message);
}

/** Error types that blame the caller's identity, quota or target, never the request's shape. */
const NOT_SHAPE_TYPES = new Set([
  'authentication_error',
  'permission_error',
  'permission_denied',
  'not_found_error',
  'rate_limit_error',
  'insufficient_quota',
  'exceed_context_size_error',
]);
/** Statuses that are about something other than the request body's shape. */
const NOT_SHAPE_STATUSES = new Set([401, 402, 403, 404, 408, 409, 413, 429]);

/**
 * A 4xx that rejects the request's shape — the body, not who sent it, what it targets or how often — and
 * does not name another parameter (`param` set to something other than `response_format`). In
 * `json_schema` mode the one optional feature of the body is the schema, so such a rejection makes the
 * schema a suspect (see schemaRefusal; llama.cpp's "JSON schema conversion failed" is a 400
 * `invalid_request_error` with no param). Decided from status class and the type/code/param fields.
 */
export function isShapeRejection(status: number, error: WireError): boolean {
  if (status < 400 || status >= 500 || NOT_SHAPE_STATUSES.has(status)) return false;
  if (isContextOverflow(status, error)) return false;
  if (error.type !== undefined && NOT_SHAPE_TYPES.has(error.type)) return false;
  if (error.code !== undefined && NOT_SHAPE_TYPES.has(error.code)) return false;
  return error.param === undefined || /response_format|json_schema/.test(error.param);
}

/** Words by which an error names the structured-output request: the parameter, the schema, its grammar. */
const NAMES_SCHEMA = /response_format|json[_ -]?schema|\bschema\b|grammar/i;

/** The error names the schema: in `param`, `code` or its message. */
export function namesSchema(error: WireError): boolean {
  return [error.param, error.code, error.message].some(
    (field) => field !== undefined && NAMES_SCHEMA.test(field),
  );
}

/**
 * How much a refused `json_schema` request says about the schema itself:
 * - `named`: a 4xx shape rejection (see isShapeRejection) whose message, code or param names the schema
 *   (`response_format`, `json_schema`, "JSON schema", `schema`, `grammar`) — llama.cpp's 400
 *   "JSON schema conversion failed", OpenAI's 400 "Invalid schema for response_format". Evidence enough
 *   once a `json_object` probe succeeds.
 * - `suspect`: a 4xx shape rejection that names nothing, or a 5xx that names the schema (older llama.cpp
 *   builds answer 500 `"json_schema": JSON schema conversion failed`, or 500 "response_format type must be
 *   one of …"). Evidence only if, after a successful `json_object` probe, a second `json_schema` request is
 *   refused with the same error.
 * - undefined: anything else — a 5xx or 429 that does not name the schema, a timeout, an auth, quota,
 *   context or rate-limit error — is about the server, never the schema.
 */
export function schemaRefusal(status: number, error: WireError): 'named' | 'suspect' | undefined {
  if (isShapeRejection(status, error)) return namesSchema(error) ? 'named' : 'suspect';
  if (status >= 500 && namesSchema(error)) return 'suspect';
  return undefined;
}

const schemaInstructions = new WeakMap<Record<string, unknown>, string>();

/** In json_object mode the model does not see the schema unless the prompt carries it. */
function withSchemaInstruction(request: WireRequest): ChatCompletionMessageParam[] {
  let instruction = schemaInstructions.get(request.jsonSchema);
  if (instruction === undefined) {
    instruction = `\n\nAnswer with one JSON object that conforms to this JSON Schema:\n${JSON.stringify(request.jsonSchema)}`;
    schemaInstructions.set(request.jsonSchema, instruction);
  }
  const messages: ChatCompletionMessageParam[] = request.messages.map((m) => ({
    role: m.role,
    content: m.content,
  }));
  const system = messages.find((m) => m.role === 'system');
  if (system !== undefined && typeof system.content === 'string') {
    system.content += instruction;
  } else {
    messages.unshift({ role: 'system', content: instruction.trimStart() });
  }
  return messages;
}

/**
 * The request's body fields in `mode`. The budget goes in the dialect's field (`max_tokens`, or
 * `max_completion_tokens`); a dialect of default sampling only sends no temperature or top_p;
 * `reasoning_effort` is sent when the request carries one.
 */
export function toChatParams(
  request: WireRequest,
  mode: ResponseFormat,
  dialect: RequestDialect = PLAIN_DIALECT,
): ChatCompletionCreateParamsNonStreaming {
  const params: ChatCompletionCreateParamsNonStreaming =
    mode === 'json_schema'
      ? {
          model: request.model,
          messages: request.messages,
          response_format: {
            type: 'json_schema',
            json_schema: { name: request.schemaName, strict: true, schema: request.jsonSchema },
          },
        }
      : {
          model: request.model,
          messages: withSchemaInstruction(request),
          response_format: { type: 'json_object' },
        };
  if (request.seed !== undefined) params.seed = request.seed;
  if (!dialect.defaultSamplingOnly) {
    if (request.temperature !== undefined) params.temperature = request.temperature;
    if (request.topP !== undefined) params.top_p = request.topP;
  }
  if (request.maxTokens !== undefined) params[dialect.tokensParam] = request.maxTokens;
  if (request.reasoningEffort !== undefined) params.reasoning_effort = request.reasoningEffort;
  return params;
}

/** The trace of a reply's message: `reasoning_content` (vLLM, SGLang, DeepSeek) or `reasoning` (newer vLLM, Ollama). */
function reasoningField(message: unknown): string | undefined {
  if (!isRecord(message)) return undefined;
  for (const key of ['reasoning_content', 'reasoning']) {
    const value = message[key];
    if (typeof value === 'string' && value !== '') return value;
  }
  return undefined;
}

/**
 * Reasoning tokens of a reply: the server's `completion_tokens_details.reasoning_tokens` when it reports some,
 * else an estimate from the trace (marked), else 0.
 */
function reasoningTokensOf(
  usage: Record<string, unknown>,
  trace: string,
): { reasoningTokens: number; reasoningTokensEstimated: boolean } {
  const details = usage['completion_tokens_details'];
  const reportedTokens = isRecord(details) ? (reported(details['reasoning_tokens']) ?? 0) : 0;
  if (reportedTokens > 0 || trace === '')
    return { reasoningTokens: reportedTokens, reasoningTokensEstimated: false };
  return { reasoningTokens: estimateReasoningTokens(trace), reasoningTokensEstimated: true };
}

/**
 * Narrows a chat.completion body; missing or empty content is unparsable, unless a reasoning trace came (the
 * reply is then all trace: cut, or invalid, as the executor reads it). The text is the final message only
 * (reply-trace.ts): a trace in a reasoning field or inline in the content is set apart.
 */
export function readCompletion(body: string, requestedModel: string): ReadCompletion {
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch (cause) {
    return { ok: false, message: 'judge backend answered 200 with a body that is not JSON', cause };
  }
  if (!isRecord(json)) return { ok: false, message: 'judge backend answered 200 with a non-object body' };
  const choices = json['choices'];
  const first: unknown = Array.isArray(choices) ? choices[0] : undefined;
  const message = isRecord(first) ? first['message'] : undefined;
  const content = isRecord(message) ? message['content'] : undefined;
  const finish =
    isRecord(first) && typeof first['finish_reason'] === 'string' ? first['finish_reason'] : 'unknown';
  const usage = isRecord(json['usage']) ? json['usage'] : {};
  const details = usage['prompt_tokens_details'];
  const cachedPromptTokens = isRecord(details) ? reported(details['cached_tokens']) : null;
  const model = typeof json['model'] === 'string' ? json['model'] : requestedModel;
  const split = splitReply(
    typeof content === 'string' && content.trim() !== '' ? content : '',
    reasoningField(message),
  );
  const text = split.answer.trim() === '' ? '' : split.answer;
  // No content is an error, unless the budget ran out before any (e.g. a reasoning model spent it all
  // thinking): that is a truncated reply with empty text; or a trace came without an answer after it.
  if (text === '' && finish !== 'length' && split.source === undefined) {
    const refusal =
      isRecord(message) && typeof message['refusal'] === 'string'
        ? `; refusal: ${errorSnippet(message['refusal'])}`
        : '';
    return { ok: false, message: `judge reply has no content (finish_reason ${finish}${refusal})` };
  }
  return {
    ok: true,
    completion: {
      text,
      model,
      promptTokens: count(usage['prompt_tokens']),
      completionTokens: count(usage['completion_tokens']),
      cachedPromptTokens,
      finishReason: finish,
      reasoning:
        split.source === undefined
          ? undefined
          : { text: split.reasoning, source: split.source, unclosed: split.unclosed },
      ...reasoningTokensOf(usage, split.reasoning),
    },
  };
}
