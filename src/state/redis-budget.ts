/**
 * The token budget's counters on Redis (`BudgetStore` of `redis.ts`): one counter per budget window
 * (`<prefix>t:<window>`), INCRBY + PEXPIRE in one round trip, so every process sharing the Redis adds to,
 * and reads, one total.
 *
 * While Redis is unusable (or a command fails), this process's local counter answers: it sees only its own
 * spend during the outage. That spend is also owed to the shared counter and written back when Redis returns
 * (`writeBack`, called on recovery), so the other processes learn it and the fleet's total stays whole. A
 * command that failed may still have been applied (a timeout); its tokens are owed all the same: the budget
 * errs on the side of spending less, never more. A write-back that fails stays owed for the next recovery.
 */
import type { Redis } from 'ioredis';

import { evictOldest } from './bounded.js';
import type { BudgetStore } from './types.js';

/** Windows whose outage spend is kept owed at most (one per window length in use; oldest dropped first). */
const MAX_OWED_WINDOWS = 64;

export interface RedisBudgetOptions {
  client: Redis;
  prefix: string;
  /** `attempt` on Redis when usable; else, or when it fails (counted, degrading), `fallback` answers. */
  guarded: <T>(attempt: () => Promise<T>, fallback: () => T | Promise<T>) => Promise<T>;
  /** The local counters that answer during an outage. */
  local: BudgetStore;
  now: () => number;
  /** A write-back failed (Redis went away again): counted like any failed command. */
  failed: (err: unknown) => void;
}

export interface RedisBudget {
  store: BudgetStore;
  /** Adds the spend counted locally during the outage to the shared counters (Redis is back). */
  writeBack(): Promise<void>;
  /** Tokens owed to the shared counters now (for tests and introspection). */
  owed(): number;
}

export function createRedisBudget(options: RedisBudgetOptions): RedisBudget {
  const { client, prefix, now } = options;
  /** Window → tokens spent here while Redis was out, and until when its counter lives. */
  const owed = new Map<string, { tokens: number; ttlMs: number; expiresAt: number }>();

  const owe = (window: string, tokens: number, ttlMs: number): void => {
    const prior = owed.get(window);
    owed.set(window, { tokens: (prior?.tokens ?? 0) + tokens, ttlMs, expiresAt: now() + ttlMs });
    evictOldest(owed, MAX_OWED_WINDOWS);
  };

  const add = async (window: string, tokens: number, ttlMs: number): Promise<number> => {
    const key = `${prefix}t:${window}`;
    const reply = await client.multi().incrby(key, Math.ceil(tokens)).pexpire(key, ttlMs).exec();
    const total: unknown = reply?.[0]?.[1];
    if (typeof total !== 'number') throw new Error('unexpected budget reply');
    return total;
  };

  return {
    store: {
      add: (window, tokens, ttlMs) =>
        options.guarded(
          () => add(window, tokens, ttlMs),
          () => {
            owe(window, tokens, ttlMs);
            return options.local.add(window, tokens, ttlMs);
          },
        ),
      get: (window) =>
        options.guarded(
          async () => Number((await client.get(`${prefix}t:${window}`)) ?? 0),
          () => options.local.get(window),
        ),
    },
    async writeBack() {
      if (owed.size === 0) return;
      const batch = [...owed.entries()];
      owed.clear();
      const t = now();
      const live = batch.filter(([, o]) => o.expiresAt > t);
      let failure: unknown;
      // Each window on its own: one that fails stays owed (with what was spent meanwhile), the others land.
      await Promise.all(
        live.map(async ([window, o]) => {
          try {
            await add(window, o.tokens, o.ttlMs);
          } catch (err) {
            failure ??= err;
            owe(window, o.tokens, o.ttlMs);
          }
        }),
      );
      if (failure !== undefined) options.failed(failure);
    },
    owed: () => {
      let sum = 0;
      for (const o of owed.values()) sum += o.tokens;
      return sum;
    },
  };
}
