/**
 * The shared-state contract, run against both implementations: local (one process) and Redis (a real
 * redis-server on loopback). Then what only Redis does: two processes' worth of clients share leases,
 * buckets and records; a crashed holder's lease expires; an outage degrades to local state and recovers.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { RewardError } from '../../src/errors.js';
import { createLocalState } from '../../src/state/local.js';
import { createRedisState, redactRedisUrl, type RedisState } from '../../src/state/redis.js';
import type { BucketSpec, SharedState } from '../../src/state/types.js';
import { describeRedis, startRedis, type RedisServer } from '../fakes/redis.js';

const opts = (ms = 2000) => ({ signal: new AbortController().signal, deadline: Date.now() + ms });
const rpm = (perMinute: number, name = 'b1'): BucketSpec => ({
  name,
  capacity: Math.max(1, perMinute / 60),
  perMs: perMinute / 60_000,
  cost: 1,
});

async function waitUntil(check: () => boolean | Promise<boolean>, what: string, ms = 5000): Promise<void> {
  const until = Date.now() + ms;
  for (let i = 0; i < 10_000; i++) {
    if (await check()) return;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** The same behaviour from both implementations. */
function contract(name: string, make: () => Promise<SharedState>): void {
  describe(`${name} state`, () => {
    let state: SharedState;
    beforeAll(async () => {
      state = await make();
    });
    afterAll(async () => state.close());

    it('grants a lease, makes a second caller wait, and hands it the outcome', async () => {
      const first = await state.leases.acquire(`k-${name}-1`, opts());
      expect(first.kind).toBe('acquired');
      const second = state.leases.acquire(`k-${name}-1`, opts());
      await new Promise((r) => setTimeout(r, 50));
      if (first.kind !== 'acquired') throw new Error('unreachable');
      await first.lease.complete('{"v":1}', undefined);
      expect(await second).toEqual({ kind: 'landed', value: '{"v":1}', waited: true });
    });

    it('passes an abandoned lease to a waiter', async () => {
      const first = await state.leases.acquire(`k-${name}-2`, opts());
      const second = state.leases.acquire(`k-${name}-2`, opts());
      await new Promise((r) => setTimeout(r, 50));
      if (first.kind !== 'acquired') throw new Error('unreachable');
      await first.lease.abandon();
      const outcome = await second;
      expect(outcome.kind).toBe('acquired');
      if (outcome.kind === 'acquired') await outcome.lease.abandon();
    });

    it('times a waiter out at its deadline with RW_JUDGE_TIMEOUT, and aborts one on its signal', async () => {
      const first = await state.leases.acquire(`k-${name}-3`, opts());
      const late = state.leases.acquire(`k-${name}-3`, opts(150));
      await expect(late).rejects.toSatisfy((e) => e instanceof RewardError && e.code === 'RW_JUDGE_TIMEOUT');
      const controller = new AbortController();
      const aborted = state.leases.acquire(`k-${name}-3`, {
        signal: controller.signal,
        deadline: Date.now() + 5000,
      });
      setTimeout(() => controller.abort(new Error('client gone')), 30);
      await expect(aborted).rejects.toThrow('client gone');
      if (first.kind === 'acquired') await first.lease.abandon();
    });

    it('token bucket: a burst of the capacity, then waits in arrival order at the refill rate', async () => {
      const spec = rpm(600, `burst-${name}`); // 10 per second, burst 10
      const waits: number[] = [];
      for (let i = 0; i < 13; i++) {
        const r = await state.buckets.take([spec], 60_000);
        expect(r.taken).toBe(true);
        waits.push(r.waitMs);
      }
      expect(waits.slice(0, 10).every((w) => w < 5)).toBe(true);
      // 11th..13th wait ~100, ~200, ~300 ms (minus the time the loop took).
      expect(waits[10]).toBeGreaterThan(40);
      expect(waits[12]).toBeGreaterThan(waits[10]! + 100);
      expect(waits[12]).toBeLessThanOrEqual(301);
    });

    it('token bucket: refuses a reservation past maxWaitMs and takes nothing; refund gives back', async () => {
      const spec = rpm(60, `refuse-${name}`); // 1 per second, burst 1
      expect((await state.buckets.take([spec], 10)).taken).toBe(true);
      const refused = await state.buckets.take([spec], 10);
      expect(refused.taken).toBe(false);
      expect(refused.waitMs).toBeGreaterThan(500);
      await state.buckets.refund([spec]);
      expect((await state.buckets.take([spec], 10)).taken).toBe(true);
    });

    it('reserves several buckets together or none (RPM and TPM)', async () => {
      const req = rpm(6000, `multi-r-${name}`);
      const tok: BucketSpec = { name: `multi-t-${name}`, capacity: 100, perMs: 0.001, cost: 80 };
      expect((await state.buckets.take([req, tok], 10)).taken).toBe(true);
      // The token bucket has 20 left: 80 more needs ~60 s, so nothing is taken from either bucket.
      expect((await state.buckets.take([req, tok], 10)).taken).toBe(false);
      const small = { ...tok, cost: 10 };
      expect((await state.buckets.take([req, small], 10)).taken).toBe(true);
    });

    it('idempotency: the first claim creates the record, later ones read it; put replaces it', async () => {
      const id = `request:${name}-1`;
      expect(await state.idempotency.claim(id, 'running', 5000)).toBeUndefined();
      expect(await state.idempotency.claim(id, 'other', 5000)).toBe('running');
      await state.idempotency.put(id, 'done', 5000);
      expect(await state.idempotency.get(id)).toBe('done');
      expect(await state.idempotency.get(`request:${name}-absent`)).toBeUndefined();
    });

    it('idempotency: a record expires after its TTL', async () => {
      const id = `rollout:${name}-ttl`;
      await state.idempotency.claim(id, 'x', 60);
      await new Promise((r) => setTimeout(r, 120));
      expect(await state.idempotency.get(id)).toBeUndefined();
    });

    it('token budget: adds to one counter per window and reads its total; windows are separate', async () => {
      const budget = state.budget;
      if (budget === undefined) throw new Error(`${name} state has no budget store`);
      const w = `${name}-${Date.now()}`;
      expect(await budget.get(`${w}:1`)).toBe(0);
      expect(await budget.add(`${w}:1`, 120, 60_000)).toBe(120);
      expect(await budget.add(`${w}:1`, 30, 60_000)).toBe(150);
      expect(await budget.get(`${w}:1`)).toBe(150);
      expect(await budget.add(`${w}:2`, 7, 60_000)).toBe(7);
    });
  });
}

