/**
 * `POST /v1/cancel` across every process sharing one Redis (replicas, and the workers of each): the
 * `CancelBus` of `redis.ts`.
 *
 * A cancel is published on the channel `<prefix>cancel` and, in the same script, kept in the sorted set
 * `<prefix>cancels` until its tombstone expires (scored by expiry on the Redis server's clock, so replicas'
 * clocks do not matter). Every process subscribes to the channel: it applies each cancel it receives to its
 * own live requests (which also tombstones the ids and tag locally for the remaining time) and answers with
 * its counts on the publisher's reply channel `<prefix>cancel-reply:<holder>`. The publisher waits for as
 * many answers as PUBLISH reported receivers (less itself), at most REPLY_TIMEOUT_MS, and sums them.
 *
 * The sorted set is for a process that missed the message: one that starts after the cancel, or whose
 * subscription was down (a reconnect). Once a second while it is behind (at start, after its subscription
 * or its Redis connection was lost) it reads the live entries and applies those it has not seen.
 *
 * Failure semantics, as everywhere in `state/`: a Redis outage never fails a cancel. `publish` answers
 * `shared: false` at once while Redis is unusable (or when the script fails, which degrades the state), and
 * the caller's local cancel stands. Messages are a boundary: anything that does not parse is ignored.
 */
import { randomUUID } from 'node:crypto';

import type { Redis } from 'ioredis';

import { evictOldest } from './bounded.js';
import type { CancelBroadcast, CancelBus, CancelCounts, CancelMessage, StateOp } from './types.js';

/** How long a publisher waits for the other processes' answers; a process that is later counts 0. */
export const REPLY_TIMEOUT_MS = 2000;
/** How often a process that may have missed cancels reads the sorted set. */
const CATCH_UP_MS = 1000;
/**
 * Cancels kept in the sorted set at most (oldest dropped first), and the largest one kept there: a cancel
 * of more ids (about 1 200 of 200 characters, 6 000 UUIDs) is still published to the processes connected
 * now, but not kept for those that connect later. Bounds the set to 64 MiB whatever the cancels.
 */
const MAX_KEPT = 256;
const MAX_KEPT_CHARS = 262_144;
/** Message ids remembered as seen. */
const MAX_SEEN = 10_000;
/** A message larger than this is not applied (10 000 ids of 200 characters fit). */
const MAX_MESSAGE_CHARS = 4_000_000;

/**
 * KEYS: sorted set. ARGV: message, tombstone ms, channel, max kept, '1' to keep it. Keeps the message until
 * its tombstone expires (server clock), trims the set, publishes; → the number of subscribers that got it.
 */
const PUBLISH = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
if ARGV[5] == '1' then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
  local n = redis.call('ZCARD', KEYS[1])
  local max = tonumber(ARGV[4])
  if n > max then redis.call('ZREMRANGEBYRANK', KEYS[1], 0, n - max - 1) end
  if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
end
return redis.call('PUBLISH', ARGV[3], ARGV[1])
`;

/** KEYS: sorted set. → {message, ms left, message, ms left, ...} for the cancels still in force. */
const RECENT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local r = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES')
local out = {}
for i = 1, #r, 2 do
  out[#out + 1] = r[i]
  out[#out + 1] = tostring(math.floor(tonumber(r[i + 1]) - now))
end
return out
`;

export interface RedisCancelsDeps {
  client: Redis;
  sub: Redis;
  prefix: string;
  /** This process's identity (its reply channel); its own messages are not applied twice. */
  holder: string;
  /** Redis is connected and not degraded. */
  usable: () => boolean;
  /** A command failed: count it and degrade. */
  failed: (op: StateOp, err: unknown) => void;
  /** Registers a listener on the shared subscriber connection (`redis.ts`). */
  listen: (channel: string, listener: (message: string) => void) => Promise<() => void>;
  now: () => number;
}

interface Wire {
  id: string;
  origin: string;
  ttl: number;
  ids?: string[];
  tag?: string;
  /** The cancelling tenant (REWARD_KEYS): every process cancels that tenant's requests only. */
  tenant?: string;
}

const isStrings = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string');

/** A published cancel, or undefined for anything malformed. */
function decode(text: string): Wire | undefined {
  if (text.length > MAX_MESSAGE_CHARS) return undefined;
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (v === null || typeof v !== 'object') return undefined;
  const id: unknown = Reflect.get(v, 'id');
  const origin: unknown = Reflect.get(v, 'origin');
  const ttl: unknown = Reflect.get(v, 'ttl');
  const ids: unknown = Reflect.get(v, 'ids');
  const tag: unknown = Reflect.get(v, 'tag');
  const tenant: unknown = Reflect.get(v, 'tenant');
  if (typeof id !== 'string' || typeof origin !== 'string') return undefined;
  if (tenant !== undefined && typeof tenant !== 'string') return undefined;
  if (typeof ttl !== 'number' || !Number.isFinite(ttl) || ttl <= 0) return undefined;
  if (ids !== undefined && !isStrings(ids)) return undefined;
  if (tag !== undefined && typeof tag !== 'string') return undefined;
  if (ids === undefined && tag === undefined) return undefined;
  return {
    id,
    origin,
    ttl,
    ...(ids === undefined ? {} : { ids }),
    ...(tag === undefined ? {} : { tag }),
    ...(tenant === undefined ? {} : { tenant }),
  };
}

const count = (v: unknown): number =>
  typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= 1e9 ? v : 0;

interface Waiting {
  sum: CancelCounts;
  answered: number;
  /** Answers to wait for; unknown until PUBLISH returns. */
  expected: number | undefined;
  finish(): void;
}

