/**
 * Bounded retries with exponential backoff and full jitter, honouring `Retry-After`, never past a deadline.
 */
import { BACKEND_DEFAULTS } from '../settings/defaults.js';

export interface RetryPolicy {
  /** Retries after the first attempt: at most `maxRetries + 1` attempts. */
  maxRetries: number;
  /** Backoff base: the n-th retry (0-based) sleeps random(0, min(maxDelayMs, baseDelayMs·2^n)). */
  baseDelayMs: number;
  maxDelayMs: number;
}

export const DEFAULT_RETRY_POLICY: Readonly<RetryPolicy> = {
  maxRetries: BACKEND_DEFAULTS.maxRetries,
  baseDelayMs: 250,
  maxDelayMs: 8_000,
};

/** How the loop treats one failed attempt. */
export interface RetryDecision {
  retry: boolean;
  /** Server-requested minimum wait (from `Retry-After` / `retry-after-ms`), in ms. */
  retryAfterMs?: number | undefined;
}

/**
 * Why the loop stopped without a value. `lastError` is what the final attempt threw. `budget`: the
 * backend's retry budget denied the retry.
 */
export type RetryStop = 'fatal' | 'exhausted' | 'deadline' | 'aborted' | 'budget';

export class RetryError extends Error {
  readonly reason: RetryStop;
  readonly attempts: number;
  readonly lastError: unknown;
  constructor(reason: RetryStop, attempts: number, lastError: unknown) {
    super(`gave up after ${attempts} attempt(s): ${reason}`, { cause: lastError });
    this.name = new.target.name;
    this.reason = reason;
    this.attempts = attempts;
    this.lastError = lastError;
  }
}

export type Sleep = (ms: number, signal: AbortSignal) => Promise<void>;

export interface RetryOptions {
  policy: RetryPolicy;
  /** Absolute deadline (epoch ms, same clock as `now`): a backoff that would end past it gives up instead. */
  deadline: number;
  signal: AbortSignal;
  classify(error: unknown): RetryDecision;
  /** Uniform in [0, 1). Default `Math.random`. */
  random?: (() => number) | undefined;
  sleep?: Sleep | undefined;
  now?: (() => number) | undefined;
  onRetry?: ((event: { attempt: number; delayMs: number; error: unknown }) => void) | undefined;
  /** Asked before each retry (after classify said yes); false stops the loop with `budget`. */
  allowRetry?: (() => boolean) | undefined;
}

/** Full-jitter delay for the `retryIndex`-th retry (0-based). */
export function backoffDelayMs(
  retryIndex: number,
  policy: RetryPolicy,
  random: () => number = Math.random,
): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** retryIndex);
  return random() * ceiling;
}

/**
 * `Retry-After` as ms: delta-seconds (decimals tolerated) or an HTTP date relative to `nowMs`.
 * Undefined when absent or unparsable; never negative.
 */
export function parseRetryAfterMs(
  value: string | null | undefined,
  nowMs: number = Date.now(),
): number | undefined {
  if (value === null || value === undefined) return undefined;
  const trimmed = value.trim();
  if (trimmed === '') return undefined;
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Number(trimmed) * 1000;
  // HTTP dates always name a month (RFC 9110 §5.6.7); Date.parse alone would accept "-1" as a year.
  if (!/[a-z]/i.test(trimmed)) return undefined;
  const at = Date.parse(trimmed);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - nowMs);
}

/** The abort reason as an Error (wrapped with `cause` when something else was passed to `abort()`). */
export function abortError(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  return reason instanceof Error ? reason : new Error('aborted', { cause: reason });
}

