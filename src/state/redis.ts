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
 * Keys (all under `prefix`): `j:<key>` judgment, `l:<key>` lease, `d:<key>` channel of a lease's outcome,
 * `b:<name>` bucket (hash of level and time), `i:<id>` idempotency record, `members` heartbeats (zset),
 * `cancels` recent cancels (zset) with the channels `cancel` and `cancel-reply:<holder>` (`redis-cancels.ts`).
 */
import { createHash, randomUUID } from 'node:crypto';
import { hostname } from 'node:os';

import { Redis } from 'ioredis';

import { RewardError, toError } from '../errors.js';
import { evictOldest } from './bounded.js';
import { createLocalBudget, createLocalBuckets, createLocalIdempotency, createLocalLeases } from './local.js';
import { createRedisBudget } from './redis-budget.js';
import { createRedisCancels } from './redis-cancels.js';
import type {
  BucketReservation,
  BucketSpec,
  BucketStore,
  BudgetStore,
  CancelBus,
  IdempotencyStore,
  JudgmentStore,
  Lease,
  LeaseOptions,
  LeaseOutcome,
  LeaseStore,
  SharedState,
  StateObserver,
  StateOp,
} from './types.js';

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

const PROBE_INTERVAL_MS = 1000;
/** A process counts as a peer while its heartbeat is younger than this. */
const MEMBER_TTL_MS = 15_000;
const HEARTBEAT_MS = 5_000;
/** Upper bound on wait rounds per lease acquisition (each round is one message wait or poll). */
const MAX_LEASE_ROUNDS = 100_000;

interface Script {
  text: string;
  sha: string;
}

const script = (text: string): Script => ({ text, sha: createHash('sha1').update(text).digest('hex') });

/** KEYS: value, lease. ARGV: holder, lease ms. → {'landed', value} | {'acquired'} | {'held'}. */
const ACQUIRE = script(`
local v = redis.call('GET', KEYS[1])
if v then return {'landed', v} end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return {'acquired'} end
return {'held'}
`);

/** KEYS: lease. ARGV: holder, lease ms. → 1 when still ours. */
const RENEW = script(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
`);

/** KEYS: value, lease. ARGV: holder, message, store ttl ms ('0' = do not store), channel, value. */
const COMPLETE = script(`
if ARGV[3] ~= '0' then redis.call('SET', KEYS[1], ARGV[5], 'PX', ARGV[3]) end
if redis.call('GET', KEYS[2]) == ARGV[1] then redis.call('DEL', KEYS[2]) end
redis.call('PUBLISH', ARGV[4], ARGV[2])
return 1
`);

/**
 * Token buckets on the server's clock (no skew between replicas). KEYS: buckets. ARGV: max wait ms,
 * 'take' | 'refund', then capacity, per-ms rate, cost for each bucket. → {taken 0|1, wait ms as string}.
 */
const BUCKETS = script(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local maxWait = tonumber(ARGV[1])
local take = ARGV[2] == 'take'
local wait = 0
local levels = {}
for i, key in ipairs(KEYS) do
  local base = 2 + (i - 1) * 3
  local cap = tonumber(ARGV[base + 1])
  local perMs = tonumber(ARGV[base + 2])
  local cost = tonumber(ARGV[base + 3])
  local s = redis.call('HMGET', key, 'l', 't')
  local level = cap
  if s[1] then level = math.min(cap, tonumber(s[1]) + math.max(0, now - tonumber(s[2])) * perMs) end
  levels[i] = level
  if take then wait = math.max(wait, math.max(0, math.min(cost, cap) - level) / perMs) end
end
if take and wait > maxWait then return {0, tostring(wait)} end
for i, key in ipairs(KEYS) do
  local base = 2 + (i - 1) * 3
  local cap = tonumber(ARGV[base + 1])
  local perMs = tonumber(ARGV[base + 2])
  local cost = tonumber(ARGV[base + 3])
  local level
  if take then level = levels[i] - cost else level = math.min(cap, levels[i] + cost) end
  redis.call('HSET', key, 'l', tostring(level), 't', tostring(now))
  redis.call('PEXPIRE', key, math.ceil((cap - level) / perMs) + 1000)
end
return {1, tostring(wait)}
`);

