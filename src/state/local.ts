/**
 * The one-process implementations of the shared-state interfaces: what the server does without REDIS_URL,
 * and what the Redis implementations fall back to while Redis is unreachable.
 */
import { RewardError, toError } from '../errors.js';
import { evictOldest } from './bounded.js';
import type {
  BucketReservation,
  BucketSpec,
  BucketStore,
  BudgetStore,
  CancelBus,
  IdempotencyStore,
  Lease,
  LeaseOptions,
  LeaseOutcome,
  LeaseStore,
  SharedState,
} from './types.js';

type Clock = () => number;

interface Level {
  level: number;
  updatedAt: number;
}

/** Level after refilling up to `now` (never above capacity; a new bucket starts full). */
function refilled(state: Level | undefined, spec: BucketSpec, now: number): number {
  if (state === undefined) return spec.capacity;
  const elapsed = Math.max(0, now - state.updatedAt);
  return Math.min(spec.capacity, state.level + elapsed * spec.perMs);
}

/** In-process token buckets (the arithmetic `redis.ts` runs in Lua). */
export function createLocalBuckets(now: Clock = Date.now): BucketStore {
  const levels = new Map<string, Level>();
  return {
    take(buckets: readonly BucketSpec[], maxWaitMs: number): Promise<BucketReservation> {
      const t = now();
      let waitMs = 0;
      const current = buckets.map((b) => refilled(levels.get(b.name), b, t));
      for (const [i, b] of buckets.entries()) {
        const level = current[i] ?? b.capacity;
        waitMs = Math.max(waitMs, Math.max(0, Math.min(b.cost, b.capacity) - level) / b.perMs);
      }
      if (waitMs > maxWaitMs) {
        return Promise.resolve({ taken: false, waitMs });
      }
      for (const [i, b] of buckets.entries()) {
        levels.set(b.name, { level: (current[i] ?? b.capacity) - b.cost, updatedAt: t });
      }
      return Promise.resolve({ taken: true, waitMs });
    },
    refund(buckets: readonly BucketSpec[]): Promise<void> {
      const t = now();
      for (const b of buckets) {
        const level = refilled(levels.get(b.name), b, t);
        levels.set(b.name, { level: Math.min(b.capacity, level + b.cost), updatedAt: t });
      }
      return Promise.resolve();
    },
  };
}

interface Waiter {
  resolve(outcome: LeaseOutcome): void;
  reject(err: Error): void;
}

interface Held {
  waiters: Set<Waiter>;
}

/**
 * In-process leases: the first caller per key holds it, later callers wait for its outcome; an abandoned
 * lease passes to the longest waiter. (The judgment service's own single-flight already joins duplicates
 * within a process, so in practice only the Redis fallback meets contention here.)
 */
