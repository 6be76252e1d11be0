/**
 * The canary log: the ordered stream of canary outcomes every server process applies to its canary ledger,
 * so that with REDIS_URL all replicas of the server share one canary record and reach the same quarantine
 * decisions. Entries are opaque strings here (the ledger's JSON events; the caller validates them).
 *
 * Local: an append is delivered at once. Redis: a stream `<prefix>canary` (XADD, trimmed to about
 * `maxEntries`); every process reads it from the start (so a new process replays the retained history) and
 * then polls for new entries every `pollMs`, its own included, so every process applies the same order.
 * Failure semantics as for the other shared state: while Redis is unreachable an append is delivered
 * locally only (that process's record diverges until it restarts), and reading resumes where it stopped.
 *
 * The frozen fleet reference (the first canaries of the fleet, frozen by the ledger) is shared too: the
 * stream is trimmed, so a process that starts later cannot recompute it from the first entries. The first
 * process to freeze it stores it (`SET NX` on `<prefix>canary-reference:<name>`, no expiry: it belongs to
 * the canary record, which outlives restarts); every other one reads it at start and adopts the stored one
 * when it freezes its own, so all of them test against the same reference. Without Redis (or while it is
 * unreachable) a process keeps its own.
 */
import { Redis } from 'ioredis';

export interface CanaryLog {
  readonly kind: 'local' | 'redis';
  /** Adds an entry; listeners get it (and everyone else's) in log order. Never rejects. */
  append(entry: string): Promise<void>;
  /** Registers the consumer of every entry. */
  subscribe(listener: (entry: string) => void): void;
  /**
   * Stores `value` as the shared reference `name` unless one is stored already; resolves to the stored
   * one (the first stored wins), or `value` itself locally. Undefined when Redis failed. Never rejects.
   */
  shareReference(name: string, value: string): Promise<string | undefined>;
  /** The shared reference `name`, undefined when none is stored (or Redis failed). Never rejects. */
  readReference(name: string): Promise<string | undefined>;
  close(): Promise<void>;
}

export function createLocalCanaryLog(): CanaryLog {
  const listeners: Array<(entry: string) => void> = [];
  const references = new Map<string, string>();
  return {
    kind: 'local',
    append(entry) {
      for (const l of listeners) l(entry);
      return Promise.resolve();
    },
    subscribe(listener) {
      listeners.push(listener);
    },
    shareReference(name, value) {
      const stored = references.get(name) ?? value;
      references.set(name, stored);
      return Promise.resolve(stored);
    },
    readReference: (name) => Promise.resolve(references.get(name)),
    close: () => Promise.resolve(),
  };
}

export interface RedisCanaryLogOptions {
  url: string;
  prefix: string;
  /** Per command, ms. */
  timeoutMs: number;
  /** Between reads of new entries, ms. Default 250. */
  pollMs?: number | undefined;
  /** Entries kept in the stream (approximately). Default 100 000. */
  maxEntries?: number | undefined;
  /** A Redis command failed (counted by the caller). */
  onError?: ((err: unknown) => void) | undefined;
}

/** Entries read per XREAD. */
const READ_BATCH = 1000;
/** Reads per poll at most (a replay of a long history spreads over several polls). */
const MAX_READS_PER_POLL = 20;

export function createRedisCanaryLog(options: RedisCanaryLogOptions): CanaryLog {
  const key = `${options.prefix}canary`;
  const pollMs = options.pollMs ?? 250;
  const maxEntries = options.maxEntries ?? 100_000;
  const client = new Redis(options.url, {
    connectionName: 'debate-reward-canary',
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: options.timeoutMs,
    connectTimeout: Math.max(1000, options.timeoutMs * 4),
    retryStrategy: (times: number) => Math.min(2000, 50 * 2 ** Math.min(times, 6)),
  });
  client.on('error', () => undefined);
  const listeners: Array<(entry: string) => void> = [];
  const deliver = (entry: string): void => {
    for (const l of listeners) l(entry);
  };
  let lastId = '0';
  let reading: Promise<void> | undefined;
  let again = false;
  let closed = false;

  const readOnce = async (): Promise<number> => {
    const reply = await client.xread('COUNT', READ_BATCH, 'STREAMS', key, lastId);
    if (reply === null) return 0;
    let n = 0;
    for (const [, entries] of reply) {
      for (const [id, fields] of entries) {
        lastId = id;
        const at = fields.indexOf('e');
        const entry = at >= 0 ? fields[at + 1] : undefined;
        if (entry !== undefined) deliver(entry);
        n += 1;
      }
    }
    return n;
  };

  /** Reads everything new (one reader at a time; a request while reading reads again after). */
  const read = (): Promise<void> => {
    if (reading !== undefined) {
      again = true;
      return reading;
    }
    const drain = async (): Promise<void> => {
      do {
        again = false;
        if (closed || client.status !== 'ready') break;
        try {
          for (let i = 0; i < MAX_READS_PER_POLL; i++) if ((await readOnce()) < READ_BATCH) break;
        } catch (err) {
          options.onError?.(err);
          break;
        }
      } while (again);
    };
    // Cleared asynchronously: a drain that returns without awaiting must not leave a settled `reading`.
    reading = drain().finally(() => {
      reading = undefined;
    });
    return reading;
  };

  const timer = setInterval(() => void read(), pollMs);
  timer.unref();

  return {
    kind: 'redis',
    async append(entry) {
      if (closed) return;
      try {
        if (client.status !== 'ready') throw new Error(`redis ${client.status}`);
        await client.xadd(key, 'MAXLEN', '~', maxEntries, '*', 'e', entry);
      } catch (err) {
        options.onError?.(err);
        deliver(entry);
        return;
      }
      await read();
    },
    subscribe(listener) {
      listeners.push(listener);
    },
    async shareReference(name, value) {
      try {
        if (closed || client.status !== 'ready') throw new Error(`redis ${client.status}`);
        const key = `${options.prefix}canary-reference:${name}`;
        await client.set(key, value, 'NX');
        return (await client.get(key)) ?? undefined;
      } catch (err) {
        options.onError?.(err);
        return undefined;
      }
    },
    async readReference(name) {
      try {
        // A process just started: wait (bounded) for the connection instead of reading nothing.
        for (let i = 0; i < 40 && !closed && client.status !== 'ready'; i++) {
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        if (closed || client.status !== 'ready') throw new Error(`redis ${client.status}`);
        return (await client.get(`${options.prefix}canary-reference:${name}`)) ?? undefined;
      } catch (err) {
        options.onError?.(err);
        return undefined;
      }
    },
    async close() {
      closed = true;
      clearInterval(timer);
      await reading;
      client.disconnect();
    },
  };
}