const isNoScript = (err: unknown): boolean => err instanceof Error && err.message.startsWith('NOSCRIPT');

/** The URL without its password, for logs and /readyz. */
export function redactRedisUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password !== '') u.password = '***';
    return u.toString();
  } catch {
    return 'redis://(invalid url)';
  }
}

interface Pending {
  value: string;
  expiresAt: number;
  /** Only if absent (idempotency claims). */
  nx: boolean;
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
  const { prefix, leaseMs, timeoutMs, observer } = options;
  const maxPending = options.maxPendingWrites ?? 10_000;
  const holder = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  // No offline queue: while disconnected a command fails at once and local state answers.
  const connect = (connectionName: string): Redis =>
    new Redis(options.url, {
      connectionName,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      commandTimeout: timeoutMs,
      connectTimeout: Math.max(1000, timeoutMs * 4),
      retryStrategy: (times: number) => Math.min(2000, 50 * 2 ** Math.min(times, 6)),
    });
  const client = connect('debate-reward');
  const sub = connect('debate-reward-sub');
  const local = {
    leases: createLocalLeases(now),
    buckets: createLocalBuckets(now),
    idempotency: createLocalIdempotency(100_000, now),
    budget: createLocalBudget(now),
  };

  let degraded = true;
  let since = now();
  let closed = false;
  let peerCount = 1;
  const pending = new Map<string, Pending>();
  observer?.onDegraded?.(true);

  /** What runs when Redis is usable again: outage writes flushed, outage spend written back. */
  const onRecovered: Array<() => void> = [];
  const setDegraded = (value: boolean): void => {
    if (value === degraded || closed) return;
    degraded = value;
    since = now();
    observer?.onDegraded?.(value);
    if (!value) {
      void flush();
      for (const recovered of onRecovered) recovered();
    }
  };

  const usable = (): boolean => !degraded && !closed && client.status === 'ready';

  const failed = (op: StateOp, err: unknown): void => {
    observer?.onError?.(op, err);
    setDegraded(true);
  };

  /** `attempt` on Redis when usable; else, or when it fails (counted, degrading), `fallback` answers. */
  const guarded = async <T>(
    op: StateOp,
    attempt: () => Promise<T>,
    fallback: () => T | Promise<T>,
  ): Promise<T> => {
    if (!usable()) return fallback();
    try {
      return await attempt();
    } catch (err) {
      failed(op, err);
      return fallback();
    }
  };

  // Connection events drive the state; an 'error' listener is required (ioredis prints otherwise).
  client.on('ready', () => {
    void client.ping().then(
      () => setDegraded(false),
      (err: unknown) => failed('flush', err),
    );
  });
  client.on('close', () => setDegraded(true));
  client.on('error', () => undefined);
  sub.on('error', () => undefined);

  const probe = setInterval(() => {
    if (!degraded || closed || client.status !== 'ready') return;
    client.ping().then(
      () => setDegraded(false),
      () => undefined,
    );
  }, PROBE_INTERVAL_MS);
  probe.unref();

  const run = async (s: Script, keys: readonly string[], args: ReadonlyArray<string | number>) => {
    try {
      return await client.evalsha(s.sha, keys.length, ...keys, ...args);
    } catch (err) {
      if (!isNoScript(err)) throw err;
      return client.eval(s.text, keys.length, ...keys, ...args);
    }
  };

  const remember = (key: string, value: string, ttlMs: number, nx: boolean): void => {
    pending.delete(key);
    pending.set(key, { value, expiresAt: now() + ttlMs, nx });
    evictOldest(pending, maxPending);
  };

  /** Writes made during the outage, now that Redis is back (expired ones are dropped). */
  const flush = async (): Promise<void> => {
    if (pending.size === 0) return;
    const batch = [...pending.entries()];
    pending.clear();
    const pipeline = client.pipeline();
    const t = now();
    for (const [key, p] of batch) {
      const ttl = Math.floor(p.expiresAt - t);
      if (ttl <= 0) continue;
      if (p.nx) pipeline.set(key, p.value, 'PX', ttl, 'NX');
      else pipeline.set(key, p.value, 'PX', ttl);
    }
    try {
      await pipeline.exec();
    } catch (err) {
      for (const [key, p] of batch) if (!pending.has(key)) pending.set(key, p);
      failed('flush', err);
    }
  };

