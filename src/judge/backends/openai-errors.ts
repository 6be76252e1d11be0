/**
 * How an attempt of the OpenAI-compatible backend fails and what its failure means: one failed HTTP attempt
 * (AttemptError), whether it is retried (classify), what it says about the replica (replicaOutcome,
 * verdictOf) and the RewardError the call becomes when no attempt is left (toRewardError). Pure: no I/O.
 */
import { RewardError, type ErrorCode } from '../../errors.js';
import type { AttemptVerdict } from '../replicas.js';
import { parseRetryAfterMs, RetryError, type RetryDecision } from '../retry.js';
import type { ReplicaOutcome } from '../types.js';
import { errorSignature, isContextOverflow, readWireError, type WireError } from './openai-wire.js';

/** How an attempt failed: no answer in time, no connection, a non-2xx status, or a 2xx without content. */
export type FailureKind = 'timeout' | 'connection' | 'status' | 'unparsable';

/** One failed HTTP attempt, before retry policy and mapping to a RewardError. */
export class AttemptError extends Error {
  readonly kind: FailureKind;
  readonly status: number | undefined;
  readonly retryAfterMs: number | undefined;
  /** The error body's fields (status failures only). */
  readonly wire: WireError | undefined;
  /** A 500 identical to the call's previous attempt's (status, type, code, message): deterministic. */
  readonly repeated: boolean;
  constructor(
    kind: FailureKind,
    message: string,
    extra: {
      status?: number;
      retryAfterMs?: number | undefined;
      wire?: WireError | undefined;
      repeated?: boolean;
      cause?: unknown;
    } = {},
  ) {
    super(message, { cause: extra.cause });
    this.name = 'AttemptError';
    this.kind = kind;
    this.status = extra.status;
    this.retryAfterMs = extra.retryAfterMs;
    this.wire = extra.wire;
    this.repeated = extra.repeated ?? false;
  }
}

/** One HTTP exchange's answer: status, body text, and the Retry-After of a retryable status (ms). */
export interface HttpReply {
  status: number;
  text: string;
  retryAfterMs: number | undefined;
}

export const isOk = (status: number): boolean => status >= 200 && status < 300;

/** 408, 429 and 5xx are worth another attempt; other statuses are the request's fault. */
export const isRetryableStatus = (status: number): boolean =>
  status === 408 || status === 429 || status >= 500;

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/**
 * `retry-after-ms` (OpenAI's extension) when present and valid, else `Retry-After` (seconds or an HTTP
 * date), in ms; undefined when neither is usable.
 */
export function retryAfterFrom(headers: Record<string, string | string[] | undefined>): number | undefined {
  const ms = headerValue(headers['retry-after-ms']);
  if (ms !== undefined && /^\d+(\.\d+)?$/.test(ms.trim())) return Number(ms);
  return parseRetryAfterMs(headerValue(headers['retry-after']));
}

/**
 * Timeouts, connection errors, 408, 429 and 5xx are retried, except a context overflow (never: the same
 * prompt cannot fit) and a deterministic 500 — one whose status, error type, code and message repeat those
 * of the call's previous attempt (`repeated`) — which is therefore retried at most once. Anything that is
 * not an AttemptError is not retried.
 */
export function classify(error: unknown): RetryDecision {
  if (!(error instanceof AttemptError)) return { retry: false };
  switch (error.kind) {
    case 'timeout':
    case 'connection':
      return { retry: true };
    case 'status': {
      const status = error.status ?? 0;
      if (error.wire !== undefined && isContextOverflow(status, error.wire)) return { retry: false };
      return { retry: !error.repeated && isRetryableStatus(status), retryAfterMs: error.retryAfterMs };
    }
    case 'unparsable':
      return { retry: false };
  }
}

/** A failed non-2xx answer, read: the AttemptError it becomes, its wire fields and its signature. */
export interface StatusFailure {
  failed: AttemptError;
  wire: WireError;
  signature: string;
}

/**
 * The error a non-2xx answer becomes (status, wire fields, whether it repeats the previous 500).
 * Records the answer's signature in `previous.signature` (the call's previous failed attempt), so read
 * each answer once: a second read of the same 500 would take it for a repeat.
 */