export interface RedisCancels extends CancelBus {
  close(): void;
}

export function createRedisCancels(deps: RedisCancelsDeps): RedisCancels {
  const { client, sub, prefix, holder, usable, failed, listen, now } = deps;
  const channel = `${prefix}cancel`;
  const replyChannel = `${prefix}cancel-reply:${holder}`;
  const setKey = `${prefix}cancels`;
  let apply: ((cancel: CancelMessage, tombstoneMs: number) => CancelCounts) | undefined;
  /** Message id → when it may be forgotten (epoch ms). */
  const seen = new Map<string, number>();
  const waiting = new Map<string, Waiting>();
  let behind = true;
  let closed = false;

  const firstSight = (w: Wire, tombstoneMs: number): boolean => {
    const until = seen.get(w.id);
    if (until !== undefined && until > now()) return false;
    seen.set(w.id, now() + tombstoneMs);
    evictOldest(seen, MAX_SEEN);
    return true;
  };

  const run = (w: Wire, tombstoneMs: number): CancelCounts | undefined => {
    if (apply === undefined || w.origin === holder || !firstSight(w, tombstoneMs)) return undefined;
    return apply({ requestIds: w.ids, tag: w.tag, tenant: w.tenant }, tombstoneMs);
  };

  const onCancel = (text: string): void => {
    const w = decode(text);
    if (w === undefined) return;
    const counts = run(w, w.ttl);
    if (counts === undefined || !usable()) return;
    const answer = JSON.stringify({ id: w.id, ...counts });
    client
      .publish(`${prefix}cancel-reply:${w.origin}`, answer)
      .catch((err: unknown) => failed('cancels', err));
  };

  const onReply = (text: string): void => {
    let v: unknown;
    try {
      v = JSON.parse(text);
    } catch {
      return;
    }
    if (v === null || typeof v !== 'object') return;
    const id: unknown = Reflect.get(v, 'id');
    const w = typeof id === 'string' ? waiting.get(id) : undefined;
    if (w === undefined) return;
    w.sum.judgments += count(Reflect.get(v, 'judgments'));
    w.sum.requests += count(Reflect.get(v, 'requests'));
    w.answered += 1;
    if (w.expected !== undefined && w.answered >= w.expected) w.finish();
  };

  void listen(channel, onCancel);
  void listen(replyChannel, onReply);
  // A subscription that failed (not connected yet) is not retried by ioredis: subscribe again on every
  // (re)connect. A lost connection may have lost messages: catch up from the sorted set.
  sub.on('ready', () => {
    sub.subscribe(channel, replyChannel).catch(() => undefined);
  });
  sub.on('close', () => {
    behind = true;
  });

  const catchUp = async (): Promise<void> => {
    if (apply === undefined) return;
    if (!usable() || sub.status !== 'ready') {
      behind = true;
      return;
    }
    if (!behind) return;
    try {
      const reply: unknown = await client.eval(RECENT, 1, setKey);
      if (!Array.isArray(reply)) throw new Error('unexpected cancels reply');
      behind = false;
      for (let i = 0; i + 1 < reply.length; i += 2) {
        const text: unknown = reply[i];
        const left = Number(reply[i + 1]);
        const w = typeof text === 'string' ? decode(text) : undefined;
        if (w !== undefined && left > 0) run(w, left);
      }
    } catch (err) {
      failed('cancels', err);
    }
  };
  const timer = setInterval(() => void catchUp(), CATCH_UP_MS);
  timer.unref();

  const none = (): CancelBroadcast => ({ judgments: 0, requests: 0, processes: 0, shared: false });

  return {
    serve(fn) {
      apply = fn;
      void catchUp();
    },
    async publish(cancel, tombstoneMs) {
      if (closed || !usable()) return none();
      const id = randomUUID();
      const wire: Wire = { id, origin: holder, ttl: Math.max(1, Math.floor(tombstoneMs)) };
      if (cancel.requestIds !== undefined) wire.ids = [...cancel.requestIds];
      if (cancel.tag !== undefined) wire.tag = cancel.tag;
      if (cancel.tenant !== undefined) wire.tenant = cancel.tenant;
      const text = JSON.stringify(wire);
      seen.set(id, now() + wire.ttl);
      evictOldest(seen, MAX_SEEN);
      // Registered before publishing: an answer can arrive before PUBLISH's own reply does.
      let resolveDone: () => void = () => undefined;
      const done = new Promise<void>((resolve) => {
        resolveDone = resolve;
      });
      const w: Waiting = {
        sum: { judgments: 0, requests: 0 },
        answered: 0,
        expected: undefined,
        finish: () => resolveDone(),
      };
      waiting.set(id, w);
      const timeout = setTimeout(() => w.finish(), REPLY_TIMEOUT_MS);
      try {
        const keep = text.length <= MAX_KEPT_CHARS ? '1' : '0';
        const receivers = Number(
          await client.eval(PUBLISH, 1, setKey, text, wire.ttl, channel, MAX_KEPT, keep),
        );
        // PUBLISH counts this process's own subscription too.
        w.expected = Math.max(0, receivers - 1);
        if (w.answered >= w.expected) w.finish();
        await done;
        return { ...w.sum, processes: w.answered, shared: true };
      } catch (err) {
        failed('cancels', err);
        return none();
      } finally {
        clearTimeout(timeout);
        waiting.delete(id);
      }
    },
    close() {
      closed = true;
      clearInterval(timer);
      for (const w of waiting.values()) w.finish();
    },
  };
}