contract('local', () => Promise.resolve(createLocalState()));

describeRedis('redis-backed shared state', () => {
  let redis: RedisServer;
  const opened: RedisState[] = [];
  const open = async (leaseMs = 1000, prefix = 'test:'): Promise<RedisState> => {
    const s = createRedisState({ url: redis.url, prefix, leaseMs, timeoutMs: 250 });
    opened.push(s);
    expect(await s.connected(5000)).toBe(true);
    return s;
  };
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterEach(async () => {
    for (const s of opened.splice(0)) await s.close();
  });
  afterAll(async () => redis.stop());

  contract('redis', () => open(1000, 'contract:'));

  it('two clients (two replicas) share a lease: B waits for A and receives its outcome', async () => {
    const a = await open();
    const b = await open();
    const held = await a.leases.acquire('shared-1', opts());
    expect(held.kind).toBe('acquired');
    const waiting = b.leases.acquire('shared-1', opts());
    await new Promise((r) => setTimeout(r, 100));
    if (held.kind === 'acquired') await held.lease.complete('{"answer":42}', 10_000);
    expect(await waiting).toEqual({ kind: 'landed', value: '{"answer":42}', waited: true });
    // Stored: a later caller on B lands at once, and the judgment store reads it.
    expect(await b.leases.acquire('shared-1', opts())).toEqual({
      kind: 'landed',
      value: '{"answer":42}',
      waited: false,
    });
    expect(await b.judgments?.getMany(['shared-1', 'absent'])).toEqual(['{"answer":42}', undefined]);
  });

  it('publishes a failure to waiters without storing it', async () => {
    const a = await open();
    const b = await open();
    const held = await a.leases.acquire('shared-fail', opts());
    const waiting = b.leases.acquire('shared-fail', opts());
    await new Promise((r) => setTimeout(r, 100));
    if (held.kind === 'acquired') await held.lease.complete('{"failed":true}', undefined);
    expect(await waiting).toEqual({ kind: 'landed', value: '{"failed":true}', waited: true });
    const next = await b.leases.acquire('shared-fail', opts());
    expect(next.kind).toBe('acquired');
    if (next.kind === 'acquired') await next.lease.abandon();
  });

  it("a crashed holder's lease expires and a waiter takes over (leaseMs 300)", async () => {
    const a = await open(300);
    const b = await open(300);
    const held = await a.leases.acquire('crash-1', opts());
    expect(held.kind).toBe('acquired');
    // Simulate the crash: A stops renewing (its connection dies) without releasing.
    await a.close();
    opened.splice(opened.indexOf(a), 1);
    const started = Date.now();
    const outcome = await b.leases.acquire('crash-1', opts(5000));
    expect(outcome.kind).toBe('acquired');
    expect(Date.now() - started).toBeLessThan(2000);
    if (outcome.kind === 'acquired') await outcome.lease.abandon();
  });

  it('a holder that keeps running keeps its lease past leaseMs (renewal)', async () => {
    const a = await open(200);
    const b = await open(200);
    const held = await a.leases.acquire('renew-1', opts());
    const waiting = b.leases.acquire('renew-1', opts(3000));
    await new Promise((r) => setTimeout(r, 700));
    if (held.kind === 'acquired') await held.lease.complete('"late"', 5000);
    expect(await waiting).toEqual({ kind: 'landed', value: '"late"', waited: true });
  });

  it('two clients share one token bucket: together they get the rate once, not twice', async () => {
    const a = await open();
    const b = await open();
    const spec = rpm(600, 'shared-bucket'); // 10/s, burst 10
    let immediate = 0;
    for (let i = 0; i < 10; i++) {
      for (const s of [a, b]) {
        const r = await s.buckets.take([spec], 0);
        if (r.taken) immediate += 1;
      }
    }
    // A private bucket each would give 20; shared, the burst of 10 (+1 refilled while the loop ran).
    expect(immediate).toBeGreaterThanOrEqual(10);
    expect(immediate).toBeLessThanOrEqual(11);
  });

  it('sees which keys another process is computing: its lease, not one of its own, until it lands', async () => {
    const a = await open();
    const b = await open();
    const held = await a.leases.acquire('seen-1', opts());
    expect(held.kind).toBe('acquired');
    expect(await b.leases.heldElsewhere(['seen-1', 'seen-2'])).toEqual([true, false]);
    expect(await a.leases.heldElsewhere(['seen-1'])).toEqual([false]);
    if (held.kind === 'acquired') await held.lease.complete('"v"', 5000);
    expect(await b.leases.heldElsewhere(['seen-1'])).toEqual([false]);
    expect(await createLocalState().leases.heldElsewhere(['seen-1'])).toEqual([false]);
  });

  it('idempotency records are shared', async () => {
    const a = await open();
    const b = await open();
    expect(await a.idempotency.claim('request:r-1', 'A', 5000)).toBeUndefined();
    expect(await b.idempotency.claim('request:r-1', 'B', 5000)).toBe('A');
  });

  it('Redis killed: degraded, keeps answering locally; restarted: recovers and flushes what it kept', async () => {
    const degradedSeen: boolean[] = [];
    const s = createRedisState({
      url: redis.url,
      prefix: 'outage:',
      leaseMs: 1000,
      timeoutMs: 250,
      observer: { onDegraded: (d) => degradedSeen.push(d) },
    });
    opened.push(s);
    expect(await s.connected(5000)).toBe(true);
    await redis.kill();
    await waitUntil(() => s.status().degraded, 'degraded');
    // Everything still answers, from local state.
    const lease = await s.leases.acquire('during-outage', opts());
    expect(lease.kind).toBe('acquired');
    if (lease.kind === 'acquired') await lease.lease.complete('"kept"', 60_000);
    expect((await s.buckets.take([rpm(600, 'outage-b')], 0)).taken).toBe(true);
    expect(await s.idempotency.claim('request:outage', 'x', 60_000)).toBeUndefined();
    // Nothing is known to run elsewhere: every key is admitted as new work (the safe side).
    expect(await s.leases.heldElsewhere(['during-outage', 'other'])).toEqual([false, false]);
    await s.judgments?.set('direct', '"also kept"', 60_000);
    expect(await s.judgments?.getMany(['direct'])).toEqual([undefined]);

    await redis.restart();
    await waitUntil(() => !s.status().degraded, 'recovery', 8000);
    await waitUntil(
      async () =>
        (await s.judgments?.getMany(['during-outage', 'direct']))?.every((v) => v !== undefined) ?? false,
      'the flush',
    );
    expect(await s.judgments?.getMany(['during-outage', 'direct'])).toEqual(['"kept"', '"also kept"']);
    expect(await s.idempotency.get('request:outage')).toBe('x');
    expect(degradedSeen).toEqual([true, false, true, false]);
  });

  it('a hung Redis (SIGSTOP) costs at most the command timeout, then local state answers', async () => {
    const s = await open(1000, 'hung:');
    redis.pause();
    try {
      const started = Date.now();
      const lease = await s.leases.acquire('hung-1', opts());
      expect(lease.kind).toBe('acquired');
      expect(Date.now() - started).toBeLessThan(1000);
      expect(s.status().degraded).toBe(true);
      // Once degraded, no command waits on Redis at all.
      const again = Date.now();
      expect((await s.buckets.take([rpm(600, 'hung-b')], 0)).taken).toBe(true);
      expect(Date.now() - again).toBeLessThan(50);
    } finally {
      redis.resume();
    }
    await waitUntil(() => !s.status().degraded, 'recovery after SIGCONT', 8000);
  });

  it('redacts the password in the reported URL', () => {
    expect(redactRedisUrl('redis://user:secret@10.0.0.1:6379/0')).toBe('redis://user:***@10.0.0.1:6379/0');
    expect(redactRedisUrl('redis://127.0.0.1:6379')).toBe('redis://127.0.0.1:6379');
  });
});
