/**
 * The shared-state interfaces on Redis (ioredis), so every worker and replica shares one judgment cache,
 * one single-flight per judgment, one set of RPM/TPM buckets per backend and the idempotency records.
 *
 * Failure semantics: Redis is an accelerator, never a dependency. Commands do not queue while the
 * connection is down and time out after `timeoutMs`; a failed command marks the state `degraded` and the
 * local implementation answers instead (leases and buckets in-process, buckets at this process's share of
 * the limit). While degraded no command is sent but a PING every second; when one succeeds the state
 * recovers and writes made during the outage (judgments, idempotency records; bounded) are flushed, and the
 * token spend counted locally meanwhile is added to the shared counters (`redis-budget.ts`).
 *
 * The parts, one file each: the connection and its outage handling (`redis-connection.ts`), leases
 * (`redis-leases.ts`), buckets (`redis-buckets.ts`), judgments and idempotency records (`redis-records.ts`),
 * the token budget (`redis-budget.ts`) and cancels (`redis-cancels.ts`); this file puts them together.
 *
 * Keys (all under `prefix`): `j:<key>` judgment, `l:<key>` lease, `d:<key>` channel of a lease's outcome,
 * `b:<name>` bucket (hash of level and time), `i:<id>` idempotency record, `members` heartbeats (zset),
 * `cancels` recent cancels (zset) with the channels `cancel` and `cancel-reply:<holder>` (`redis-cancels.ts`).
 */
import { createLocalBudget, createLocalBuckets, createLocalIdempotency, createLocalLeases } from './local.js';
import { createRedisBuckets } from './redis-buckets.js';
import { createRedisBudget } from './redis-budget.js';
import { createRedisCancels } from './redis-cancels.js';
import { createRedisConnection } from './redis-connection.js';
import { createRedisLeases } from './redis-leases.js';
import { createRedisIdempotency, createRedisJudgments } from './redis-records.js';
import type { BudgetStore, CancelBus, SharedState, StateObserver } from './types.js';

export { redactRedisUrl } from './redis-connection.js';

export interface RedisStateOptions {
  /** `redis://[user:password@]host:port[/db]` (or `rediss://`). */
  url: string;
  /** Namespace of every key, e.g. `reward:` (deployments sharing one Redis pick different ones). */
  prefix: string;
  /** A lease not renewed for this long expires (its holder crashed): waiters take over. */
  leaseMs: number;
  /** Per command; past it the command counts as failed and local state answers. */
  timeoutMs: number;
  /** Writes kept during an outage and flushed on recovery (oldest dropped first). Default 10 000. */
  maxPendingWrites?: number | undefined;
  observer?: StateObserver | undefined;
  now?: (() => number) | undefined;
}

export interface RedisState extends SharedState {
  readonly kind: 'redis';
  readonly budget: BudgetStore;
  readonly cancels: CancelBus;
  /** Resolves true once connected, false when `timeoutMs` passes first (then the state starts degraded). */
  connected(timeoutMs: number): Promise<boolean>;
  /** Processes (workers × replicas) with a heartbeat in the last 15 s, this one included; ≥ 1. */
  peers(): number;
}

export function createRedisState(options: RedisStateOptions): RedisState {
  const now = options.now ?? Date.now;
  const conn = createRedisConnection({ ...options, now });
  const { client, sub, prefix, holder } = conn;
  const leases = createRedisLeases(conn, createLocalLeases(now), options.leaseMs);
  // Spend counted locally during an outage is written back on recovery (redis-budget.ts).
  const budget = createRedisBudget({
    client,
    prefix,
    guarded: (attempt, fallback) => conn.guarded('budget', attempt, fallback),
    local: createLocalBudget(now),
    now,
    failed: (err) => conn.failed('budget', err),
  });
  conn.onRecovered(() => void budget.writeBack());
  const cancels = createRedisCancels({
    ...{ client, sub, prefix, holder, now },
    usable: () => conn.usable(),
    failed: (op, err) => conn.failed(op, err),
    listen: (channel, listener) => conn.listen(channel, listener),
  });

  return {
    kind: 'redis',
    judgments: createRedisJudgments(conn),
    leases: leases.store,
    buckets: createRedisBuckets(conn, createLocalBuckets(now)),
    idempotency: createRedisIdempotency(conn, createLocalIdempotency(100_000, now)),
    budget: budget.store,
    cancels,
    status: () => conn.status(),
    peers: () => conn.peers(),
    connected: (waitMs) => conn.connected(waitMs),
    async close() {
      conn.stop();
      cancels.close();
      // Leases still held are abandoned so waiters elsewhere take over at once, not after leaseMs.
      await leases.close();
      await conn.disconnect();
    },
  };
}