/** Sleeps `ms`; rejects with the abort reason as soon as the signal aborts. */
export const abortableSleep: Sleep = (ms, signal) =>
  new Promise<void>((resolve, reject) => {
    if (signal.aborted) {
      reject(abortError(signal));
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(abortError(signal));
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });

/**
 * Runs `attempt(n)` (n = 1, 2, …) until it resolves, or throws a `RetryError` saying why it stopped:
 * `fatal` (classify said no), `exhausted` (max attempts), `deadline` (the next backoff would end past the
 * deadline), `aborted` (signal). Each backoff is max(full jitter, Retry-After).
 */
export async function withRetry<T>(
  attempt: (n: number) => Promise<T>,
  options: RetryOptions,
): Promise<{ value: T; attempts: number }> {
  const random = options.random ?? Math.random;
  const sleep = options.sleep ?? abortableSleep;
  const now = options.now ?? Date.now;
  const maxAttempts = options.policy.maxRetries + 1;
  for (let n = 1; ; n++) {
    try {
      return { value: await attempt(n), attempts: n };
    } catch (error) {
      if (options.signal.aborted) throw new RetryError('aborted', n, error);
      const decision = options.classify(error);
      if (!decision.retry) throw new RetryError('fatal', n, error);
      if (n >= maxAttempts) throw new RetryError('exhausted', n, error);
      if (options.allowRetry?.() === false) throw new RetryError('budget', n, error);
      const delayMs = Math.max(backoffDelayMs(n - 1, options.policy, random), decision.retryAfterMs ?? 0);
      if (now() + delayMs >= options.deadline) throw new RetryError('deadline', n, error);
      options.onRetry?.({ attempt: n, delayMs, error });
      try {
        await sleep(delayMs, options.signal);
      } catch {
        throw new RetryError('aborted', n, error);
      }
    }
  }
}

export interface RetryBudgetOptions {
  /** Retries allowed per first attempt over the window, 0–1 (0.2: retries ≤ 20 % of calls). */
  ratio: number;
  /** Sliding window, ms. */
  windowMs: number;
  /** Retries always allowed per window, so a quiet backend can still retry its rare failure. */
  minPerWindow: number;
  now?: (() => number) | undefined;
}

export interface RetryBudget {
  /** Counts one call (its first attempt). */
  recordCall(): void;
  /** True (and the retry is counted) when retries in the window stay ≤ minPerWindow + ratio × calls. */
  tryRetry(): boolean;
  /** Calls and retries in the current window. */
  readonly calls: number;
  readonly retries: number;
}

/** Number of buckets the window is split into (the window slides one bucket at a time). */
const BUDGET_BUCKETS = 10;

/**
 * A retry budget (Finagle's RetryBudget, gRPC's retry throttling): over a sliding window, retries may not
 * exceed `minPerWindow + ratio × calls`. When a backend fails every call, retries stop multiplying its load
 * by `max_retries + 1`; isolated failures are still retried.
 */
export function createRetryBudget(options: RetryBudgetOptions): RetryBudget {
  const now = options.now ?? Date.now;
  const bucketMs = Math.max(1, options.windowMs / BUDGET_BUCKETS);
  const calls = new Float64Array(BUDGET_BUCKETS);
  const retries = new Float64Array(BUDGET_BUCKETS);
  let current = Math.floor(now() / bucketMs);
  let callSum = 0;
  let retrySum = 0;

  const advance = (): number => {
    const bucket = Math.floor(now() / bucketMs);
    const steps = Math.min(BUDGET_BUCKETS, bucket - current);
    for (let i = 1; i <= steps; i++) {
      const slot = (current + i) % BUDGET_BUCKETS;
      callSum -= calls[slot] ?? 0;
      retrySum -= retries[slot] ?? 0;
      calls[slot] = 0;
      retries[slot] = 0;
    }
    if (bucket > current) current = bucket;
    return current % BUDGET_BUCKETS;
  };

  return {
    recordCall() {
      const slot = advance();
      calls[slot] = (calls[slot] ?? 0) + 1;
      callSum += 1;
    },
    tryRetry() {
      const slot = advance();
      if (retrySum + 1 > options.minPerWindow + options.ratio * callSum) return false;
      retries[slot] = (retries[slot] ?? 0) + 1;
      retrySum += 1;
      return true;
    },
    get calls() {
      advance();
      return callSum;
    },
    get retries() {
      advance();
      return retrySum;
    },
  };
}