  // Heartbeats: how many processes share the limits (for the outage share of each bucket).
  const membersKey = `${prefix}members`;
  const heartbeat = async (): Promise<void> => {
    if (!usable()) return;
    const t = now();
    try {
      const result = await client
        .multi()
        .zadd(membersKey, t, holder)
        .zremrangebyscore(membersKey, '-inf', t - MEMBER_TTL_MS)
        .zcard(membersKey)
        .pexpire(membersKey, MEMBER_TTL_MS * 2)
        .exec();
      const card: unknown = result?.[2]?.[1];
      if (typeof card === 'number' && card >= 1) peerCount = card;
    } catch {
      // Counted by the next command that matters; the last known peer count stays.
    }
  };
  const beat = setInterval(() => void heartbeat(), HEARTBEAT_MS);
  beat.unref();

  // ---- subscriptions: one connection, listeners per channel
  const listeners = new Map<string, Set<(message: string) => void>>();
  sub.on('message', (channel: string, message: string) => {
    const set = listeners.get(channel);
    if (set !== undefined) for (const l of set) l(message);
  });
  const listen = async (channel: string, listener: (message: string) => void): Promise<() => void> => {
    let set = listeners.get(channel);
    if (set === undefined) {
      set = new Set();
      listeners.set(channel, set);
      // A failed subscription only costs latency: the waiter polls as well.
      await sub.subscribe(channel).catch(() => undefined);
    }
    set.add(listener);
    const own = set;
    return () => {
      own.delete(listener);
      if (own.size === 0 && listeners.get(channel) === own) {
        listeners.delete(channel);
        void sub.unsubscribe(channel).catch(() => undefined);
      }
    };
  };

  // ---- judgments
  const judgments: JudgmentStore = {
    async getMany(keys) {
      if (keys.length === 0) return [];
      return guarded(
        'judgments',
        async () => (await client.mget(keys.map((k) => `${prefix}j:${k}`))).map((v) => v ?? undefined),
        () => keys.map(() => undefined),
      );
    },
    set(key, value, ttlMs) {
      const k = `${prefix}j:${key}`;
      return guarded(
        'judgments',
        async () => {
          await client.set(k, value, 'PX', Math.max(1, Math.floor(ttlMs)));
        },
        () => remember(k, value, ttlMs, false),
      );
    },
  };

  // ---- leases
  /** Leases this process holds, renewed together; dropped on close so waiters elsewhere take over. */
  const held = new Map<string, { leaseKey: string; valueKey: string; channel: string }>();
  const renewer = setInterval(
    () => {
      if (held.size === 0 || !usable()) return;
      const pipeline = client.pipeline();
      for (const { leaseKey } of held.values()) pipeline.evalsha(RENEW.sha, 1, leaseKey, holder, leaseMs);
      pipeline.exec().then(
        async (results) => {
          // After a Redis restart the script cache is empty: load it and renew on the next tick.
          if (results?.some(([err]) => isNoScript(err)) === true) await client.script('LOAD', RENEW.text);
        },
        (err: unknown) => failed('leases', err),
      );
    },
    Math.max(50, Math.floor(leaseMs / 3)),
  );
  renewer.unref();

  const pollMs = Math.max(50, Math.min(1000, Math.floor(leaseMs / 4)));

  const redisLease = (key: string): Lease => {
    const valueKey = `${prefix}j:${key}`;
    const leaseKey = `${prefix}l:${key}`;
    const channel = `${prefix}d:${key}`;
    const token = randomUUID();
    held.set(token, { leaseKey, valueKey, channel });
    let done = false;
    const finish = async (message: string, value: string, storeTtlMs: number | undefined): Promise<void> => {
      if (done) return;
      done = true;
      held.delete(token);
      const ttl = storeTtlMs === undefined ? '0' : String(Math.max(1, Math.floor(storeTtlMs)));
      await guarded(
        'leases',
        () => run(COMPLETE, [valueKey, leaseKey], [holder, message, ttl, channel, value]),
        () => {
          if (storeTtlMs !== undefined) remember(valueKey, value, storeTtlMs, false);
        },
      );
    };
    return {
      complete: (value, storeTtlMs) => finish(`v${value}`, value, storeTtlMs),
      abandon: () => finish('a', '', undefined),
    };
  };

