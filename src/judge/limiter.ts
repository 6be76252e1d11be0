/**
 * Per-backend admission: a max-in-flight semaphore (FIFO) and optional RPM / TPM token buckets.
 * Every wait is abortable and bounded by the call's deadline (RW_JUDGE_TIMEOUT when it cannot be met).
 */
import { RewardError } from '../errors.js';
import type { ChatMessage } from './types.js';
import { abortError, abortableSleep, type Sleep } from './retry.js';

export interface LimiterOptions {
  maxInflight: number;
  /** Requests per minute; a burst of one second's worth (at least 1) is allowed. */
  rpm?: number | undefined;
  /** Tokens per minute (see `estimateTokens`); a burst of one second's worth is allowed. */
  tpm?: number | undefined;
  /** Clock for the buckets (epoch ms). Default `Date.now`. */
  now?: (() => number) | undefined;
  /** Abortable sleep used for bucket waits. */
  sleep?: Sleep | undefined;
}

export interface AcquireOptions {
  signal: AbortSignal;
  /** Absolute deadline (epoch ms). */
  deadline: number;
}

/** Call exactly once when the HTTP attempt is over. */
export type Release = () => void;

export interface Limiter {
  /** Waits for a slot, then for bucket capacity for one request of `tokens` tokens. */
  acquire(tokens: number, options: AcquireOptions): Promise<Release>;
  /** Slots held. */
  readonly inflight: number;
  /** Callers queued for a slot. */
  readonly waiting: number;
  readonly maxInflight: number;
}

/** Token estimate for TPM: ceil(chars / 4) over the messages, plus the completion budget. */
export function estimateTokens(messages: readonly ChatMessage[], maxTokens: number | undefined): number {
  let chars = 0;
  for (const m of messages) chars += m.content.length;
  return Math.ceil(chars / 4) + (maxTokens ?? 0);
}

/**
 * A token bucket with reservations: a request of cost c waits until the level reaches min(c, capacity),
 * then takes c (a request larger than the burst drives the level negative). The level is debited when the
 * wait is computed, so later callers wait behind earlier ones: reservations are served in arrival order.
 */
interface Bucket {
  capacity: number;
  perMs: number;
  level: number;
  updatedAt: number;
}

function createBucket(perMinute: number, now: number): Bucket {
  const capacity = Math.max(1, perMinute / 60);
  return { capacity, perMs: perMinute / 60_000, level: capacity, updatedAt: now };
}

function refill(bucket: Bucket, now: number): void {
  if (now > bucket.updatedAt) {
    bucket.level = Math.min(bucket.capacity, bucket.level + (now - bucket.updatedAt) * bucket.perMs);
    bucket.updatedAt = now;
  }
}

const waitMs = (bucket: Bucket, cost: number): number =>
  Math.max(0, Math.min(cost, bucket.capacity) - bucket.level) / bucket.perMs;

interface Waiter {
  resolve: () => void;
  reject: (error: unknown) => void;
}

export function createLimiter(options: LimiterOptions): Limiter {
  const { maxInflight } = options;
  const now = options.now ?? Date.now;
  const sleep = options.sleep ?? abortableSleep;
  const rpm = options.rpm === undefined ? undefined : createBucket(options.rpm, now());
  const tpm = options.tpm === undefined ? undefined : createBucket(options.tpm, now());
  let inflight = 0;
  // Insertion-ordered: the first key is the longest waiter; delete on abort is O(1).
  const waiters = new Map<number, Waiter>();
  let waiterSeq = 0;

  const release = (): void => {
    const head = waiters.entries().next();
    if (head.done === true) {
      inflight -= 1;
      return;
    }
    const [id, waiter] = head.value;
    waiters.delete(id);
    waiter.resolve(); // hands the slot over: inflight unchanged
  };

  const onceRelease = (): Release => {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      release();
    };
  };

  const waitForSlot = ({ signal, deadline }: AcquireOptions): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      const id = waiterSeq++;
      const cleanup = (): void => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
      };
      const onAbort = (): void => {
        waiters.delete(id);
        cleanup();
        reject(abortError(signal));
      };
      const timer = setTimeout(
        () => {
          waiters.delete(id);
          cleanup();
          reject(
            new RewardError(
              'RW_JUDGE_TIMEOUT',
              `no free backend slot (max_inflight ${maxInflight}) before the deadline`,
            ),
          );
        },
        Math.max(0, deadline - now()),
      );
      waiters.set(id, {
        resolve: () => {
          cleanup();
          resolve();
        },
        reject,
      });
      signal.addEventListener('abort', onAbort, { once: true });
    });

  const takeBuckets = async (tokens: number, { signal, deadline }: AcquireOptions): Promise<void> => {
    if (rpm === undefined && tpm === undefined) return;
    const t = now();
    let wait = 0;
    if (rpm !== undefined) {
      refill(rpm, t);
      wait = Math.max(wait, waitMs(rpm, 1));
    }
    if (tpm !== undefined) {
      refill(tpm, t);
      wait = Math.max(wait, waitMs(tpm, tokens));
    }
    if (t + wait > deadline) {
      throw new RewardError(
        'RW_JUDGE_TIMEOUT',
        `rate limit (rpm/tpm) leaves no capacity before the deadline (${Math.ceil(wait)} ms needed)`,
      );
    }
    if (rpm !== undefined) rpm.level -= 1;
    if (tpm !== undefined) tpm.level -= tokens;
    if (wait <= 0) return;
    try {
      await sleep(wait, signal);
    } catch (error) {
      // Refund: this reservation was not used.
      if (rpm !== undefined) rpm.level += 1;
      if (tpm !== undefined) tpm.level += tokens;
      throw error;
    }
  };

  return {
    async acquire(tokens, acquireOptions) {
      if (acquireOptions.signal.aborted) throw abortError(acquireOptions.signal);
      if (inflight < maxInflight && waiters.size === 0) {
        inflight += 1;
      } else {
        await waitForSlot(acquireOptions);
      }
      const releaseOnce = onceRelease();
      try {
        await takeBuckets(tokens, acquireOptions);
      } catch (error) {
        releaseOnce();
        throw error;
      }
      return releaseOnce;
    },
    get inflight() {
      return inflight;
    },
    get waiting() {
      return waiters.size;
    },
    maxInflight,
  };
}
