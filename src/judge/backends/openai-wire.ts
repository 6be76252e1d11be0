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
import type { LlmRequest } from '../types.js';

const ERROR_SNIPPET_CHARS = 300;

/** The parts of a request that go on the wire. */
export type WireRequest = Pick<
  LlmRequest,
  'model' | 'messages' | 'schemaName' | 'jsonSchema' | 'seed' | 'temperature' | 'topP' | 'maxTokens'
>;

export interface Completion {
  text: string;
  model: string;
  promptTokens: number;
  completionTokens: number;
  /** `usage.prompt_tokens_details.cached_tokens` (vLLM, OpenAI); null when the backend does not report it. */
  cachedPromptTokens: number | null;
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

/** A 400/422 that blames structured output: the backend does not support json_schema. */
export const rejectsJsonSchema = (status: number, text: string): boolean =>
  (status === 400 || status === 422) && /response_format|json_schema/i.test(text);

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

export function toChatParams(
  request: WireRequest,
  mode: ResponseFormat,
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
  if (request.temperature !== undefined) params.temperature = request.temperature;
  if (request.topP !== undefined) params.top_p = request.topP;
  if (request.maxTokens !== undefined) params.max_tokens = request.maxTokens;
  return params;
}

/** Narrows a chat.completion body; missing or empty content is unparsable. */
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
  if (typeof content !== 'string' || content.trim() === '') {
    const finish =
      isRecord(first) && typeof first['finish_reason'] === 'string' ? first['finish_reason'] : 'none';
    const refusal =
      isRecord(message) && typeof message['refusal'] === 'string'
        ? `; refusal: ${errorSnippet(message['refusal'])}`
        : '';
    return { ok: false, message: `judge reply has no content (finish_reason ${finish}${refusal})` };
  }
  const usage = isRecord(json['usage']) ? json['usage'] : {};
  const details = usage['prompt_tokens_details'];
  return {
    ok: true,
    completion: {
      text: content,
      model: typeof json['model'] === 'string' ? json['model'] : requestedModel,
      promptTokens: count(usage['prompt_tokens']),
      completionTokens: count(usage['completion_tokens']),
      cachedPromptTokens: isRecord(details) ? reported(details['cached_tokens']) : null,
    },
  };
}
