/**
 * The RPM/TPM token buckets on Redis (`BucketStore` of `redis.ts`): one hash per bucket
 * (`<prefix>b:<name>`, its level and time), taken and refunded together by one script on the Redis
 * server's clock, so replicas' clocks do not matter and a take of several buckets is all or nothing.
 *
 * Failure semantics: while Redis is unusable (or the script fails, which degrades the state), the local
 * buckets answer at this process's share of each limit: the limit over the last known peer count, so the
 * fleet together stays within it during an outage.
 */
import { script, type RedisConnection } from './redis-connection.js';
import type { BucketReservation, BucketSpec, BucketStore } from './types.js';

/**
 * KEYS: buckets. ARGV: max wait ms, 'take' | 'refund', then capacity, per-ms rate, cost for each bucket.
 * → {taken 0|1, wait ms as string}.
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

export function createRedisBuckets(conn: RedisConnection, local: BucketStore): BucketStore {
  const { prefix } = conn;
  /** This process's share of each limit while Redis is out: the limit over the last known peer count. */
  const share = (buckets: readonly BucketSpec[]): BucketSpec[] =>
    buckets.map((b) => ({
      name: b.name,
      capacity: Math.max(1, b.capacity / conn.peers()),
      perMs: b.perMs / conn.peers(),
      cost: b.cost,
    }));
  const keysOf = (buckets: readonly BucketSpec[]): string[] => buckets.map((b) => `${prefix}b:${b.name}`);
  const argsOf = (buckets: readonly BucketSpec[]): number[] =>
    buckets.flatMap((b) => [b.capacity, b.perMs, b.cost]);

  return {
    take(specs, maxWaitMs): Promise<BucketReservation> {
      const wait = Number.isFinite(maxWaitMs) ? maxWaitMs : Number.MAX_SAFE_INTEGER;
      return conn.guarded(
        'buckets',
        async () => {
          const reply = await conn.run(BUCKETS, keysOf(specs), [wait, 'take', ...argsOf(specs)]);
          if (!Array.isArray(reply)) throw new Error('unexpected bucket reply');
          const taken: unknown = reply[0];
          const waitMs: unknown = reply[1];
          return { taken: taken === 1, waitMs: Number(waitMs) };
        },
        () => local.take(share(specs), maxWaitMs),
      );
    },
    async refund(specs) {
      if (!conn.usable()) return local.refund(share(specs));
      try {
        await conn.run(BUCKETS, keysOf(specs), [0, 'refund', ...argsOf(specs)]);
      } catch (err) {
        conn.failed('buckets', err);
      }
    },
  };
}
