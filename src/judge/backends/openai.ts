/**
 * The OpenAI-compatible chat-completions backend's transport: the only code that calls an LLM over HTTP
 * (undici pool, per-attempt timer, retries, rate limits, error mapping). The wire format is openai-wire.ts.
 *
 * Transport: undici `Pool.request` (keep-alive pool sized to `max_inflight`) with the openai SDK's wire
 * types. Measured with bench/transport.ts (2 vCPU, Node 20, 64 concurrent calls against the fake), the SDK
 * path (global fetch, or undici fetch + Agent) costs ~0.6–0.9 ms of client CPU per call against ~0.1–0.2 ms
 * for raw undici; this server makes thousands of judge calls per second, so the hot path stays on undici.
 * Retries, rate limits and the deadline are ours (`retry.ts`, `limiter.ts`); the SDK's are not used.
 */
import { setMaxListeners } from 'node:events';
import { Pool } from 'undici';

import { RewardError, type ErrorCode } from '../../errors.js';
import type { BackendSettings } from '../../settings/routing-file.js';
import { createLimiter, estimateTokens } from '../limiter.js';
import {
  DEFAULT_RETRY_POLICY,
  parseRetryAfterMs,
  RetryError,
  withRetry,
  type RetryDecision,
  type RetryPolicy,
  type Sleep,
} from '../retry.js';
import type { Backend, LlmReply, LlmRequest } from '../types.js';
import {
  errorSnippet,
  readCompletion,
  rejectsJsonSchema,
  toChatParams,
  type Completion,
} from './openai-wire.js';

export interface OpenAICompatibleBackendOptions {
  /** Name in logs and error messages (the routing file's backend key). Default `openai-compatible`. */
  name?: string | undefined;
  /** Backoff shape; `maxRetries` always comes from the settings. */
  backoff?: Partial<Pick<RetryPolicy, 'baseDelayMs' | 'maxDelayMs'>> | undefined;
  /** Injected for tests. */
  random?: (() => number) | undefined;
  sleep?: Sleep | undefined;
}

const PING_TIMEOUT_MS = 5_000;
const MAX_RESPONSE_BYTES = 16 * 1024 * 1024;

type FailureKind = 'timeout' | 'connection' | 'status' | 'unparsable';

