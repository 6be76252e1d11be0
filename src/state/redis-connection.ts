/**
 * The connection half of the Redis state (`redis.ts`): the two ioredis connections (commands, and one
 * subscriber shared by every channel), whether Redis is usable, the degraded/recovered transitions, the
 * writes kept during an outage, the scripts' EVALSHA-then-EVAL, and the heartbeats that count the peers.
 * The stores (`redis-leases.ts`, `redis-records.ts`, `redis-budget.ts`, `redis-cancels.ts`) only send
 * commands through it and fall back to local state when it says Redis is not usable.
 *
 * Failure semantics: commands do not queue while the connection is down and time out after `timeoutMs`;
 * a failed command marks the state `degraded`. While degraded no command is sent but a PING every second;
 * when one succeeds the state recovers, the writes kept meanwhile (bounded, oldest dropped first, expired
 * ones skipped) are flushed, and every `onRecovered` hook runs (the budget writes back its outage spend).
 */
import { createHash, randomUUID } from 'node:crypto';
import { hostname } from 'node:os';

import { Redis } from 'ioredis';

import { evictOldest } from './bounded.js';
import type { StateObserver, StateOp, StateStatus } from './types.js';

const PROBE_INTERVAL_MS = 1000;
/** A process counts as a peer while its heartbeat is younger than this. */
const MEMBER_TTL_MS = 15_000;
const HEARTBEAT_MS = 5_000;

/** A Lua script with its SHA-1, sent by EVALSHA and by EVAL when the server does not know it yet. */
export interface Script {
  text: string;
  sha: string;
}

export const script = (text: string): Script => ({
  text,
  sha: createHash('sha1').update(text).digest('hex'),
});

/** Redis answered that it does not know a script's SHA (its script cache is empty after a restart). */
export const isNoScript = (err: unknown): boolean =>
  err instanceof Error && err.message.startsWith('NOSCRIPT');

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

export interface RedisConnectionOptions {
  /** `redis://[user:password@]host:port[/db]` (or `rediss://`). */
  url: string;
  /** Namespace of every key, e.g. `reward:`. */
  prefix: string;
  /** Per command; past it the command counts as failed and local state answers. */
  timeoutMs: number;
  /** Writes kept during an outage and flushed on recovery (oldest dropped first). Default 10 000. */
  maxPendingWrites?: number | undefined;
  observer?: StateObserver | undefined;
  now: () => number;
}

export interface RedisConnection {
  readonly client: Redis;
  /** The subscriber connection (only `listen` and the cancel bus use it). */
  readonly sub: Redis;
  readonly prefix: string;
  /** This process's name in leases and heartbeats: `<host>:<pid>:<random>`. */
  readonly holder: string;
  readonly now: () => number;
  /** Connected, not degraded, not closed: commands may be sent. */
  usable(): boolean;
  /** A command failed: counted (`observer.onError`) and the state degrades. */
  failed(op: StateOp, err: unknown): void;
  /** `attempt` on Redis when usable; else, or when it fails (counted, degrading), `fallback` answers. */
  guarded<T>(op: StateOp, attempt: () => Promise<T>, fallback: () => T | Promise<T>): Promise<T>;
  /** Runs a script by its SHA, loading it by EVAL when Redis does not know it. */
  run(s: Script, keys: readonly string[], args: ReadonlyArray<string | number>): Promise<unknown>;
  /** Keeps a write made during an outage, to be flushed when Redis returns (`nx`: only if absent). */
  remember(key: string, value: string, ttlMs: number, nx: boolean): void;
  /** Registers a listener on the subscriber connection; the returned function removes it. */
  listen(channel: string, listener: (message: string) => void): Promise<() => void>;
  /** Runs `hook` on every recovery, after the kept writes are flushed. */
  onRecovered(hook: () => void): void;
  /** Processes with a heartbeat in the last 15 s, this one included; ≥ 1 (the last known count). */
  peers(): number;
  status(): StateStatus;
  /** Resolves true once connected (with a first heartbeat), false when `waitMs` passes first. */
  connected(waitMs: number): Promise<boolean>;
  /** Stops probing and heartbeats; no hook runs after it. The connections stay open for `disconnect`. */
  stop(): void;
  /** Leaves the peers and closes both connections. */
  disconnect(): Promise<void>;
}

interface Pending {
  value: string;
  expiresAt: number;
  /** Only if absent (idempotency claims). */
  nx: boolean;
}

export function createRedisConnection(options: RedisConnectionOptions): RedisConnection {
  const { prefix, timeoutMs, observer, now } = options;
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

  let degraded = true;
  let since = now();
  let closed = false;
  let peerCount = 1;
  const pending = createOutageWrites(client, maxPending, now);
  const recoveredHooks: Array<() => void> = [];
  observer?.onDegraded?.(true);

  const setDegraded = (value: boolean): void => {
    if (value === degraded || closed) return;
    degraded = value;
    since = now();
    observer?.onDegraded?.(value);
    if (!value) {
      void pending.flush().catch((err: unknown) => failed('flush', err));
      for (const hook of recoveredHooks) hook();
    }
  };
  const usable = (): boolean => !degraded && !closed && client.status === 'ready';
  const failed = (op: StateOp, err: unknown): void => {
    observer?.onError?.(op, err);
    setDegraded(true);
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

  const url = redactRedisUrl(options.url);
  return {
    client,
    sub,
    prefix,
    holder,
    now,
    usable,
    failed,
    async guarded(op, attempt, fallback) {
      if (!usable()) return fallback();
      try {
        return await attempt();
      } catch (err) {
        failed(op, err);
        return fallback();
      }
    },
    async run(s, keys, args) {
      try {
        return await client.evalsha(s.sha, keys.length, ...keys, ...args);
      } catch (err) {
        if (!isNoScript(err)) throw err;
        return client.eval(s.text, keys.length, ...keys, ...args);
      }
    },
    remember: (key, value, ttlMs, nx) => pending.remember(key, value, ttlMs, nx),
    listen: createListeners(sub),
    onRecovered: (hook) => void recoveredHooks.push(hook),
    peers: () => peerCount,
    status: () => ({ kind: 'redis', degraded, since, url }),
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
    stop() {
      closed = true;
      clearInterval(probe);
      clearInterval(beat);
    },
    async disconnect() {
      if (client.status === 'ready') await client.zrem(membersKey, holder).catch(() => undefined);
      client.disconnect();
      sub.disconnect();
    },
  };
}

/**
 * Writes made during an outage (at most `max`, oldest dropped first), flushed in one pipeline when Redis is
 * back; expired ones are skipped. A flush that fails keeps its writes (unless newer ones replaced them) and
 * rejects, so the caller degrades again.
 */
function createOutageWrites(client: Redis, max: number, now: () => number) {
  const pending = new Map<string, Pending>();
  return {
    remember(key: string, value: string, ttlMs: number, nx: boolean): void {
      pending.delete(key);
      pending.set(key, { value, expiresAt: now() + ttlMs, nx });
      evictOldest(pending, max);
    },
    async flush(): Promise<void> {
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
        throw err;
      }
    },
  };
}

/** Subscriptions on one connection: listeners per channel, subscribed on the first, left after the last. */
function createListeners(sub: Redis): RedisConnection['listen'] {
  const listeners = new Map<string, Set<(message: string) => void>>();
  sub.on('message', (channel: string, message: string) => {
    const set = listeners.get(channel);
    if (set !== undefined) for (const l of set) l(message);
  });
  return async (channel, listener) => {
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
}