export function statusError(reply: HttpReply, previous: { signature: string | undefined }): StatusFailure {
  const wire = readWireError(reply.text);
  const signature = errorSignature(reply.status, wire);
  // A 500 with Retry-After says itself that it is transient: never taken for a deterministic one.
  const repeated500 =
    reply.status === 500 && reply.retryAfterMs === undefined && signature === previous.signature;
  previous.signature = signature;
  const failed = new AttemptError('status', `HTTP ${reply.status}: ${wire.message}`, {
    status: reply.status,
    retryAfterMs: reply.retryAfterMs,
    wire,
    repeated: repeated500,
  });
  return { failed, wire, signature };
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
 * What a thrown exchange error becomes: itself when already an AttemptError; a `timeout` when our
 * per-attempt timer fired (`timedOut`) or undici timed out; else a `connection` failure naming its code.
 * `timeoutMs` is the attempt's timeout, for the message.
 */
export function toAttemptError(error: unknown, timedOut: boolean, timeoutMs: number): AttemptError {
  if (error instanceof AttemptError) return error;
  if (timedOut || UNDICI_TIMEOUTS.has(connectionCode(error))) {
    return new AttemptError('timeout', `no answer within ${timeoutMs} ms`, { cause: error });
  }
  return new AttemptError('connection', `connection failed (${connectionCode(error)})`, { cause: error });
}

/**
 * The RewardError a failed call becomes: its abort reason, or the last attempt's failure mapped to a code
 * (RW_JUDGE_TIMEOUT, RW_JUDGE_UNPARSABLE, RW_JUDGE_CONTEXT_OVERFLOW, RW_JUDGE_UNAVAILABLE) with why no
 * further attempt was made. `maxRetries` is the backend's, for the message.
 */
export function toRewardError(
  error: unknown,
  signal: AbortSignal,
  name: string,
  maxRetries: number,
): RewardError {
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
  const gaveUp =
    reason === 'deadline'
      ? ', giving up: the next retry would pass the deadline'
      : reason === 'budget'
        ? ', not retried: retry budget exhausted'
        : lastError instanceof AttemptError && lastError.repeated
          ? ', not retried again: the same error repeated'
          : '';
  if (!(lastError instanceof AttemptError)) {
    return new RewardError('RW_JUDGE_UNAVAILABLE', `judge backend ${name} failed${gaveUp}`, {
      cause: lastError,
    });
  }
  const overflow = lastError.wire !== undefined && isContextOverflow(lastError.status ?? 0, lastError.wire);
  const code: ErrorCode =
    lastError.kind === 'timeout'
      ? 'RW_JUDGE_TIMEOUT'
      : lastError.kind === 'unparsable'
        ? 'RW_JUDGE_UNPARSABLE'
        : overflow
          ? 'RW_JUDGE_CONTEXT_OVERFLOW'
          : 'RW_JUDGE_UNAVAILABLE';
  return new RewardError(
    code,
    `judge backend ${name}: ${lastError.message} (attempt ${attempts}/${maxRetries + 1}${gaveUp})`,
    {
      cause: lastError,
      details: {
        backend: name,
        attempts,
        ...(lastError.status === undefined ? {} : { status: lastError.status }),
        ...(lastError.wire?.type === undefined ? {} : { type: lastError.wire.type }),
        ...(lastError.wire?.nCtx === undefined ? {} : { n_ctx: lastError.wire.nCtx }),
        ...(lastError.wire?.nPromptTokens === undefined
          ? {}
          : { n_prompt_tokens: lastError.wire.nPromptTokens }),
        ...(reason === 'budget' ? { retry_budget: 'exhausted' } : {}),
      },
    },
  );
}

/**
 * How an attempt ended, for the replica's counters, breaker and adaptive limit: `aborted` when the call's
 * signal fired or the error is not an AttemptError; `deadline` for a timeout whose timer the judgment's
 * deadline cut short (`clippedByDeadline`).
 */
export function replicaOutcome(
  error: unknown,
  signal: AbortSignal,
  clippedByDeadline: boolean,
): ReplicaOutcome {
  if (signal.aborted) return 'aborted';
  if (!(error instanceof AttemptError)) return 'aborted';
  switch (error.kind) {
    case 'timeout':
      // A timer cut short by the judgment's deadline says nothing about the replica.
      return clippedByDeadline ? 'deadline' : 'timeout';
    case 'connection':
      return 'connection';
    case 'unparsable':
      return 'unparsable';
    case 'status': {
      const status = error.status ?? 0;
      if (status === 429) return 'http_429';
      if (status === 503) return 'http_503';
      if (status >= 500) return 'http_5xx';
      return 'http_4xx';
    }
  }
}

/** Timeouts, connection errors and 5xx are the replica's ill health; a 429, a 4xx or an abort is not. */
export function verdictOf(outcome: ReplicaOutcome): AttemptVerdict {
  switch (outcome) {
    case 'ok':
    case 'unparsable':
      return 'success';
    case 'timeout':
    case 'connection':
    case 'http_5xx':
    case 'http_503':
      return 'failure';
    case 'http_429':
    case 'http_4xx':
    case 'deadline':
    case 'aborted':
      return 'neutral';
  }
}
