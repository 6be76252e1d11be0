/**
 * Per-replica admission: an in-flight semaphore (by priority, FIFO among equals) and optional RPM / TPM
 * token buckets. Every wait is
 * abortable and bounded by the call's deadline (RW_JUDGE_TIMEOUT when it cannot be met).
 *
 * The semaphore's size is adaptive (AIMD, like TCP congestion control): a real server queues instead of
 * answering 429, and then every call sent beyond its capacity waits in the server's queue, where our
 * per-attempt timer counts the wait as if it were service. So the limit grows while attempt latency stays
 * near the replica's unloaded latency (slow start: +1 per success until the first sign of queueing, then
 * +1/limit per success) and shrinks multiplicatively when smoothed latency inflates past `tolerance` × that
 * baseline + `slackMs` (×0.8) or an attempt times out / is refused for overload (×0.5), at most once per
 * round trip. The
 * configured `maxInflight` is the ceiling; with `adaptive: false` the limit is that ceiling.
 */
import { RewardError } from '../errors.js';
import { createLocalBuckets } from '../state/local.js';
import type { BucketSpec, BucketStore } from '../state/types.js';
import { isUrgent } from './calls.js';
import { createAimdLimit, type AdaptiveOptions, type AttemptSample } from './aimd.js';
import { FairQueue, SHARED_FLOW, type Flow } from './fair-queue.js';
import type { ChatMessage } from './types.js';
import type { ControlSample, InflightControl } from './inflight-control.js';
import { abortError, abortableSleep, type Sleep } from './retry.js';

export type { AdaptiveOptions, AttemptSample };

export interface LimiterOptions extends RateBucketOptions {
  /** The in-flight ceiling (JUDGE_MAX_INFLIGHT / `max_inflight`). */
  maxInflight: number;
  /** Adapt the limit below the ceiling (AIMD). Default off (the limit is `maxInflight`). */
  adaptive?: AdaptiveOptions | false | undefined;
  /**
   * An external control of the limit (inflight-control.ts: the engine's metrics, else a latency gradient);
   * it takes precedence over `adaptive`.
   */
  control?: InflightControl | undefined;
}

export interface RateBucketOptions {
  /** Requests per minute; a burst of one second's worth (at least 1) is allowed. */
  rpm?: number | undefined;
  /** Tokens per minute (see `estimateTokens`); a burst of one second's worth is allowed. */
  tpm?: number | undefined;
  /** Clock for the buckets (epoch ms). Default `Date.now`. */
  now?: (() => number) | undefined;
  /** Abortable sleep used for bucket waits. */
  sleep?: Sleep | undefined;
  /**
   * Where the RPM / TPM levels live: in-process by default; the Redis store shares them with every worker
   * and replica that uses the same `bucketName`.
   */
  buckets?: BucketStore | undefined;
  /** Names this backend's buckets in the store (e.g. backend name + base URL). Default `backend`. */
  bucketName?: string | undefined;
}

/** Options of one acquire; an object so callers can add fields (e.g. a priority) without breaking others. */
export interface AcquireOptions {
  signal: AbortSignal;
  /** Absolute deadline (epoch ms). */
  deadline: number;
  /** Slot order: a higher priority is served first, equal priorities in arrival order. Default 0. */
  priority?: number | undefined;
  /**
   * The tenant's flow (fair-queue.ts): slots are shared between flows by weight, the urgent lane
   * (priority ≥ URGENT_PRIORITY) first; priority orders a flow's own calls. Default: the shared flow.
   */
  flow?: Flow | undefined;
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
  /** The ceiling. */
  readonly maxInflight: number;
  /** The current in-flight limit (≤ `maxInflight`; equal to it when not adaptive). */
  readonly limit: number;
  /** Feeds the adaptive limit with one finished attempt (no-op when not adaptive). */
  observe(sample: AttemptSample): void;
}

/** Token estimate for TPM: ceil(chars / 4) over the messages, plus the completion budget. */
export function estimateTokens(messages: readonly ChatMessage[], maxTokens: number | undefined): number {
  let chars = 0;
  for (const m of messages) chars += m.content.length;
  return Math.ceil(chars / 4) + (maxTokens ?? 0);
}

interface Waiter {
  resolve: () => void;
  reject: (error: unknown) => void;
}

/** RPM / TPM admission of one request; `take` waits (abortably, within the deadline) for its capacity. */
export interface RateBuckets {
  take(tokens: number, options: Pick<AcquireOptions, 'signal' | 'deadline'>): Promise<void>;
}

/** `fn` made idempotent: a slot is released once, however often its release is called. */
function once(fn: () => void): Release {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    fn();
  };
}

/** A call that found no free backend slot before its deadline. */
function noSlotError(limit: number, maxInflight: number): RewardError {
  return new RewardError(
    'RW_JUDGE_TIMEOUT',
    `no free backend slot (in-flight limit ${limit} of max_inflight ${maxInflight}) before the deadline`,
  );
}

/** An attempt as the external in-flight control reads it (inflight-control.ts). */
function controlSample(sample: AttemptSample): ControlSample {
  return {
    sentAt: sample.sentAt,
    headersAt: sample.headersAt,
    endedAt: sample.sentAt + sample.latencyMs,
    result: sample.result ?? (sample.overloaded ? 'other' : 'ok'),
    kind: sample.kind ?? '',
  };
}

