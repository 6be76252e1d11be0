/**
 * The judgment cache and the idempotency records on Redis (`JudgmentStore` and `IdempotencyStore` of
 * `redis.ts`): plain keys with a TTL, `<prefix>j:<key>` and `<prefix>i:<id>`.
 *
 * Failure semantics: while Redis is unusable (or a command fails, which degrades the state), a read finds
 * nothing shared (the in-process LRU and the local idempotency records answer) and a write is kept for the
 * flush on recovery (an idempotency claim only if the key is still absent then).
 */
import type { RedisConnection } from './redis-connection.js';
import type { IdempotencyStore, JudgmentStore } from './types.js';

const ttlOf = (ttlMs: number): number => Math.max(1, Math.floor(ttlMs));

export function createRedisJudgments(conn: RedisConnection): JudgmentStore {
  const { client, prefix } = conn;
  return {
    async getMany(keys) {
      if (keys.length === 0) return [];
      return conn.guarded(
        'judgments',
        async () => (await client.mget(keys.map((k) => `${prefix}j:${k}`))).map((v) => v ?? undefined),
        () => keys.map(() => undefined),
      );
    },
    set(key, value, ttlMs) {
      const k = `${prefix}j:${key}`;
      return conn.guarded(
        'judgments',
        async () => {
          await client.set(k, value, 'PX', ttlOf(ttlMs));
        },
        () => conn.remember(k, value, ttlMs, false),
      );
    },
  };
}

/** `local` answers during an outage, and keeps every record put (a later outage still finds it). */
export function createRedisIdempotency(conn: RedisConnection, local: IdempotencyStore): IdempotencyStore {
  const { client, prefix } = conn;
  return {
    async claim(id, value, ttlMs) {
      const k = `${prefix}i:${id}`;
      if (!conn.usable()) {
        const existing = await local.claim(id, value, ttlMs);
        if (existing === undefined) conn.remember(k, value, ttlMs, true);
        return existing;
      }
      try {
        const created = await client.set(k, value, 'PX', ttlOf(ttlMs), 'NX');
        if (created === 'OK') return undefined;
        const existing = await client.get(k);
        return existing ?? undefined;
      } catch (err) {
        conn.failed('idempotency', err);
        return local.claim(id, value, ttlMs);
      }
    },
    get(id) {
      return conn.guarded(
        'idempotency',
        async () => (await client.get(`${prefix}i:${id}`)) ?? undefined,
        () => local.get(id),
      );
    },
    async put(id, value, ttlMs) {
      const k = `${prefix}i:${id}`;
      await local.put(id, value, ttlMs);
      return conn.guarded(
        'idempotency',
        async () => {
          await client.set(k, value, 'PX', ttlOf(ttlMs));
        },
        () => conn.remember(k, value, ttlMs, false),
      );
    },
  };
}
