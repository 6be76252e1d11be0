/**
 * One attempt of the OpenAI-compatible backend against one replica: the HTTP exchange over the replica's
 * undici pool (post), the request body with the engine's request priority (chatBody), and the attempt's
 * timer and abort wiring around the response-format negotiation (attemptOnce).
 */
import type { BackendSettings, EnginePriority, ResponseFormat } from '../../settings/routing-file.js';
import type { LlmRequest } from '../types.js';
import { negotiateFormat } from './format-negotiation.js';
import {
  AttemptError,
  isRetryableStatus,
  retryAfterFrom,
  toAttemptError,
  type HttpReply,
} from './openai-errors.js';
import type { Replica } from './openai-replica.js';
import { readCompletion, readWireError, toChatParams, type Completion } from './openai-wire.js';
import type { BackendDialect, RequestDialect } from './request-dialect.js';

/** What one call carries across its attempts. */
export interface CallState {
  /** The signature of the previous failed attempt's error (a repeated 500 is deterministic). */
  signature: string | undefined;
  /** When the current attempt's first response headers arrived (epoch ms). */
  headersAt: number | undefined;
  /** The engine's request priority this call is sent with (`engine_priority`); undefined = none. */
  enginePriority: number | undefined;
}

/** A high-priority call's engine priority: vLLM schedules lower values first, SGLang higher ones. */
export function enginePriorityValue(setting: EnginePriority): number | undefined {
  switch (setting) {
    case 'off':
      return undefined;
    case 'vllm':
      return -1;
    case 'sglang':
      return 1;
  }
}

/** vLLM's 400 for a request priority without `--scheduling-policy priority`. */
export const refusesPriority = (reply: { status: number; text: string }): boolean =>
  reply.status === 400 && /priority scheduling is not enabled/i.test(reply.text);

/** How the backend's requests are sent besides the call's own fields. */
export interface BodyOptions {
  dialect?: RequestDialect | undefined;
  /** The backend's `extra_body` (JUDGE_EXTRA_BODY), under the request's own fields (no key overlaps). */
  extraBody?: Record<string, unknown> | undefined;
}

/**
 * The request body of one chat-completions exchange; `priority` undefined sends none. The backend's
 * extra body goes first, so a field of the request itself can never be overridden by it.
 */
export function chatBody(
  request: LlmRequest,
  format: ResponseFormat,
  priority: number | undefined,
  options: BodyOptions = {},
): string {
  const params = toChatParams(request, format, options.dialect);
  const body = options.extraBody === undefined ? params : { ...options.extraBody, ...params };
  return JSON.stringify(priority === undefined ? body : { ...body, priority });
}

/** Dialect switches one attempt may make (max_tokens, then sampling): bounded, whatever a server answers. */
const MAX_DIALECT_RESENDS = 2;

/** What every attempt of one backend shares. */
export interface AttemptContext {
  settings: BackendSettings;
  /** The request headers (content type, accept, authorization); the routing key is added per exchange. */
  headers: Record<string, string>;
  /** Refusals not about the schema (see Negotiation.probeFailed). */
  probeFailed: Set<string>;
  /** Told the context window (tokens) an overflow error named. */
  onContextTokens: (tokens: number) => void;
  /** The backend's request dialect for a model (max_tokens or max_completion_tokens, sampling sent or not). */
  dialect: (model: string) => BackendDialect;
}

/**
 * One HTTP exchange under an attempt signal, with the routing key in `routing_key_header`. The first
 * exchange of an attempt stamps `call.headersAt` when its response headers arrive: the engine's time, before
 * our reading and parsing of the body. Rejects with undici's error (connection, abort, its timeouts).
 */
export async function post(
  ctx: AttemptContext,
  replica: Replica,
  body: string,
  signal: AbortSignal,
  key: string,
  call: CallState,
): Promise<HttpReply> {
  const res = await replica.pool.request({
    method: 'POST',
    path: replica.chatPath,
    headers: { ...ctx.headers, [ctx.settings.routing_key_header]: key },
    body,
    signal,
  });
  call.headersAt ??= Date.now();
  const text = await res.body.text();
  const retryAfterMs = isRetryableStatus(res.statusCode) ? retryAfterFrom(res.headers) : undefined;
  return { status: res.statusCode, text, retryAfterMs };
}

/**
 * One attempt: timeout = min(timeout_ms, deadline − now), aborted with `outer`; the request sent in the
 * replica's response format (negotiateFormat) with the call's engine priority, unless the replica refused
 * one (then it is re-sent without, and none is sent to it again). `previous` holds the signature of this
 * call's previous failed attempt and the engine priority it carries. Resolves with the completion; rejects
 * with an AttemptError: `timeout` (no time left, our timer or undici's), `connection`, `status` (the
 * answer that decided), `unparsable` (a 2xx without content).
 */
export async function attemptOnce(
  ctx: AttemptContext,
  replica: Replica,
  key: string,
  request: LlmRequest,
  deadline: number,
  outer: AbortSignal,
  previous: CallState,
): Promise<Completion> {
  const timeoutMs = Math.min(ctx.settings.timeout_ms, deadline - Date.now());
  if (timeoutMs <= 0) throw new AttemptError('timeout', 'no time left before the deadline');
  const controller = new AbortController();
  let timedOut = false;
  const onAbort = (): void => controller.abort(outer.reason);
  outer.addEventListener('abort', onAbort, { once: true });
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort();
  }, timeoutMs);
  const sent: LlmRequest =
    request.reasoningEffort === undefined && ctx.settings.reasoning_effort !== undefined
      ? { ...request, reasoningEffort: ctx.settings.reasoning_effort }
      : request;
  const exchange = async (format: ResponseFormat, dialect: RequestDialect): Promise<HttpReply> => {
    const priority = replica.priorityRefused ? undefined : previous.enginePriority;
    const options = { dialect, extraBody: ctx.settings.extra_body };
    const reply = await post(
      ctx,
      replica,
      chatBody(sent, format, priority, options),
      controller.signal,
      key,
      previous,
    );
    if (priority === undefined || !refusesPriority(reply)) return reply;
    // The engine does not schedule by priority (vLLM without --scheduling-policy priority): stop sending it.
    replica.priorityRefused = true;
    const body = chatBody(sent, format, undefined, options);
    return post(ctx, replica, body, controller.signal, key, previous);
  };
  // A refusal that names a field of the dialect (request-dialect.ts) switches the backend, and the same
  // request goes again at once in the new dialect: the call does not fail, nor count an attempt.
  const learned = ctx.dialect(request.model);
  const send = async (format: ResponseFormat): Promise<HttpReply> => {
    let dialect = learned.current();
    let reply = await exchange(format, dialect);
    for (
      let resend = 0;
      resend < MAX_DIALECT_RESENDS && reply.status >= 400 && reply.status < 500;
      resend++
    ) {
      if (!learned.learn(reply.status, readWireError(reply.text), dialect)) break;
      dialect = learned.current();
      reply = await exchange(format, dialect);
    }
    return reply;
  };
  try {
    const reply = await negotiateFormat({
      format: replica.format,
      send,
      probeFailed: ctx.probeFailed,
      previous,
      onContextTokens: ctx.onContextTokens,
    });
    const read = readCompletion(reply.text, request.model);
    if (!read.ok) throw new AttemptError('unparsable', read.message, { cause: read.cause });
    return read.completion;
  } catch (error) {
    throw toAttemptError(error, timedOut, timeoutMs);
  } finally {
    clearTimeout(timer);
    outer.removeEventListener('abort', onAbort);
  }
}