/**
 * The RPM / TPM buckets of `options` (each a burst of one second's worth, at least 1, refilled
 * continuously: see BucketStore); undefined when neither limit is set. Throws RW_JUDGE_TIMEOUT when the
 * capacity comes too late for the deadline; a wait cut by the signal refunds its reservation.
 */
export function createRateBuckets(options: RateBucketOptions): RateBuckets | undefined {
  if (options.rpm === undefined && options.tpm === undefined) return undefined;
  const now = options.now ?? Date.now;
  const sleep = options.sleep ?? abortableSleep;
  const store = options.buckets ?? createLocalBuckets(now);
  const bucketName = options.bucketName ?? 'backend';
  const spec = (kind: string, perMinute: number | undefined): Omit<BucketSpec, 'cost'> | undefined =>
    perMinute === undefined
      ? undefined
      : { name: `${bucketName}:${kind}`, capacity: Math.max(1, perMinute / 60), perMs: perMinute / 60_000 };
  const rpm = spec('rpm', options.rpm);
  const tpm = spec('tpm', options.tpm);
  return {
    async take(tokens, { signal, deadline }) {
      const specs: BucketSpec[] = [];
      if (rpm !== undefined) specs.push({ ...rpm, cost: 1 });
      if (tpm !== undefined) specs.push({ ...tpm, cost: tokens });
      const reservation = await store.take(specs, deadline - now());
      if (!reservation.taken) {
        throw new RewardError(
          'RW_JUDGE_TIMEOUT',
          `rate limit (rpm/tpm) leaves no capacity before the deadline (${Math.ceil(reservation.waitMs)} ms needed)`,
        );
      }
      if (reservation.waitMs <= 0) return;
      try {
        await sleep(reservation.waitMs, signal);
      } catch (error) {
        // Refund: this reservation was not used.
        await store.refund(specs);
        throw error;
      }
    },
  };
}

/**
 * One replica's limiter: the in-flight slots (their limit from `control`, else AIMD (aimd.ts) when
 * `adaptive`, else `maxInflight`), then the RPM / TPM buckets. Waits throw RW_JUDGE_TIMEOUT past the deadline.
 */
export function createLimiter(options: LimiterOptions): Limiter {
  const { maxInflight } = options;
  const now = options.now ?? Date.now;
  const aimd =
    options.adaptive === false || options.adaptive === undefined
      ? undefined
      : createAimdLimit(maxInflight, options.adaptive, now);
  const control = options.control;
  const slots = (): number =>
    control === undefined ? Math.max(1, Math.floor(aimd?.value ?? maxInflight)) : control.limit;
  const buckets = createRateBuckets(options);
  let inflight = 0;
  // Waiters by tenant flow, lane (urgent first), then priority and arrival (fair-queue.ts).
  const waiters = new FairQueue<Waiter>();
  /** The next waiter (its flow now holds the slot), removed from the queue; undefined when none waits. */
  const nextWaiter = (): Waiter | undefined => waiters.shift();

  const release = (flow: string): void => {
    waiters.release(flow);
    // After a decrease the slot is retired instead of handed over.
    const waiter = inflight > slots() ? undefined : nextWaiter();
    if (waiter === undefined) {
      inflight -= 1;
      return;
    }
    waiter.resolve(); // hands the slot over: inflight unchanged
  };

  /** After an increase: admit waiters into the new slots, in order. */
  const admitWaiters = (): void => {
    while (inflight < slots()) {
      const waiter = nextWaiter();
      if (waiter === undefined) return;
      inflight += 1;
      waiter.resolve();
    }
  };

  const observe = (sample: AttemptSample): void => {
    if (control !== undefined) {
      control.observe(controlSample(sample));
      return;
    }
    // Grow only while the limit is what holds calls back (an idle replica proves nothing).
    if (aimd?.observe(sample, () => inflight + waiters.size + 1 >= slots()) === true) admitWaiters();
  };

  control?.attach(() => ({ inflight, waiting: waiters.size }), admitWaiters);

  const waitForSlot = ({ signal, deadline, priority, flow }: AcquireOptions): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      const rank = priority ?? 0;
      const waiter: Waiter = {
        resolve: () => {
          cleanup();
          resolve();
        },
        reject,
      };
      const cleanup = (): void => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
      };
      const onAbort = (): void => {
        waiters.delete(waiter);
        cleanup();
        reject(abortError(signal));
      };
      const timer = setTimeout(
        () => {
          waiters.delete(waiter);
          cleanup();
          reject(noSlotError(slots(), maxInflight));
        },
        Math.max(0, deadline - now()),
      );
      waiters.add(waiter, flow, isUrgent(rank) ? 'high' : 'normal', rank);
      signal.addEventListener('abort', onAbort, { once: true });
    });

  return {
    async acquire(tokens, acquireOptions) {
      if (acquireOptions.signal.aborted) throw abortError(acquireOptions.signal);
      const flow = acquireOptions.flow ?? SHARED_FLOW;
      if (inflight < slots() && waiters.size === 0) {
        inflight += 1;
        waiters.hold(flow);
      } else {
        await waitForSlot(acquireOptions);
      }
      const releaseOnce = once(() => release(flow.name));
      try {
        await buckets?.take(tokens, acquireOptions);
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
    get limit() {
      return slots();
    },
    observe,
  };
}
