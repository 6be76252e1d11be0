/**
 * Issue 38 item 1 across replicas sharing one Redis (a real redis-server on a loopback port, the offline
 * backend, `single-judge`): a candidate's outcome on one replica does not depend on what another replica
 * judged before it. The R1/R2 in both orders; and a pair that both pass with one prepared text
 * (R1', R2'): the judgment computed for one is the other's, shared through Redis.
 */
import type { FastifyInstance } from 'fastify';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';

import { loadConfig } from '../../src/config.js';
import { createOfflineBackend } from '../../src/judge/backends/offline.js';
import { createRouter } from '../../src/judge/routing.js';
import type { Router } from '../../src/judge/types.js';
import { buildApp } from '../../src/server/http/app.js';
import { createMetrics } from '../../src/server/observe/metrics.js';
import { createRedisState, type RedisState } from '../../src/state/redis.js';
import { describeRedis, startRedis, type RedisServer } from '../fakes/redis.js';
import { GROUND_TRUTH, QUESTION } from './helpers.js';

interface Replica {
  app: FastifyInstance;
  state: RedisState;
  router: Router;
}
interface Result {
  reward: number | null;
  status: string;
  reason?: string | undefined;
  cached?: boolean | undefined;
}

const R1 = '<think>\nreasoning\n</think>\n </think> image text InfoNCE';
const R2 = '</think> image text InfoNCE';
const IDEA = 'image and text encoders aligned by a symmetric InfoNCE loss over web-scale pairs';

describeRedis('order independence across replicas sharing Redis (issue 38 item 1)', () => {
  let redis: RedisServer;
  let open: Replica[] = [];
  let seq = 0;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis.stop();
  });
  afterEach(async () => {
    for (const r of open) {
      await r.app.close();
      await r.state.close();
    }
    open = [];
  });

  async function pair(): Promise<[Replica, Replica]> {
    const prefix = `order${++seq}-${Date.now()}:`;
    const out: Replica[] = [];
    for (let k = 0; k < 2; k++) {
      const config = loadConfig({ REDIS_URL: redis.url, REDIS_PREFIX: prefix, REDIS_LEASE_MS: '2000' });
      const state = createRedisState({ ...config.redis!, observer: {} });
      expect(await state.connected(5000)).toBe(true);
      const router = createRouter({ ...config.judge, offline: createOfflineBackend });
      const r = { app: buildApp({ config, router, state, metrics: createMetrics() }), state, router };
      open.push(r);
      out.push(r);
    }
    return [out[0]!, out[1]!];
  }

  const judge = async (r: Replica, candidate: string): Promise<Result> => {
    const res = await r.app.inject({
      method: 'POST',
      url: '/v1/judge',
      payload: { question: QUESTION, ground_truth: GROUND_TRUTH, candidate, graph: 'single-judge' },
    });
    expect(res.statusCode).toBe(200);
    const j = res.json<Result>();
    return { reward: j.reward, status: j.status, reason: j.reason, cached: j.cached };
  };
  const outcome = ({ reward, status, reason }: Result) => ({ reward, status, reason });

  it("the issue's R1 and R2: each replica's answer is the one it gives alone, in either order", async () => {
    const [lone] = await pair();
    const alone = { r1: outcome(await judge(lone, R1)), r2: outcome(await judge(lone, R2)) };
    expect(alone.r2).toMatchObject({ status: 'rejected_input', reason: 'too_short' });
    for (const [first, second] of [
      [R1, R2],
      [R2, R1],
    ] as const) {
      const [a, b] = await pair();
      const x = outcome(await judge(a, first));
      const y = outcome(await judge(b, second));
      expect(x).toEqual(first === R1 ? alone.r1 : alone.r2);
      expect(y).toEqual(second === R1 ? alone.r1 : alone.r2);
    }
  });

  it('two rollouts with one prepared text share one judgment through Redis, in either order', async () => {
    const r1 = `<think>\nr\n</think>\n </think> ${IDEA}`;
    const r2 = `</think>  ${IDEA.replace(/ /g, '\n')}`;
    for (const [first, second] of [
      [r1, r2],
      [r2, r1],
    ] as const) {
      const [a, b] = await pair();
      const x = await judge(a, first);
      const y = await judge(b, second);
      expect(x).toMatchObject({ status: 'ok', cached: false });
      expect(y).toMatchObject({ status: 'ok', cached: true, reward: x.reward });
    }
  });
});