export function createLocalLeases(now: Clock = Date.now): LeaseStore {
  const held = new Map<string, Held>();

  const leaseFor = (key: string, entry: Held): Lease => {
    let done = false;
    return {
      complete(value) {
        if (done) return Promise.resolve();
        done = true;
        if (held.get(key) === entry) held.delete(key);
        for (const w of entry.waiters) w.resolve({ kind: 'landed', value, waited: true });
        entry.waiters.clear();
        return Promise.resolve();
      },
      abandon() {
        if (done) return Promise.resolve();
        done = true;
        const next = entry.waiters.values().next();
        if (next.done === true) {
          if (held.get(key) === entry) held.delete(key);
        } else {
          entry.waiters.delete(next.value);
          next.value.resolve({ kind: 'acquired', lease: leaseFor(key, entry) });
        }
        return Promise.resolve();
      },
    };
  };

  return {
    // Every lease here is this process's own.
    heldElsewhere: (keys) => Promise.resolve(keys.map(() => false)),
    acquire(key: string, opts: LeaseOptions): Promise<LeaseOutcome> {
      const { signal } = opts;
      if (signal.aborted) return Promise.reject(toError(signal.reason));
      const entry = held.get(key);
      if (entry === undefined) {
        const fresh: Held = { waiters: new Set() };
        held.set(key, fresh);
        return Promise.resolve({ kind: 'acquired', lease: leaseFor(key, fresh) });
      }
      return new Promise<LeaseOutcome>((resolve, reject) => {
        const cleanup = (): void => {
          clearTimeout(timer);
          signal.removeEventListener('abort', onAbort);
          entry.waiters.delete(waiter);
        };
        const waiter: Waiter = {
          resolve: (outcome) => {
            cleanup();
            resolve(outcome);
          },
          reject: (err) => {
            cleanup();
            reject(err);
          },
        };
        const onAbort = (): void => waiter.reject(toError(signal.reason));
        // The deadline is read again when the timer fires: one that moved later re-arms it.
        const onDeadline = (): void => {
          const left = opts.deadline - now();
          if (left > 0) timer = setTimeout(onDeadline, left);
          else
            waiter.reject(
              new RewardError('RW_JUDGE_TIMEOUT', 'deadline reached waiting for a shared judgment'),
            );
        };
        let timer = setTimeout(onDeadline, Math.max(0, opts.deadline - now()));
        signal.addEventListener('abort', onAbort, { once: true });
        entry.waiters.add(waiter);
      });
    },
  };
}

/** Idempotency records kept at most `maxEntries` (oldest dropped first) and `ttlMs` each. */
export function createLocalIdempotency(maxEntries = 100_000, now: Clock = Date.now): IdempotencyStore {
  const records = new Map<string, { value: string; expiresAt: number }>();
  const live = (id: string): string | undefined => {
    const r = records.get(id);
    if (r === undefined) return undefined;
    if (r.expiresAt <= now()) {
      records.delete(id);
      return undefined;
    }
    return r.value;
  };
  const put = (id: string, value: string, ttlMs: number): void => {
    records.delete(id);
    records.set(id, { value, expiresAt: now() + ttlMs });
    evictOldest(records, maxEntries);
  };
  return {
    claim(id, value, ttlMs) {
      const existing = live(id);
      if (existing !== undefined) return Promise.resolve(existing);
      put(id, value, ttlMs);
      return Promise.resolve(undefined);
    },
    get: (id) => Promise.resolve(live(id)),
    put(id, value, ttlMs) {
      put(id, value, ttlMs);
      return Promise.resolve();
    },
  };
}

/** In-process token-budget counters (windows older than their TTL are dropped when a new one starts). */
export function createLocalBudget(now: Clock = Date.now): BudgetStore {
  const counters = new Map<string, { total: number; expiresAt: number }>();
  const live = (window: string): number => {
    const c = counters.get(window);
    return c === undefined || c.expiresAt <= now() ? 0 : c.total;
  };
  return {
    add(window, tokens, ttlMs) {
      if (!counters.has(window)) for (const [k, c] of counters) if (c.expiresAt <= now()) counters.delete(k);
      const total = live(window) + tokens;
      counters.set(window, { total, expiresAt: now() + ttlMs });
      return Promise.resolve(total);
    },
    get: (window) => Promise.resolve(live(window)),
  };
}

/** One process knows no other: a published cancel reaches nobody else (`shared: false`). */
export function createLocalCancels(): CancelBus {
  return {
    publish: () => Promise.resolve({ judgments: 0, requests: 0, processes: 0, shared: false }),
    serve: () => undefined,
  };
}

/** The state of one process: no shared judgment store (the LRU is the cache), local leases and buckets. */
export function createLocalState(now: Clock = Date.now): SharedState {
  const since = now();
  return {
    kind: 'local',
    judgments: undefined,
    leases: createLocalLeases(now),
    buckets: createLocalBuckets(now),
    idempotency: createLocalIdempotency(100_000, now),
    budget: createLocalBudget(now),
    cancels: createLocalCancels(),
    status: () => ({ kind: 'local', degraded: false, since }),
    close: () => Promise.resolve(),
  };
}