  /** Waits for a message on `channel` or `ms`, whichever first; undefined on timeout. */
  const nextMessage = (
    messages: string[],
    wake: { notify?: (() => void) | undefined },
    ms: number,
    signal: AbortSignal,
  ): Promise<string | undefined> =>
    new Promise((resolve, reject) => {
      const queued = messages.shift();
      if (queued !== undefined) return resolve(queued);
      const cleanup = (): void => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        wake.notify = undefined;
      };
      const onAbort = (): void => {
        cleanup();
        reject(toError(signal.reason));
      };
      const timer = setTimeout(() => {
        cleanup();
        resolve(undefined);
      }, ms);
      wake.notify = () => {
        cleanup();
        resolve(messages.shift());
      };
      signal.addEventListener('abort', onAbort, { once: true });
    });

  const tryAcquire = async (key: string, waited: boolean): Promise<LeaseOutcome | undefined> => {
    const reply: unknown = await run(ACQUIRE, [`${prefix}j:${key}`, `${prefix}l:${key}`], [holder, leaseMs]);
    if (!Array.isArray(reply)) throw new Error('unexpected lease reply');
    const kind: unknown = reply[0];
    const value: unknown = reply[1];
    if (kind === 'landed' && typeof value === 'string') return { kind: 'landed', value, waited };
    if (kind === 'acquired') return { kind: 'acquired', lease: redisLease(key) };
    return undefined;
  };

  /** A local lease whose stored outcome is also kept for the flush, so other replicas see it later. */
  const localAcquire = async (key: string, opts: LeaseOptions): Promise<LeaseOutcome> => {
    const outcome = await local.leases.acquire(key, opts);
    if (outcome.kind === 'landed') return outcome;
    const { lease } = outcome;
    return {
      kind: 'acquired',
      lease: {
        async complete(value, storeTtlMs) {
          if (storeTtlMs !== undefined) remember(`${prefix}j:${key}`, value, storeTtlMs, false);
          await lease.complete(value, storeTtlMs);
        },
        abandon: () => lease.abandon(),
      },
    };
  };

  const leases: LeaseStore = {
    async heldElsewhere(keys) {
      if (keys.length === 0) return [];
      return guarded(
        'leases',
        async () =>
          (await client.mget(keys.map((k) => `${prefix}l:${k}`))).map((h) => h !== null && h !== holder),
        () => keys.map(() => false),
      );
    },
    async acquire(key: string, opts: LeaseOptions): Promise<LeaseOutcome> {
      const { signal } = opts;
      if (signal.aborted) throw toError(signal.reason);
      if (!usable()) return localAcquire(key, opts);
      let stop: (() => void) | undefined;
      try {
        const first = await tryAcquire(key, false);
        if (first !== undefined) return first;
        // Held elsewhere: listen for its outcome, then look again (it may have landed in between).
        const messages: string[] = [];
        const wake: { notify?: (() => void) | undefined } = {};
        stop = await listen(`${prefix}d:${key}`, (m) => {
          messages.push(m);
          wake.notify?.();
        });
        for (let round = 0; round < MAX_LEASE_ROUNDS; round++) {
          if (!usable()) return await localAcquire(key, opts);
          const outcome = await tryAcquire(key, true);
          if (outcome !== undefined) return outcome;
          const left = opts.deadline - now();
          if (left <= 0) break;
          const message = await nextMessage(messages, wake, Math.min(pollMs, left), signal);
          if (message?.startsWith('v') === true) {
            return { kind: 'landed', value: message.slice(1), waited: true };
          }
        }
        throw new RewardError(
          'RW_JUDGE_TIMEOUT',
          'deadline reached waiting for a judgment on another replica',
        );
      } catch (err) {
        if (signal.aborted || err instanceof RewardError) throw err;
        // Redis failed under us: compute locally rather than fail the request.
        failed('leases', err);
        return localAcquire(key, opts);
      } finally {
        stop?.();
      }
    },
  };

  // ---- buckets
  /** This process's share of each limit while Redis is out: the limit over the last known peer count. */
  const share = (buckets: readonly BucketSpec[]): BucketSpec[] =>
    buckets.map((b) => ({
      name: b.name,
      capacity: Math.max(1, b.capacity / peerCount),
      perMs: b.perMs / peerCount,
      cost: b.cost,
    }));

  const bucketArgs = (buckets: readonly BucketSpec[]): number[] =>
    buckets.flatMap((b) => [b.capacity, b.perMs, b.cost]);

  const buckets: BucketStore = {
    take(specs, maxWaitMs): Promise<BucketReservation> {
      return guarded(
        'buckets',
        async () => {
          const reply: unknown = await run(
            BUCKETS,
            specs.map((b) => `${prefix}b:${b.name}`),
            [Number.isFinite(maxWaitMs) ? maxWaitMs : Number.MAX_SAFE_INTEGER, 'take', ...bucketArgs(specs)],
          );
          if (!Array.isArray(reply)) throw new Error('unexpected bucket reply');
          const taken: unknown = reply[0];
          const wait: unknown = reply[1];
          return { taken: taken === 1, waitMs: Number(wait) };
        },
        () => local.buckets.take(share(specs), maxWaitMs),
      );
    },
    async refund(specs) {
      if (!usable()) return local.buckets.refund(share(specs));
      try {
        await run(
          BUCKETS,
          specs.map((b) => `${prefix}b:${b.name}`),
          [0, 'refund', ...bucketArgs(specs)],
        );
      } catch (err) {
        failed('buckets', err);
      }
    },
  };

  // ---- idempotency
  const idempotency: IdempotencyStore = {
    async claim(id, value, ttlMs) {
      const k = `${prefix}i:${id}`;
      if (!usable()) {
        const existing = await local.idempotency.claim(id, value, ttlMs);
        if (existing === undefined) remember(k, value, ttlMs, true);
        return existing;
      }
      try {
        const created = await client.set(k, value, 'PX', Math.max(1, Math.floor(ttlMs)), 'NX');
        if (created === 'OK') return undefined;
        const existing = await client.get(k);
        return existing ?? undefined;
      } catch (err) {
        failed('idempotency', err);
        return local.idempotency.claim(id, value, ttlMs);
      }
    },
    get(id) {
      return guarded(
        'idempotency',
        async () => (await client.get(`${prefix}i:${id}`)) ?? undefined,
        () => local.idempotency.get(id),
      );
    },
    async put(id, value, ttlMs) {
      const k = `${prefix}i:${id}`;
      await local.idempotency.put(id, value, ttlMs);
      return guarded(
        'idempotency',
        async () => {
          await client.set(k, value, 'PX', Math.max(1, Math.floor(ttlMs)));
        },
        () => remember(k, value, ttlMs, false),
      );
    },
  };

  // ---- token budget (redis-budget.ts): spend counted locally during an outage is written back on recovery.
  const budget = createRedisBudget({
    client,
    prefix,
    guarded: (attempt, fallback) => guarded('budget', attempt, fallback),
    local: local.budget,
    now,
    failed: (err) => failed('budget', err),
  });
  onRecovered.push(() => void budget.writeBack());

  // ---- cancels across processes (redis-cancels.ts)
  const cancels = createRedisCancels({ client, sub, prefix, holder, usable, failed, listen, now });

  const url = redactRedisUrl(options.url);
  return {
    kind: 'redis',
    judgments,
    leases,
    buckets,
    idempotency,
    budget: budget.store,
    cancels,
    status: () => ({ kind: 'redis', degraded, since, url }),
    peers: () => peerCount,
    async connected(waitMs) {
      const until = now() + waitMs;
      for (let i = 0; i < 10_000 && now() < until; i++) {
        if (!degraded) {
          await heartbeat();
          return true;
        }
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      return !degraded;
    },
    async close() {
      closed = true;
      clearInterval(probe);
      clearInterval(beat);
      clearInterval(renewer);
      cancels.close();
      // Leases still held are abandoned so waiters elsewhere take over at once, not after leaseMs.
      if (client.status === 'ready') {
        await Promise.all(
          [...held.values()].map((h) =>
            run(COMPLETE, [h.valueKey, h.leaseKey], [holder, 'a', '0', h.channel, '']).catch(() => undefined),
          ),
        );
      }
      held.clear();
      if (client.status === 'ready') await client.zrem(membersKey, holder).catch(() => undefined);
      client.disconnect();
      sub.disconnect();
    },
  };
}
