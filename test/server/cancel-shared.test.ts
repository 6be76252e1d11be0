/**
 * `POST /v1/cancel` shared through Redis (REDIS_URL): a cancel sent to replica A reaches the requests
 * running on replica B (their backend calls are aborted: the fake sees them closed), later requests with
 * the cancelled tag or id are answered `cancelled` on every replica — one that starts after the cancel
 * included — and a Redis outage (hung or down) leaves the local cancel working. A real redis-server on a
 * loopback port; each replica is a full app with its own Redis connections, as a pod would have.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import type { FastifyInstance } from 'fastify';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';

import { hashKey, loadConfig } from '../../src/config.js';
import { createOfflineBackend } from '../../src/judge/backends/offline.js';
import { createRouter } from '../../src/judge/routing.js';
import type { Router } from '../../src/judge/types.js';
import { buildApp } from '../../src/server/http/app.js';
import { createMetrics } from '../../src/server/observe/metrics.js';
import type { Metrics } from '../../src/server/observe/metric-types.js';
import { createRedisState, type RedisState } from '../../src/state/redis.js';
import { startFakeOpenAI, type FakeOpenAI } from '../fakes/openai.js';
import { describeRedis, startRedis, type RedisServer } from '../fakes/redis.js';
import { requestOnce, startBuiltServer, type BuiltServer } from '../support/built-server.js';
import { ensureDist } from '../support/dist.js';
import { candidate, GROUND_TRUTH, QUESTION, waitFor } from './helpers.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- response bodies are checked field by field
type Json = any;

interface Replica {
  app: FastifyInstance;
  router: Router;
  state: RedisState;
  metrics: Metrics;
}

describeRedis('cancel shared by the replicas of one Redis', () => {
  let redis: RedisServer;
  let fake: FakeOpenAI;
  const replicas: Replica[] = [];
  const built: BuiltServer[] = [];

  beforeAll(async () => {
    ensureDist();
    redis = await startRedis();
  }, 180_000);
  afterAll(async () => redis.stop());
  afterEach(async () => {
    for (const b of built.splice(0)) {
      b.child.kill('SIGKILL');
      await b.exit;
    }
    for (const r of replicas.splice(0)) {
      await r.app.close();
      await Promise.all(r.router.backends().map(async (b) => b.close?.()));
      await r.state.close();
    }
    await fake.close();
  });

  /** Every backend call hangs until the request's cancel aborts it. */
  const hangingFake = async (): Promise<void> => {
    fake = await startFakeOpenAI({ fallback: { kind: 'hang' } });
  };

  const replica = async (prefix: string, env: Record<string, string> = {}): Promise<Replica> => {
    const config = loadConfig({
      ...env,
      JUDGE_BASE_URL: fake.baseURL,
      JUDGE_MODEL: 'fake-model',
      JUDGE_MAX_RETRIES: '0',
      REDIS_URL: redis.url,
      REDIS_PREFIX: prefix,
      REDIS_TIMEOUT_MS: '300',
      REQUEST_DEADLINE_MS: '30000',
    });
    const metrics = createMetrics();
    const state = createRedisState({ ...config.redis!, observer: metrics.stateObserver });
    expect(await state.connected(5000)).toBe(true);
    const router = createRouter({ ...config.judge, offline: createOfflineBackend, buckets: state.buckets });
    const r = { app: buildApp({ config, router, metrics, state }), router, state, metrics };
    replicas.push(r);
    return r;
  };

  const reward = (
    r: Replica,
    i: number,
    extra: Record<string, unknown>,
    headers: Record<string, string> = {},
  ) =>
    r.app.inject({
      method: 'POST',
      url: '/v1/reward',
      headers,
      payload: { question: QUESTION, ground_truth: GROUND_TRUTH, candidates: [candidate(i)], ...extra },
    });
  const cancel = async (
    r: Replica,
    payload: Record<string, unknown>,
    headers: Record<string, string> = {},
  ): Promise<Json> => (await r.app.inject({ method: 'POST', url: '/v1/cancel', headers, payload })).json();

  it("a tenant's cancel on replica A reaches its own request on replica B only (REWARD_KEYS)", async () => {
    await hangingFake();
    const keys = join(mkdtempSync(join(tmpdir(), 'reward-keys-')), 'keys.json');
    const entry = (name: string) => ({ name, sha256: hashKey(`key-${name}`), scopes: ['reward', 'cancel'] });
    writeFileSync(keys, JSON.stringify({ keys: [entry('run-a'), entry('run-b')] }));
    const as = (name: string) => ({ authorization: `Bearer key-${name}` });
    const a = await replica('shared-tenants:', { REWARD_KEYS: keys });
    const b = await replica('shared-tenants:', { REWARD_KEYS: keys });
    // Both runs on B, the same tag and request id.
    const runA = reward(b, 30, { tag: 'step-9', request_id: 'req-9' }, as('run-a'));
    const runB = reward(b, 31, { tag: 'step-9', request_id: 'req-9' }, as('run-b'));
    await fake.waitForCalls(4);
    expect(await cancel(a, { tag: 'step-9' }, as('run-b'))).toEqual({
      cancelled_judgments: 1,
      cancelled_requests: 1,
      processes: 2,
      shared: true,
    });
    expect((await runB).json<Json>().results[0].status).toBe('cancelled');
    // run-a's judgment still waits on the backend; its late arrival with the tag is not a tombstone's.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(fake.calls.filter((c) => c.outcome === 'pending')).toHaveLength(2);
    expect(await cancel(a, { request_ids: ['req-9'] }, as('run-a'))).toMatchObject({
      cancelled_judgments: 1,
      cancelled_requests: 1,
    });
    expect((await runA).json<Json>().results[0].status).toBe('cancelled');
    // A late run-b request with the tag on A is answered `cancelled` (its tombstone); run-a's is judged.
    const lateB = (await reward(a, 32, { tag: 'step-9' }, as('run-b'))).json<Json>();
    expect(lateB.results[0].status).toBe('cancelled');
    const lateA = reward(a, 33, { tag: 'step-9' }, as('run-a'));
    await fake.waitForCalls(6);
    expect(await cancel(b, { tag: 'step-9' }, as('run-a'))).toMatchObject({ cancelled_requests: 1 });
    expect((await lateA).json<Json>().results[0].status).toBe('cancelled');
  });

  it('a cancel sent to replica A aborts the judgment running on replica B, and later arrivals everywhere', async () => {
    await hangingFake();
    const a = await replica('shared-1:');
    const b = await replica('shared-1:');
    const onB = reward(b, 0, { tag: 'step-1' });
    await fake.waitForCalls(2); // B's two Analysts are waiting on the backend
    const t0 = performance.now();
    const answer = await cancel(a, { tag: 'step-1' });
    // Counted where it happened (B), summed over A and B.
    expect(answer).toEqual({ cancelled_judgments: 1, cancelled_requests: 1, processes: 2, shared: true });
    const fromB = (await onB).json<Json>();
    const cancelledAfterMs = performance.now() - t0;
    expect(fromB.results[0].status).toBe('cancelled');
    expect(fromB.results[0].reward).toBeNull();
    expect(cancelledAfterMs).toBeLessThan(1000);
    // B's backend calls were aborted: the fake saw both closed by the client.
    await waitFor(() => fake.calls.every((c) => c.outcome === 'client_closed'), "B's calls aborted");
    expect(fake.callCount).toBe(2);
    // Counted by the replica whose request it was.
    const onBMetrics = await b.metrics.registry.metrics();
    expect(onBMetrics).toContain('reward_cancelled_judgments_total{route="/v1/reward"} 1');

    // A reward call still on the wire when the step was cancelled: answered `cancelled` on either replica,
    // without a backend call.
    for (const [r, i] of [
      [b, 1],
      [a, 2],
    ] as const) {
      const late = (await reward(r, i, { tag: 'step-1' })).json<Json>();
      expect(late.results[0].status).toBe('cancelled');
    }
    // A replica that starts after the cancel catches up from the tombstone Redis keeps (within a second).
    const c = await replica('shared-1:');
    await new Promise((resolve) => setTimeout(resolve, 1200));
    const onC = (await reward(c, 3, { tag: 'step-1' })).json<Json>();
    expect(onC.results[0].status).toBe('cancelled');
    expect(fake.callCount).toBe(2);
    // Another tag is not affected (its judgment starts: the fake sees its calls).
    const other = reward(c, 4, { tag: 'step-2' });
    await fake.waitForCalls(4);
    expect(await cancel(a, { tag: 'step-2' })).toEqual({
      cancelled_judgments: 1,
      cancelled_requests: 1,
      processes: 3,
      shared: true,
    });
    expect((await other).json<Json>().results[0].status).toBe('cancelled');
  });

  it('cancels by request id on another replica, and keeps replicas of another prefix apart', async () => {
    await hangingFake();
    const a = await replica('shared-2:');
    const b = await replica('shared-2:');
    const elsewhere = await replica('other-deployment:');
    const onB = reward(b, 10, { request_id: 'req-1' });
    const onOther = reward(elsewhere, 11, { request_id: 'req-1' });
    await fake.waitForCalls(4);
    expect(await cancel(a, { request_ids: ['req-1', 'req-unknown'] })).toEqual({
      cancelled_judgments: 1,
      cancelled_requests: 1,
      processes: 2,
      shared: true,
    });
    expect((await onB).json<Json>().results[0].status).toBe('cancelled');
    // The other deployment's request with the same id is still waiting on the backend.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(fake.calls.filter((c) => c.outcome === 'pending')).toHaveLength(2);
    expect((await cancel(elsewhere, { request_ids: ['req-1'] })).cancelled_judgments).toBe(1);
    expect((await onOther).json<Json>().results[0].status).toBe('cancelled');
  });

  it('a Redis outage (hung, then down) leaves the local cancel working and says it was not shared', async () => {
    await hangingFake();
    const a = await replica('shared-3:');
    const b = await replica('shared-3:');
    const onA = reward(a, 20, { tag: 'step-3' });
    await fake.waitForCalls(2);

    // Hung: connected, never answering. The local cancel answers at once; the publish gives up after
    // REDIS_TIMEOUT_MS (300 ms) and the answer says the cancel was not shared. (The script may still run
    // when Redis wakes up: a late delivery, which only cancels what was asked.)
    redis.pause();
    try {
      const t0 = performance.now();
      const hung = await cancel(a, { tag: 'step-3' });
      expect(performance.now() - t0).toBeLessThan(1500);
      expect(hung).toEqual({ cancelled_judgments: 1, cancelled_requests: 1, processes: 1, shared: false });
      expect((await onA).json<Json>().results[0].status).toBe('cancelled');
    } finally {
      redis.resume();
    }

    // Down: both states degrade. Requests are still judged (Redis is never a dependency), and a cancel
    // works on the replica it lands on, reaching no other.
    await redis.kill();
    try {
      await waitFor(() => a.state.status().degraded && b.state.status().degraded, 'both degraded');
      const onB = reward(b, 21, { tag: 'step-4' });
      const onA2 = reward(a, 22, { tag: 'step-4' });
      await fake.waitForCalls(6);
      const down = await cancel(b, { tag: 'step-4' });
      expect(down).toEqual({ cancelled_judgments: 1, cancelled_requests: 1, processes: 1, shared: false });
      expect((await onB).json<Json>().results[0].status).toBe('cancelled');
      // A's request with the same tag is still waiting on the backend: the outage kept the cancel local.
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(fake.calls.filter((c) => c.outcome === 'pending')).toHaveLength(2);
      expect((await cancel(a, { tag: 'step-4' })).cancelled_judgments).toBe(1);
      expect((await onA2).json<Json>().results[0].status).toBe('cancelled');
    } finally {
      await redis.restart();
    }
    const errors = await a.metrics.registry.metrics();
    expect(errors).toMatch(/reward_shared_state_errors_total\{op="cancels"\} [1-9]/);
  });

  it('the built server: a cancel sent to one replica reaches both workers of another (WORKERS=2)', async () => {
    await hangingFake();
    const env = {
      JUDGE_BASE_URL: fake.baseURL,
      JUDGE_MODEL: 'fake-model',
      JUDGE_API_KEY: 'test',
      JUDGE_MAX_RETRIES: '0',
      REDIS_URL: redis.url,
      REDIS_PREFIX: 'shared-built:',
      REQUEST_DEADLINE_MS: '20000',
      JUDGE_TIMEOUT_MS: '20000',
    };
    const a = await startBuiltServer(env);
    built.push(a);
    const b = await startBuiltServer({ ...env, WORKERS: '2' }, 2);
    built.push(b);
    const body = (i: number) => ({
      question: QUESTION,
      ground_truth: GROUND_TRUTH,
      candidates: [candidate(30 + i)],
      tag: 'built-step',
    });
    // One connection each: B's primary hands them to its two workers in turn.
    const onB = [0, 1].map((i) => requestOnce(`${b.url}/v1/reward`, 'POST', body(i)));
    await fake.waitForCalls(4);
    const t0 = performance.now();
    const answer = await requestOnce(`${a.url}/v1/cancel`, 'POST', { tag: 'built-step' });
    // A, and B's two workers (each its own process and Redis subscriber).
    expect(answer.json()).toEqual({
      cancelled_judgments: 2,
      cancelled_requests: 2,
      processes: 3,
      shared: true,
    });
    for (const r of await Promise.all(onB)) {
      expect((r.json() as Json).results[0].status).toBe('cancelled');
    }
    expect(performance.now() - t0).toBeLessThan(2000);
    await waitFor(() => fake.calls.every((c) => c.outcome === 'client_closed'), "B's calls aborted");
  }, 60_000);
});
