/**
 * Issue 32 items 5, 7 and 8 and issue 31 item 4 at the replicas' seam, a real redis-server on a loopback
 * port: replicas with other preparation settings sharing REDIS_PREFIX do not replay each other's verdicts;
 * a request that joins a flight waiting on another replica's lease extends the wait; a judgment taken over
 * from a replica that gave it up passes the token budget; the spend counted locally during an outage is
 * written back when Redis returns.
 */
import type { FastifyInstance } from 'fastify';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';

import { loadConfig } from '../../src/config.js';
import { createOfflineBackend } from '../../src/judge/backends/offline.js';
import { createRouter } from '../../src/judge/routing.js';
import type { Router } from '../../src/judge/types.js';
import type { BudgetStatus } from '../../src/server/admission/budget.js';
import { buildApp } from '../../src/server/http/app.js';
import { createMetrics } from '../../src/server/observe/metrics.js';
import { createRedisState, type RedisState } from '../../src/state/redis.js';
import { startFakeOpenAI, type FakeChatRequest, type FakeOpenAI, type FakeReply } from '../fakes/openai.js';
import { describeRedis, startRedis, type RedisServer } from '../fakes/redis.js';
import { candidate, GROUND_TRUTH, markerJudge, QUESTION, waitFor } from './helpers.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- response bodies are checked field by field
type Json = any;

interface Replica {
  app: FastifyInstance;
  state: RedisState;
  router: Router;
}

/** A prompt showing HANGME never answers; one showing SLOWIDEA answers after 600 ms. */
function judge(body: FakeChatRequest): FakeReply {
  const text = JSON.stringify(body.messages);
  if (text.includes('HANGME')) return { kind: 'hang' };
  if (text.includes('SLOWIDEA')) return { kind: 'slow', ms: 600, then: markerJudge(body) };
  return markerJudge(body);
}

const judgeBody = (text: string, extra: Record<string, unknown> = {}) => ({
  question: QUESTION,
  ground_truth: GROUND_TRUTH,
  candidate: text,
  ...extra,
});

