/**
 * Cancellation across replicas sharing Redis: a judgment replica A computes for a request it then cancels
 * gives up its shared lease, so replica B's live request waiting for the same judgment takes it over and
 * gets a reward, instead of receiving A's abort as its outcome.
 */
import type { FastifyInstance } from 'fastify';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';

import { loadConfig } from '../../src/config.js';
import { createOfflineBackend } from '../../src/judge/backends/offline.js';
import { createRouter } from '../../src/judge/routing.js';
import type { Router } from '../../src/judge/types.js';
import { buildApp } from '../../src/server/http/app.js';
import { createMetrics } from '../../src/server/observe/metrics.js';
import { createRedisState } from '../../src/state/redis.js';
import type { SharedState } from '../../src/state/types.js';
import { startFakeOpenAI, type FakeOpenAI } from '../fakes/openai.js';
import { describeRedis, startRedis, type RedisServer } from '../fakes/redis.js';
import { candidate, GROUND_TRUTH, markerJudge, QUESTION, waitFor } from './helpers.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- response bodies are checked field by field
type Json = any;

describeRedis('cancel with replicas sharing Redis', () => {
  let redis: RedisServer;
  let fake: FakeOpenAI | undefined;
  const apps: Array<{ app: FastifyInstance; router: Router; state: SharedState }> = [];

  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => redis.stop());
  afterEach(async () => {
    for (const r of apps.splice(0)) {
      await r.app.close();
      await Promise.all(r.router.backends().map(async (b) => b.close?.()));
      await r.state.close();
    }
    await fake?.close();
  });

  it("hands a cancelled replica's judgment over to the replica whose request still waits for it", async () => {
    // A's two Analyst calls hang; every later call (B's takeover) answers.
    fake = await startFakeOpenAI({ script: [{ kind: 'hang' }, { kind: 'hang' }], fallback: markerJudge });
    for (let i = 0; i < 2; i++) {
      const config = loadConfig({
        JUDGE_BASE_URL: fake.baseURL,
        JUDGE_MODEL: 'fake-model',
        JUDGE_MAX_RETRIES: '0',
        REDIS_URL: redis.url,
        REDIS_PREFIX: 'cancel:',
        REDIS_LEASE_MS: '2000',
      });
      const metrics = createMetrics();
      const state = createRedisState({ ...config.redis!, observer: metrics.stateObserver });
      expect(await state.connected(5000)).toBe(true);
      const router = createRouter({ ...config.judge, offline: createOfflineBackend, buckets: state.buckets });
      apps.push({ app: buildApp({ config, router, metrics, state }), router, state });
    }
    const [a, b] = apps;
    const body = { question: QUESTION, ground_truth: GROUND_TRUTH, candidates: [candidate(0)] };
    const onA = a!.app.inject({ method: 'POST', url: '/v1/reward', payload: { ...body, tag: 'step-1' } });
    await fake.waitForCalls(2);
    const onB = b!.app.inject({ method: 'POST', url: '/v1/reward', payload: body });
    // B finds A's lease and waits on it (no backend call of its own).
    const parked = Date.now() + 300;
    await waitFor(() => Date.now() >= parked && fake!.callCount === 2, 'B waiting on the lease');
    const cancel = await a!.app.inject({ method: 'POST', url: '/v1/cancel', payload: { tag: 'step-1' } });
    expect(cancel.json()).toEqual({
      cancelled_judgments: 1,
      cancelled_requests: 1,
      processes: 2,
      shared: true,
    });
    expect((await onA).json<Json>().results[0].status).toBe('cancelled');
    const fromB = (await onB).json<Json>().results[0];
    expect(fromB.status).toBe('ok');
    expect(fromB.reward).toBe(1);
    expect(fake.callCount).toBe(5);
  }, 20_000);
});
