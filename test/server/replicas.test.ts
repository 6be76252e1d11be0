/**
 * Two replicas sharing a real Redis (redis-server on a loopback port): each is a whole app with its own
 * router, metrics and Redis connections, both in front of one fake judge backend that counts calls.
 * Cross-replica cache hits, cross-replica coalescing, one shared RPM bucket, and Redis killed mid-load.
 */
import type { FastifyInstance } from 'fastify';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';

import { loadConfig } from '../../src/config.js';
import { createOfflineBackend } from '../../src/judge/backends/offline.js';
import { getPreset } from '../../src/judge/presets.js';
import { createRouter } from '../../src/judge/routing.js';
import { judgmentKey, keySettingsOf } from '../../src/judge/key.js';
import type { Router } from '../../src/judge/types.js';
import { buildApp } from '../../src/server/http/app.js';
import { createMetrics } from '../../src/server/observe/metrics.js';
import type { Metrics } from '../../src/server/observe/metric-types.js';
import { createLocalState } from '../../src/state/local.js';
import { createRedisState } from '../../src/state/redis.js';
import type { SharedState } from '../../src/state/types.js';
import { startFakeOpenAI, type FakeOpenAI } from '../fakes/openai.js';
import { describeRedis, startRedis, type RedisServer } from '../fakes/redis.js';
import { candidate, counterValue, GROUND_TRUTH, markerJudge, QUESTION, waitFor } from './helpers.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- response bodies are checked field by field
type Json = any;

interface Replica {
  app: FastifyInstance;
  metrics: Metrics;
  state: SharedState;
  router: Router;
}

const group = (candidates: string[]) => ({ question: QUESTION, ground_truth: GROUND_TRUTH, candidates });