/** One failed HTTP attempt, before retry policy and mapping to a RewardError. */
class AttemptError extends Error {
  readonly kind: FailureKind;
  readonly status: number | undefined;
  readonly retryAfterMs: number | undefined;
  constructor(
    kind: FailureKind,
    message: string,
    extra: { status?: number; retryAfterMs?: number | undefined; cause?: unknown } = {},
  ) {
    super(message, { cause: extra.cause });
    this.name = 'AttemptError';
    this.kind = kind;
    this.status = extra.status;
    this.retryAfterMs = extra.retryAfterMs;
  }
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** `retry-after-ms` (OpenAI's extension) when present and valid, else `Retry-After`. */
function retryAfterFrom(headers: Record<string, string | string[] | undefined>): number | undefined {
  const ms = headerValue(headers['retry-after-ms']);
  if (ms !== undefined && /^\d+(\.\d+)?$/.test(ms.trim())) return Number(ms);
  return parseRetryAfterMs(headerValue(headers['retry-after']));
}

/** 408, 429 and 5xx are worth another attempt; other statuses are the request's fault. */
const isRetryableStatus = (status: number): boolean => status === 408 || status === 429 || status >= 500;

function classify(error: unknown): RetryDecision {
  if (!(error instanceof AttemptError)) return { retry: false };
  switch (error.kind) {
    case 'timeout':
    case 'connection':
      return { retry: true };
    case 'status':
      return {
        retry: error.status !== undefined && isRetryableStatus(error.status),
        retryAfterMs: error.retryAfterMs,
      };
    case 'unparsable':
      return { retry: false };
  }
}

function connectionCode(error: unknown): string {
  let current: unknown = error;
  for (let depth = 0; depth < 4 && current instanceof Error; depth++) {
    const code: unknown = 'code' in current ? current.code : undefined;
    if (typeof code === 'string') return code;
    current = current.cause;
  }
  return error instanceof Error ? error.message : String(error);
}

const UNDICI_TIMEOUTS = new Set([
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/**
 * An OpenAI-compatible backend. `complete` waits for a slot and rate-limit capacity, sends one
 * chat-completions request per attempt (per-attempt timeout = min(timeout_ms, deadline − now)), retries
 * 408/429/5xx/connection errors/timeouts with full-jitter backoff honouring Retry-After, and never
 * attempts or sleeps past `deadline`. Rejects with a RewardError: RW_JUDGE_TIMEOUT (timeouts, the deadline),
 * RW_CLIENT_ABORTED (the caller's abort — unless the abort reason is itself a RewardError, which is rethrown), RW_JUDGE_UNAVAILABLE
 * (statuses, connection errors; the status is in the message and `details`), RW_JUDGE_UNPARSABLE (no
 * content). A backend that rejects `json_schema` (400/422 naming response_format) is switched to
 * `json_object` for the rest of its life, with the schema appended to the system prompt.
 */
export function createOpenAICompatibleBackend(
  settings: BackendSettings,
  options: OpenAICompatibleBackendOptions = {},
): Backend {
  const name = options.name ?? 'openai-compatible';
  const base = new URL(settings.base_url);
  const basePath = base.pathname.replace(/\/+$/, '');
  const chatPath = `${basePath}/chat/completions${base.search}`;
  const modelsPath = `${basePath}/models${base.search}`;
  const pool = new Pool(base.origin, {
    connections: settings.max_inflight,
    // Our per-attempt timer is the real limit; these only back it up.
    headersTimeout: settings.timeout_ms + 5_000,
    bodyTimeout: settings.timeout_ms + 5_000,
    // A chat completion is kilobytes; a runaway body must not exhaust memory.
    maxResponseSize: MAX_RESPONSE_BYTES,
  });
  const limiter = createLimiter({
    maxInflight: settings.max_inflight,
    rpm: settings.rpm,
    tpm: settings.tpm,
    sleep: options.sleep,
  });
  const headers = {
    'content-type': 'application/json',
    accept: 'application/json',
    authorization: `Bearer ${settings.api_key}`,
  };
  const policy: RetryPolicy = {
    ...DEFAULT_RETRY_POLICY,
    ...options.backoff,
    maxRetries: settings.max_retries,
  };
  let mode = settings.response_format;

  /** One HTTP exchange under an attempt signal; throws AttemptError for anything but a 200. */
  const post = async (
    body: string,
    signal: AbortSignal,
  ): Promise<{ status: number; text: string; retryAfterMs: number | undefined }> => {
    const res = await pool.request({ method: 'POST', path: chatPath, headers, body, signal });
    const text = await res.body.text();
    const retryAfterMs = isRetryableStatus(res.statusCode) ? retryAfterFrom(res.headers) : undefined;
    return { status: res.statusCode, text, retryAfterMs };
  };

  const attemptOnce = async (
    request: LlmRequest,
    deadline: number,
    outer: AbortSignal,
  ): Promise<Completion> => {
    const timeoutMs = Math.min(settings.timeout_ms, deadline - Date.now());
    if (timeoutMs <= 0) throw new AttemptError('timeout', 'no time left before the deadline');
    const controller = new AbortController();
    let timedOut = false;
    const onAbort = (): void => controller.abort(outer.reason);
    outer.addEventListener('abort', onAbort, { once: true });
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, timeoutMs);
    try {
      let sentMode = mode;
      let reply = await post(JSON.stringify(toChatParams(request, sentMode)), controller.signal);
      if (sentMode === 'json_schema' && rejectsJsonSchema(reply.status, reply.text)) {
        mode = 'json_object';
        sentMode = mode;
        reply = await post(JSON.stringify(toChatParams(request, sentMode)), controller.signal);
      }
      if (reply.status < 200 || reply.status >= 300) {
        throw new AttemptError('status', `HTTP ${reply.status}: ${errorSnippet(reply.text)}`, {
          status: reply.status,
          retryAfterMs: reply.retryAfterMs,
        });
      }
      const read = readCompletion(reply.text, request.model);
      if (!read.ok) throw new AttemptError('unparsable', read.message, { cause: read.cause });
      return read.completion;
    } catch (error) {
      if (error instanceof AttemptError) throw error;
      if (timedOut || UNDICI_TIMEOUTS.has(connectionCode(error))) {
        throw new AttemptError('timeout', `no answer within ${timeoutMs} ms`, { cause: error });
      }
      throw new AttemptError('connection', `connection failed (${connectionCode(error)})`, { cause: error });
    } finally {
      clearTimeout(timer);
      outer.removeEventListener('abort', onAbort);
    }
  };

  const toRewardError = (error: unknown, signal: AbortSignal): RewardError => {
    if (!(error instanceof RetryError)) {
      return error instanceof RewardError
        ? error
        : new RewardError('RW_JUDGE_UNAVAILABLE', `judge backend ${name} failed`, { cause: error });
    }
    const { reason, attempts, lastError } = error;
    if (reason === 'aborted') {
      const why: unknown = signal.reason;
      if (why instanceof RewardError) return why;
      return new RewardError(
        'RW_CLIENT_ABORTED',
        `judge call to ${name} aborted after ${attempts} attempt(s)`,
        {
          cause: why,
          details: { backend: name, attempts },
        },
      );
    }
    if (lastError instanceof RewardError) return lastError;
    const gaveUp = reason === 'deadline' ? ', giving up: the next retry would pass the deadline' : '';
    if (!(lastError instanceof AttemptError)) {
      return new RewardError('RW_JUDGE_UNAVAILABLE', `judge backend ${name} failed${gaveUp}`, {
        cause: lastError,
      });
    }
    const code: ErrorCode =
      lastError.kind === 'timeout'
        ? 'RW_JUDGE_TIMEOUT'
        : lastError.kind === 'unparsable'
          ? 'RW_JUDGE_UNPARSABLE'
          : 'RW_JUDGE_UNAVAILABLE';
    return new RewardError(
      code,
      `judge backend ${name}: ${lastError.message} (attempt ${attempts}/${policy.maxRetries + 1}${gaveUp})`,
      {
        cause: lastError,
        details: {
          backend: name,
          attempts,
          ...(lastError.status === undefined ? {} : { status: lastError.status }),
        },
      },
    );
  };

  const complete = async (
    request: LlmRequest,
    { signal, deadline }: { signal: AbortSignal; deadline: number },
  ): Promise<LlmReply> => {
    const started = performance.now();
    // One judgment's signal is shared by all its concurrent calls: lift Node's 10-listener warning.
    // (Node 20's getMaxListeners throws on a signal once set to 0, so set unconditionally.)
    setMaxListeners(0, signal);
    const tokens = estimateTokens(request.messages, request.maxTokens);
    try {
      if (signal.aborted) throw new RetryError('aborted', 0, signal.reason);
      const { value, attempts } = await withRetry(
        async () => {
          const release = await limiter.acquire(tokens, { signal, deadline });
          try {
            return await attemptOnce(request, deadline, signal);
          } finally {
            release();
          }
        },
        { policy, deadline, signal, classify, random: options.random, sleep: options.sleep },
      );
      const reply: LlmReply = {
        text: value.text,
        model: value.model,
        promptTokens: value.promptTokens,
        completionTokens: value.completionTokens,
        cachedPromptTokens: value.cachedPromptTokens,
        latencyMs: performance.now() - started,
        attempts,
      };
      return reply;
    } catch (error) {
      throw toRewardError(error, signal);
    }
  };

  return {
    name,
    complete,
    async ping(signal) {
      const controller = new AbortController();
      const onAbort = (): void => controller.abort(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      const timer = setTimeout(() => controller.abort(), Math.min(settings.timeout_ms, PING_TIMEOUT_MS));
      try {
        const res = await pool.request({
          method: 'GET',
          path: modelsPath,
          headers,
          signal: controller.signal,
        });
        await res.body.dump();
        return res.statusCode >= 200 && res.statusCode < 300;
      } catch {
        return false;
      } finally {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
      }
    },
    isSaturated: () => limiter.inflight >= limiter.maxInflight && limiter.waiting > 0,
    async close() {
      // Calls still in flight at close time would hold `close()` open; they are cut instead.
      await (limiter.inflight === 0 ? pool.close() : pool.destroy());
    },
  };
}
