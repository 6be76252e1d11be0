/**
 * One single-flight per judgment across every process sharing one Redis (`LeaseStore` of `redis.ts`).
 *
 * A process that acquires `<prefix>l:<key>` (SET NX with a TTL of `leaseMs`, renewed every third of it
 * while held) computes the judgment; on completion one script stores the value at `<prefix>j:<key>`,
 * releases the lease and publishes the outcome on `<prefix>d:<key>`. A process that finds the lease held
 * listens on that channel and looks again every `pollMs` (a message may be missed): the value landed, or
 * the lease expired (its holder crashed) and it takes over, or its deadline passes (`RW_JUDGE_TIMEOUT`).
 *
 * Failure semantics: while Redis is unusable, or when it fails under a waiter, the lease is local
 * (in-process single-flight) and its value is kept for the outage flush, so other replicas see it later.
 * Leases still held at close are abandoned, so waiters elsewhere take over at once, not after `leaseMs`.
 */
import { randomUUID } from 'node:crypto';

import { RewardError, toError } from '../errors.js';
import { isNoScript, script, type RedisConnection } from './redis-connection.js';
import type { Lease, LeaseOptions, LeaseOutcome, LeaseStore } from './types.js';

/** Upper bound on wait rounds per lease acquisition (each round is one message wait or poll). */
const MAX_LEASE_ROUNDS = 100_000;

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

export interface RedisLeases {
  store: LeaseStore;
  /** Stops renewing and abandons the leases still held (call before the connection closes). */
  close(): Promise<void>;
}

interface Held {
  leaseKey: string;
  valueKey: string;
  channel: string;
}

/** A waiter's wake-up: set while it waits for the next message. */
interface Wake {
  notify?: (() => void) | undefined;
}

export function createRedisLeases(conn: RedisConnection, local: LeaseStore, leaseMs: number): RedisLeases {
  const { client, prefix, holder, now } = conn;
  /** Leases this process holds, renewed together; abandoned on close. */
  const held = new Map<string, Held>();
  const renewer = setInterval(
    () => {
      if (held.size === 0 || !conn.usable()) return;
      const pipeline = client.pipeline();
      for (const { leaseKey } of held.values()) pipeline.evalsha(RENEW.sha, 1, leaseKey, holder, leaseMs);
      pipeline.exec().then(
        async (results) => {
          // After a Redis restart the script cache is empty: load it and renew on the next tick.
          if (results?.some(([err]) => isNoScript(err)) === true) await client.script('LOAD', RENEW.text);
        },
        (err: unknown) => conn.failed('leases', err),
      );
    },
    Math.max(50, Math.floor(leaseMs / 3)),
  );
  renewer.unref();
  const pollMs = Math.max(50, Math.min(1000, Math.floor(leaseMs / 4)));

  const redisLease = (key: string): Lease => {
    const h: Held = {
      valueKey: `${prefix}j:${key}`,
      leaseKey: `${prefix}l:${key}`,
      channel: `${prefix}d:${key}`,
    };
    const token = randomUUID();
    held.set(token, h);
    let done = false;
    const finish = async (message: string, value: string, storeTtlMs: number | undefined): Promise<void> => {
      if (done) return;
      done = true;
      held.delete(token);
      const ttl = storeTtlMs === undefined ? '0' : String(Math.max(1, Math.floor(storeTtlMs)));
      await conn.guarded(
        'leases',
        () => conn.run(COMPLETE, [h.valueKey, h.leaseKey], [holder, message, ttl, h.channel, value]),
        () => {
          if (storeTtlMs !== undefined) conn.remember(h.valueKey, value, storeTtlMs, false);
        },
      );
    };
    return {
      complete: (value, storeTtlMs) => finish(`v${value}`, value, storeTtlMs),
      abandon: () => finish('a', '', undefined),
    };
  };

  const tryAcquire = async (key: string, waited: boolean): Promise<LeaseOutcome | undefined> => {
    const reply = await conn.run(ACQUIRE, [`${prefix}j:${key}`, `${prefix}l:${key}`], [holder, leaseMs]);
    if (!Array.isArray(reply)) throw new Error('unexpected lease reply');
    const kind: unknown = reply[0];
    const value: unknown = reply[1];
    if (kind === 'landed' && typeof value === 'string') return { kind: 'landed', value, waited };
    if (kind === 'acquired') return { kind: 'acquired', lease: redisLease(key) };
    return undefined;
  };

  /** A local lease whose stored outcome is also kept for the flush, so other replicas see it later. */
  const localAcquire = async (key: string, opts: LeaseOptions): Promise<LeaseOutcome> => {
    const outcome = await local.acquire(key, opts);
    if (outcome.kind === 'landed') return outcome;
    const { lease } = outcome;
    return {
      kind: 'acquired',
      lease: {
        async complete(value, storeTtlMs) {
          if (storeTtlMs !== undefined) conn.remember(`${prefix}j:${key}`, value, storeTtlMs, false);
          await lease.complete(value, storeTtlMs);
        },
        abandon: () => lease.abandon(),
      },
    };
  };

  /** Held elsewhere: listen for its outcome, looking again each round (it may have landed in between). */
  const waitForHolder = async (key: string, opts: LeaseOptions): Promise<LeaseOutcome> => {
    const messages: string[] = [];
    const wake: Wake = {};
    const stop = await conn.listen(`${prefix}d:${key}`, (m) => {
      messages.push(m);
      wake.notify?.();
    });
    try {
      for (let round = 0; round < MAX_LEASE_ROUNDS; round++) {
        if (!conn.usable()) return await localAcquire(key, opts);
        const outcome = await tryAcquire(key, true);
        if (outcome !== undefined) return outcome;
        const left = opts.deadline - now();
        if (left <= 0) break;
        const message = await nextMessage(messages, wake, Math.min(pollMs, left), opts.signal);
        if (message?.startsWith('v') === true)
          return { kind: 'landed', value: message.slice(1), waited: true };
      }
      throw new RewardError('RW_JUDGE_TIMEOUT', 'deadline reached waiting for a judgment on another replica');
    } finally {
      stop();
    }
  };

  const store: LeaseStore = {
    async heldElsewhere(keys) {
      if (keys.length === 0) return [];
      return conn.guarded(
        'leases',
        async () =>
          (await client.mget(keys.map((k) => `${prefix}l:${k}`))).map((h) => h !== null && h !== holder),
        () => keys.map(() => false),
      );
    },
    async acquire(key, opts) {
      const { signal } = opts;
      if (signal.aborted) throw toError(signal.reason);
      if (!conn.usable()) return localAcquire(key, opts);
      try {
        return (await tryAcquire(key, false)) ?? (await waitForHolder(key, opts));
      } catch (err) {
        if (signal.aborted || err instanceof RewardError) throw err;
        // Redis failed under us: compute locally rather than fail the request.
        conn.failed('leases', err);
        return localAcquire(key, opts);
      }
    },
  };

  return {
    store,
    async close() {
      clearInterval(renewer);
      if (client.status === 'ready') {
        await Promise.all(
          [...held.values()].map((h) =>
            conn
              .run(COMPLETE, [h.valueKey, h.leaseKey], [holder, 'a', '0', h.channel, ''])
              .catch(() => undefined),
          ),
        );
      }
      held.clear();
    },
  };
}

/** Waits for a message on the channel or `ms`, whichever first; undefined on timeout; rejects on abort. */
function nextMessage(
  messages: string[],
  wake: Wake,
  ms: number,
  signal: AbortSignal,
): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
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
}