describeRedis('two replicas sharing Redis', () => {
  let redis: RedisServer;
  let fake: FakeOpenAI;
  let replicas: Replica[] = [];
  let prefixSeq = 0;

  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => redis.stop());
  afterEach(async () => {
    for (const r of replicas) {
      await r.app.close();
      await Promise.all(r.router.backends().map(async (b) => b.close?.()));
      await r.state.close();
    }
    replicas = [];
    await fake.close();
  });

  /** Replicas with one fresh key namespace per test (so tests do not see each other's judgments). */
  async function start(
    n: number,
    env: Record<string, string> = {},
    options: { redis?: boolean; latencyMs?: number; perReplica?: Array<Record<string, string>> } = {},
  ): Promise<Replica[]> {
    fake = await startFakeOpenAI({ fallback: markerJudge, latencyMs: options.latencyMs ?? 20 });
    const prefix = `t${++prefixSeq}:`;
    for (let i = 0; i < n; i++) {
      const config = loadConfig({
        JUDGE_BASE_URL: fake.baseURL,
        JUDGE_MODEL: 'fake-model',
        JUDGE_MAX_RETRIES: '0',
        ...(options.redis === false ? {} : { REDIS_URL: redis.url, REDIS_PREFIX: prefix }),
        REDIS_LEASE_MS: '2000',
        ...env,
        ...options.perReplica?.[i],
      });
      const metrics = createMetrics();
      const state =
        config.redis === undefined
          ? createLocalState()
          : createRedisState({ ...config.redis, observer: metrics.stateObserver });
      if ('connected' in state && typeof state.connected === 'function') {
        expect(await state.connected(5000)).toBe(true);
      }
      const router = createRouter({ ...config.judge, offline: createOfflineBackend, buckets: state.buckets });
      replicas.push({ app: buildApp({ config, router, metrics, state }), metrics, state, router });
    }
    return replicas;
  }

  const reward = (r: Replica, body: object) =>
    r.app.inject({ method: 'POST', url: '/v1/reward', payload: body });

  it('a group judged on A costs 0 backend calls on B: all cached, same judgment ids', async () => {
    const [a, b] = await start(2);
    const body = group(Array.from({ length: 8 }, (_, i) => candidate(i)));
    const first = (await reward(a!, body)).json<Json>();
    expect(first.results.every((r: Json) => r.cached === false && r.status === 'ok')).toBe(true);
    expect(fake.callCount).toBe(24);

    const res = await reward(b!, body);
    expect(res.statusCode).toBe(200);
    const second = res.json<Json>();
    expect(fake.callCount).toBe(24);
    expect(second.rewards).toEqual(first.rewards);
    expect(second.results.every((r: Json) => r.cached === true)).toBe(true);
    expect(second.results.map((r: Json) => r.judgment_id)).toEqual(
      first.results.map((r: Json) => r.judgment_id),
    );
    expect(second.usage.calls).toBe(0);
    // A shared hit (or, if A's write raced B's lookup, handed over through the lease): never computed.
    const shared =
      (await counterValue(b!.metrics.cacheLookups, { result: 'shared_hit' })) +
      (await counterValue(b!.metrics.cacheLookups, { result: 'shared_coalesced' }));
    expect(shared).toBe(8);
    expect(await counterValue(b!.metrics.judgments)).toBe(0);
  });

  it('16 concurrent identical requests split across A and B make one judgment’s calls', async () => {
    const [a, b] = await start(2, {}, { latencyMs: 200 });
    const body = group([candidate(0)]);
    const answers = await Promise.all(
      Array.from({ length: 16 }, (_, i) => reward(i % 2 === 0 ? a! : b!, body)),
    );
    expect(fake.callCount).toBe(3);
    const results = answers.map((res) => res.json<Json>().results[0]);
    expect(results.every((r: Json) => r.status === 'ok' && r.reward === 1)).toBe(true);
    expect(new Set(results.map((r: Json) => r.judgment_id)).size).toBe(1);
    expect(results.filter((r: Json) => r.cached === false)).toHaveLength(1);
    const computed = (await counterValue(a!.metrics.judgments)) + (await counterValue(b!.metrics.judgments));
    expect(computed).toBe(1);
    // The replica that lost the race received the outcome through the lease, holding no run slot.
    const landed =
      (await counterValue(a!.metrics.cacheLookups, { result: 'shared_coalesced' })) +
      (await counterValue(b!.metrics.cacheLookups, { result: 'shared_coalesced' }));
    expect(landed).toBe(1);
  });

  it('a retry landing on a full B while A computes is not refused: B waits for A’s judgments', async () => {
    // B admits one judgment at once and queues none: any new work is refused while it is busy.
    const [a, b] = await start(
      2,
      {},
      { latencyMs: 1000, perReplica: [{}, { MAX_CONCURRENT_JUDGMENTS: '1', MAX_QUEUED_JUDGMENTS: '0' }] },
    );
    const body = { ...group([candidate(70), candidate(71)]), request_id: 'step-3-rollouts-70' };
    const onA = reward(a!, body);
    await waitFor(() => fake.inflight() === 4, 'A’s two judgments to call the backend (leases held)');
    const busy = reward(b!, group([candidate(80)]));
    await waitFor(() => fake.inflight() === 6, 'B’s one slot to be busy');
    // Control: B is full, new work is refused.
    const refused = await reward(b!, group([candidate(81)]));
    expect(refused.statusCode).toBe(503);
    expect(refused.json<Json>().code).toBe('RW_OVERLOADED');

    // The same request retried on B (as when its connection to A timed out), a 2-item request B alone
    // could not even admit.
    const retry = await reward(b!, body);
    expect(retry.statusCode).toBe(200);
    const fromB = retry.json<Json>();
    const fromA = (await onA).json<Json>();
    expect(fromA.results.every((r: Json) => r.status === 'ok' && r.cached === false)).toBe(true);
    expect(fromB.rewards).toEqual(fromA.rewards);
    expect(fromB.results.every((r: Json) => r.cached === true)).toBe(true);
    expect(fromB.results.map((r: Json) => r.judgment_id)).toEqual(
      fromA.results.map((r: Json) => r.judgment_id),
    );
    expect((await busy).statusCode).toBe(200);
    // A's 2 judgments and B's busy one: the retry cost no call, and B received A's outcomes by lease.
    expect(fake.callCount).toBe(9);
    expect(await counterValue(b!.metrics.cacheLookups, { result: 'shared_coalesced' })).toBe(2);
    expect(await counterValue(b!.metrics.admissionRefusals, { reason: 'memory' })).toBe(1);
  });

  it('a GRPO step of 256 slime rollouts retried wholesale on a small B while A computes: 0 refused, 0 recomputed', async () => {
    // Two replicas in one process on a loaded machine: a Redis command timed out by event-loop lag degrades
    // B, which then sees no lease held elsewhere and admits all 256 on its 4 slots as new work (the Redis
    // outage test's case, not this one's); a lease lost to lag is a takeover (the next test's case).
    const [a, b] = await start(
      2,
      { JUDGE_MAX_INFLIGHT: '1024', REDIS_LEASE_MS: '15000', REDIS_TIMEOUT_MS: '10000' },
      { latencyMs: 500, perReplica: [{}, { MAX_CONCURRENT_JUDGMENTS: '4', MAX_QUEUED_JUDGMENTS: '0' }] },
    );
    const n = 256;
    const rollout = (i: number) => ({
      prompt: QUESTION,
      response: candidate(2000 + i),
      label: GROUND_TRUTH,
      rollout_id: `step-9/${i}`,
    });
    const slime = (r: Replica, i: number) =>
      r.app.inject({ method: 'POST', url: '/slime', payload: rollout(i) });
    const onA = Array.from({ length: n }, (_, i) => slime(a!, i));
    const keys = Array.from({ length: n }, (_, i) =>
      judgmentKey(
        getPreset('default')!,
        { question: QUESTION, candidate: candidate(2000 + i), groundTruth: GROUND_TRUTH },
        b!.router,
        keySettingsOf({}),
      ),
    );
    await waitFor(
      async () => (await b!.state.leases.heldElsewhere(keys)).every(Boolean),
      'A to hold all 256 leases',
      10_000,
    );
    const onB = await Promise.all(Array.from({ length: n }, (_, i) => slime(b!, i)));
    const fromA = await Promise.all(onA);
    expect(onB.map((res) => res.statusCode)).toEqual(Array.from({ length: n }, () => 200));
    expect(onB.map((res) => res.json<Json>().reward)).toEqual(fromA.map((res) => res.json<Json>().reward));
    expect(onB.every((res) => res.json<Json>().cached === true)).toBe(true);
    expect(fake.callCount).toBe(3 * n);
    expect(await counterValue(b!.metrics.judgments)).toBe(0);
    expect(await counterValue(b!.metrics.admissionRefusals, { reason: 'memory' })).toBe(0);
  });

  it('the holder gives up while B waits: B admits what it takes over like new work, never past its queue bound', async () => {
    const [a, b] = await start(
      2,
      {},
      { latencyMs: 400, perReplica: [{}, { MAX_CONCURRENT_JUDGMENTS: '1', MAX_QUEUED_JUDGMENTS: '0' }] },
    );
    const n = 6;
    const body = {
      ...group(Array.from({ length: n }, (_, i) => candidate(120 + i))),
      request_id: 'given-up',
    };
    const keys = Array.from({ length: n }, (_, i) =>
      judgmentKey(
        getPreset('default')!,
        { question: QUESTION, candidate: candidate(120 + i), groundTruth: GROUND_TRUTH },
        b!.router,
        keySettingsOf({}),
      ),
    );
    const onA = reward(a!, body);
    await waitFor(async () => (await b!.state.leases.heldElsewhere(keys)).every(Boolean), 'A’s leases');
    let maxDepth = 0;
    const sampler = setInterval(() => {
      void b!.metrics.queueDepth.get().then((m) => {
        maxDepth = Math.max(maxDepth, m.values[0]?.value ?? 0);
      });
    }, 5);
    try {
      const onB = reward(b!, body);
      await waitFor(
        async () => (await counterValue(b!.metrics.idempotencyLookups, { result: 'miss' })) === 1,
        'B to wait for A’s judgments',
      );
      await new Promise((resolve) => setTimeout(resolve, 100));
      // A lets go of every lease at once (as when it shuts down or its clients left).
      await a!.state.close();
      const fromB = (await onB).json<Json>();
      const statuses = fromB.results.map((r: Json) => r.status);
      expect(statuses.every((s: string) => s === 'ok' || s === 'overloaded')).toBe(true);
      expect(statuses).toContain('ok');
      for (const r of fromB.results.filter((x: Json) => x.status === 'overloaded')) {
        expect(r).toMatchObject({ reward: null, error_code: 'RW_OVERLOADED' });
      }
      const overloaded = statuses.filter((s: string) => s === 'overloaded').length;
      expect(await counterValue(b!.metrics.admissionRefusals, { reason: 'memory' })).toBe(overloaded);
      expect(maxDepth).toBe(0);
    } finally {
      clearInterval(sampler);
    }
    await onA;
  });

  it('a judgment the holder’s own deadline cut short is taken over by a replica with time left', async () => {
    const [a, b] = await start(2, {}, { latencyMs: 500, perReplica: [{ REQUEST_DEADLINE_MS: '700' }, {}] });
    const body = group([candidate(140)]);
    const onA = reward(a!, body);
    await waitFor(() => fake.inflight() === 2, 'A’s analysts to call the backend');
    const onB = reward(b!, body);
    expect((await onA).json<Json>().results[0]).toMatchObject({ status: 'timeout', reward: null });
    const fromB = (await onB).json<Json>().results[0];
    expect(fromB).toMatchObject({ status: 'ok', reward: 1, cached: false });
    expect(await counterValue(b!.metrics.judgments)).toBe(1);
  });

  it('a request_id answered on A is recognised on B; the same id with other items is judged afresh', async () => {
    const [a, b] = await start(2);
    const body = { ...group([candidate(90), candidate(91)]), request_id: 'step-4-rollouts-90' };
    const fromA = (await reward(a!, body)).json<Json>();
    expect(fake.callCount).toBe(6);
    const fromB = (await reward(b!, body)).json<Json>();
    expect(fromB.results.map((r: Json) => r.judgment_id)).toEqual(
      fromA.results.map((r: Json) => r.judgment_id),
    );
    expect(fake.callCount).toBe(6);
    expect(await counterValue(b!.metrics.idempotencyLookups, { result: 'hit' })).toBe(1);

    const reused = (await reward(b!, { ...body, candidates: [candidate(92)] })).json<Json>();
    expect(reused.results[0]).toMatchObject({ status: 'ok', cached: false });
    expect(fake.callCount).toBe(9);
    expect(await counterValue(b!.metrics.idempotencyLookups, { result: 'miss' })).toBe(1);
  });

  it('a replica waiting for a hung holder elsewhere answers timeout at its own deadline (null, not an error)', async () => {
    const [a, b] = await start(
      2,
      { SHUTDOWN_GRACE_MS: '0' },
      {
        perReplica: [{ REQUEST_DEADLINE_MS: '10000' }, { REQUEST_DEADLINE_MS: '600' }],
      },
    );
    fake.setScript([], { kind: 'hang' });
    const body = group([candidate(30)]);
    const onA = reward(a!, body);
    await waitFor(() => fake.inflight() === 2, 'A to hold the lease and call the backend');
    const started = Date.now();
    const fromB = await reward(b!, body);
    expect(Date.now() - started).toBeLessThan(2000);
    expect(fromB.statusCode).toBe(200);
    expect(fromB.json<Json>().results[0]).toMatchObject({
      status: 'timeout',
      reward: null,
      error_code: 'RW_JUDGE_TIMEOUT',
    });
    // B never called the backend itself: only A's two analysts did.
    expect(fake.callCount).toBe(2);
    await a!.app.close();
    expect((await onA).json<Json>().results[0].reward).toBeNull();
  });

  /** Backend calls arriving in the `windowMs` after the first one, with both replicas backlogged. */
  async function callsInWindow(redisShared: boolean, windowMs: number): Promise<number> {
    const [a, b] = await start(
      2,
      // Past the window nothing is measured: the deadline and a zero grace end the backlog quickly.
      { JUDGE_RPM: '60', REQUEST_DEADLINE_MS: String(windowMs + 1000), SHUTDOWN_GRACE_MS: '0' },
      { redis: redisShared },
    );
    const pending = [
      reward(a!, group(Array.from({ length: 6 }, (_, i) => candidate(300 + i)))),
      reward(b!, group(Array.from({ length: 6 }, (_, i) => candidate(400 + i)))),
    ];
    await waitFor(() => fake.callCount > 0, 'the first call', 5000);
    const t0 = fake.calls[0]!.arrivedAt;
    await new Promise((resolve) => setTimeout(resolve, windowMs + 100));
    const inWindow = fake.calls.filter((c) => c.arrivedAt - t0 <= windowMs).length;
    await Promise.all([a!.app.close(), b!.app.close()]);
    // Judgments cut off by the deadline or the shutdown come back as failures, never as 0.
    for (const res of await Promise.all(pending)) {
      for (const r of res.json<Json>().results) expect(r.reward === null || r.status === 'ok').toBe(true);
    }
    return inWindow;
  }

  it('JUDGE_RPM=60 shared: both replicas together stay within 60 calls/minute (3 s window)', async () => {
    const windowMs = 3000;
    // Burst of 1 plus 1 per second: at most 1 + 3 calls in 3 s (+1 for a refill landing on the edge).
    const shared = await callsInWindow(true, windowMs);
    expect(shared).toBeGreaterThanOrEqual(3);
    expect(shared).toBeLessThanOrEqual(5);
  });

  it('control: without Redis each replica spends the whole RPM, about twice the shared rate', async () => {
    // Each replica: burst 1 + 3 in 3 s, so about 8 together.
    expect(await callsInWindow(false, 3000)).toBeGreaterThanOrEqual(6);
  });

  it('Redis killed mid-load: no request fails, /readyz says degraded; it recovers and shares again', async () => {
    const [a, b] = await start(2, {}, { latencyMs: 10 });
    let next = 0;
    const failures: string[] = [];
    const send = async (r: Replica): Promise<void> => {
      const k = next++;
      // With an id: the idempotency records go through the outage too.
      const res = await reward(r, {
        ...group([candidate(1000 + 2 * k), candidate(1001 + 2 * k)]),
        request_id: `kill-${k}`,
      });
      const body = res.json<Json>();
      if (res.statusCode !== 200 || body.results.some((x: Json) => x.status !== 'ok')) {
        failures.push(`${res.statusCode} ${res.body.slice(0, 200)}`);
      }
    };
    let stop = false;
    const loops = [a!, b!, a!, b!].map(async (r) => {
      for (let i = 0; i < 400 && !stop; i++) await send(r);
    });
    await waitFor(() => next >= 20, 'load to start', 5000);
    await redis.kill();
    await waitFor(() => a!.state.status().degraded && b!.state.status().degraded, 'degraded', 5000);
    const ready = await a!.app.inject({ method: 'GET', url: '/readyz' });
    expect(ready.statusCode).toBe(200);
    expect(ready.json<Json>().shared_state).toMatchObject({ kind: 'redis', degraded: true });
    const metricsText = (await a!.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(metricsText).toMatch(/^reward_shared_state_degraded 1$/m);
    const during = next;
    await waitFor(() => next >= during + 20, 'load to continue during the outage', 10_000);
    // A judgment computed on A during the outage (kept for the flush).
    const outage = group([candidate(5000)]);
    expect((await reward(a!, outage)).json<Json>().results[0].cached).toBe(false);

    await redis.restart();
    await waitFor(() => !a!.state.status().degraded && !b!.state.status().degraded, 'recovery', 10_000);
    const after = next;
    await waitFor(() => next >= after + 20, 'load to continue after recovery', 10_000);
    stop = true;
    await Promise.all(loops);
    expect(failures).toEqual([]);
    expect(next).toBeGreaterThan(60);
    expect((await a!.metrics.sharedStateDegraded.get()).values[0]?.value).toBe(0);

    // Caught up: the judgment A computed during the outage was flushed; B gets it with no backend call.
    const key = judgmentKey(
      getPreset('default')!,
      { question: QUESTION, candidate: candidate(5000), groundTruth: GROUND_TRUTH },
      a!.router,
      keySettingsOf({}),
    );
    await waitFor(async () => (await a!.state.judgments?.getMany([key]))?.[0] !== undefined, 'the flush');
    const calls = fake.callCount;
    const fromB = (await reward(b!, outage)).json<Json>();
    expect(fromB.results[0].cached).toBe(true);
    expect(fake.callCount).toBe(calls);
  });
});