describeRedis('replicas sharing one Redis: the seams issue 32 found', () => {
  let redis: RedisServer;
  let fake: FakeOpenAI;
  let open: Replica[] = [];
  let seq = 0;

  beforeAll(async () => {
    redis = await startRedis();
    fake = await startFakeOpenAI({ fallback: judge });
  });
  afterAll(async () => {
    await fake.close();
    await redis.stop();
  });
  afterEach(async () => {
    for (const r of open) {
      await r.app.close();
      await Promise.all(r.router.backends().map(async (b) => b.close?.()));
      await r.state.close();
    }
    open = [];
  });

  /** Replicas under one fresh REDIS_PREFIX, each with its own settings on top of `env`. */
  async function replicas(env: Record<string, string>, own: Array<Record<string, string>>) {
    const prefix = `seams${++seq}-${Date.now()}:`;
    const out: Replica[] = [];
    for (const mine of own) {
      const config = loadConfig({
        JUDGE_BASE_URL: fake.baseURL,
        JUDGE_MODEL: 'fake-model',
        JUDGE_API_KEY: 'test',
        JUDGE_MAX_RETRIES: '0',
        REDIS_URL: redis.url,
        REDIS_PREFIX: prefix,
        REDIS_LEASE_MS: '2000',
        ...env,
        ...mine,
      });
      const state = createRedisState({ ...config.redis!, observer: {} });
      expect(await state.connected(5000)).toBe(true);
      const router = createRouter({ ...config.judge, offline: createOfflineBackend });
      const replica = { app: buildApp({ config, router, state, metrics: createMetrics() }), state, router };
      open.push(replica);
      out.push(replica);
    }
    return out;
  }

  const post = (r: Replica, url: string, payload: unknown) =>
    r.app.inject({ method: 'POST', url, payload: payload as Record<string, unknown> });

  it('a replica with other MAX_CANDIDATE_CHARS does not replay the other’s rejection (nor its verdict)', async () => {
    const [strict, loose] = await replicas({}, [{ MAX_CANDIDATE_CHARS: '120' }, {}]);
    const long = `${candidate(40)} It pairs the encoders with hard negatives mined from the same batch, too.`;
    expect(long.length).toBeGreaterThan(120);
    const rejected = (await post(strict!, '/v1/judge', judgeBody(long))).json<Json>();
    expect(rejected).toMatchObject({ status: 'rejected_input', reason: 'too_long', reward: 0 });
    const calls = fake.callCount;
    // The same raw rollout on a replica that accepts its length: judged, not A's 0 replayed from Redis.
    const judged = (await post(loose!, '/v1/judge', judgeBody(long))).json<Json>();
    expect(judged).toMatchObject({ status: 'ok', cached: false, reward: 1 });
    expect(fake.callCount).toBe(calls + 3);
    // And the verdict B stored is not replayed on A: A still rejects it.
    const again = (await post(strict!, '/v1/judge', judgeBody(long))).json<Json>();
    expect(again).toMatchObject({ status: 'rejected_input', reward: 0 });
  });

  it('a request joining a flight that waits on another replica’s lease extends the wait to its deadline', async () => {
    const [a, b] = await replicas({}, [{}, {}]);
    const slow = candidate(42).replace('Idea 42', 'Idea 42 SLOWIDEA');
    // A computes (two slow stages, ~1.2 s); B's first request could wait 150 ms, the second 5 s.
    const onA = post(a!, '/v1/judge', judgeBody(slow));
    await waitFor(() => fake.inflight() >= 2, 'A to call the judge (its lease held)');
    const short = post(b!, '/v1/judge', judgeBody(slow, { deadline_ms: 300 }));
    await new Promise((resolve) => setTimeout(resolve, 50));
    const long = await post(b!, '/v1/judge', judgeBody(slow, { deadline_ms: 5000 }));
    expect((await short).json<Json>().status).toBe('timeout');
    const fromA = (await onA).json<Json>();
    expect(long.json<Json>()).toMatchObject({ status: 'ok', cached: true, judgment_id: fromA.judgment_id });
  });

  it('a judgment taken over from a replica that gave it up passes the token budget', async () => {
    // Both replicas count one shared spend; B's budget (1 token) is spent as soon as anyone spends.
    const [a, b] = await replicas({}, [{ JUDGE_TOKEN_BUDGET: '100000000' }, { JUDGE_TOKEN_BUDGET: '1' }]);
    expect((await post(a!, '/v1/judge', judgeBody(candidate(44)))).statusCode).toBe(200);
    await waitFor(
      async () =>
        (await b!.app.inject({ method: 'GET', url: '/readyz' })).json<{ budget: BudgetStatus }>().budget
          .exhausted,
      'B to learn the shared spend',
    );
    const hanging = candidate(46).replace('Idea 46', 'Idea 46 HANGME');
    const onA = post(a!, '/v1/judge', judgeBody(hanging, { request_id: 'given-up' }));
    await waitFor(() => fake.inflight() >= 2, 'A to hold the lease');
    // Not new work while A computes it: B waits (no 429 up front).
    const onB = post(b!, '/v1/judge', judgeBody(hanging, { deadline_ms: 4000 }));
    await new Promise((resolve) => setTimeout(resolve, 200));
    const before = fake.callCount;
    // A gives it up: B would take it over, but its budget is spent.
    await post(a!, '/v1/cancel', { request_ids: ['given-up'] });
    const answer = (await onB).json<Json>();
    expect(answer).toMatchObject({ status: 'overloaded', reward: null, error_code: 'RW_BUDGET_EXHAUSTED' });
    expect(fake.callCount).toBe(before);
    expect((await onA).json<Json>().status).toBe('cancelled');
  });

  it('writes the spend counted locally during an outage back to the shared counter when Redis returns', async () => {
    const [a, b] = await replicas({ JUDGE_TOKEN_BUDGET: '100000000', REDIS_TIMEOUT_MS: '200' }, [{}, {}]);
    const spent = async (r: Replica): Promise<number> =>
      (await r.app.inject({ method: 'GET', url: '/readyz' })).json<{ budget: BudgetStatus }>().budget
        .spent_tokens;
    expect((await post(a!, '/v1/judge', judgeBody(candidate(48)))).statusCode).toBe(200);
    const beforeOutage = await spent(a!);
    await waitFor(async () => (await spent(b!)) === beforeOutage, 'B to learn A’s spend');
    // A hung Redis (connected, never answering): A degrades and counts on locally.
    redis.pause();
    try {
      await waitFor(() => a!.state.status().degraded, 'A to degrade', 5000);
      expect((await post(a!, '/v1/judge', judgeBody(candidate(50)))).statusCode).toBe(200);
    } finally {
      redis.resume();
    }
    const afterOutage = await spent(a!);
    expect(afterOutage).toBeGreaterThan(beforeOutage);
    // Redis is back: B learns the spend A counted while it was out (before the fix, never).
    await waitFor(async () => (await spent(b!)) === afterOutage, 'B to learn A’s outage spend', 8000);
  }, 30_000);
});
