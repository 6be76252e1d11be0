/**
 * The token budget (src/server/admission/budget.ts): JUDGE_TOKEN_BUDGET per JUDGE_BUDGET_WINDOW_S against the fake
 * backend's reported usage; with REDIS_URL shared through a real redis-server.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { loadConfig } from '../../src/config.js';
import { createOfflineBackend } from '../../src/judge/backends/offline.js';
import { createRouter } from '../../src/judge/routing.js';
import { buildApp } from '../../src/server/http/app.js';
import {
  callTokens,
  createTokenBudget,
  type BudgetStatus as ReadyBudget,
} from '../../src/server/admission/budget.js';
import { workerShare } from '../../src/server/process/cluster.js';
import { createMetrics } from '../../src/server/observe/metrics.js';
import { createRedisState, type RedisState } from '../../src/state/redis.js';
import { startFakeOpenAI, type FakeOpenAI } from '../fakes/openai.js';
import { describeRedis, startRedis, type RedisServer } from '../fakes/redis.js';
import { candidate, GROUND_TRUTH, logLines, markerJudge, QUESTION, useHarness, waitFor } from './helpers.js';

const judgeBody = (i: number) => ({
  question: QUESTION,
  ground_truth: GROUND_TRUTH,
  candidate: candidate(i),
});

describe('a shared budget whose store fails', () => {
  it('keeps its own count and raises no unhandled rejection from its periodic refresh', async () => {
    const rejections: unknown[] = [];
    const onRejection = (reason: unknown): void => void rejections.push(reason);
    process.on('unhandledRejection', onRejection);
    const budget = createTokenBudget({
      tokens: 1000,
      windowS: 3600,
      cachedWeight: 1,
      shared: true,
      store: {
        add: () => Promise.reject(new Error('store down')),
        get: () => Promise.reject(new Error('store down')),
      },
    });
    try {
      budget.record({ promptTokens: 300, completionTokens: 100, cachedPromptTokens: 0 });
      // The refresh runs every second: wait for one (and a tick for its rejection to surface).
      await new Promise((resolve) => setTimeout(resolve, 1_200));
      expect(rejections).toEqual([]);
      expect(budget.remaining()).toBe(600);
    } finally {
      budget.close();
      process.off('unhandledRejection', onRejection);
    }
  });
});

describe('callTokens', () => {
  it('counts prompt + completion, the cached part of the prompt at its weight', () => {
    const call = { promptTokens: 1000, completionTokens: 200, cachedPromptTokens: 600 };
    expect(callTokens(call, 1)).toBe(1200);
    expect(callTokens(call, 0)).toBe(600);
    expect(callTokens(call, 0.5)).toBe(900);
    expect(callTokens({ ...call, cachedPromptTokens: null }, 0)).toBe(1200);
  });
});

describe('JUDGE_TOKEN_BUDGET under WORKERS>1', () => {
  it('gives each worker its share without Redis, the whole (shared) budget with it', () => {
    expect(workerShare(loadConfig({ JUDGE_TOKEN_BUDGET: '1000' }), 4).tokenBudget?.tokens).toBe(250);
    const shared = loadConfig({ JUDGE_TOKEN_BUDGET: '1000', REDIS_URL: 'redis://127.0.0.1:6379' });
    expect(workerShare(shared, 4).tokenBudget?.tokens).toBe(1000);
  });
});

describe('token budget against the fake backend', () => {
  const start = useHarness();

  /** Tokens one judgment of `candidate(i)` (two-digit i) spends on the fake, read from /readyz. */
  async function tokensPerJudgment(): Promise<number> {
    const h = await start({ env: { JUDGE_TOKEN_BUDGET: '1000000000' } });
    expect(
      (await h.app.inject({ method: 'POST', url: '/v1/judge', payload: judgeBody(10) })).statusCode,
    ).toBe(200);
    const ready = (await h.app.inject({ method: 'GET', url: '/readyz' })).json<{ budget: ReadyBudget }>();
    expect(ready.budget.spent_tokens).toBeGreaterThan(0);
    return ready.budget.spent_tokens;
  }

  it('counts the calls of audits (the integrity observer, canaries alike) against the budget', async () => {
    const t = await tokensPerJudgment();
    const h = await start({ env: { JUDGE_TOKEN_BUDGET: '1000000000', AUDIT_RATE: '1' } });
    expect(
      (await h.app.inject({ method: 'POST', url: '/v1/judge', payload: judgeBody(10) })).statusCode,
    ).toBe(200);
    const integrity = async () =>
      (await h.app.inject({ method: 'GET', url: '/v1/integrity' })).json<{ audit: { judgments: number } }>();
    await waitFor(async () => (await integrity()).audit.judgments === 1, 'the audit to finish');
    // The judgment and its audit (the same graph asked again): both spent, both counted.
    const ready = (await h.app.inject({ method: 'GET', url: '/readyz' })).json<{ budget: ReadyBudget }>();
    expect(ready.budget.spent_tokens).toBeGreaterThanOrEqual(Math.floor(1.9 * t));
  });

  it('refuses new judgments with 429 RW_BUDGET_EXHAUSTED once spent, warning once at 80 % and once at 100 %', async () => {
    const t = await tokensPerJudgment();
    const log = logLines();
    const budget = Math.ceil(4.5 * t);
    const h = await start({
      env: { JUDGE_TOKEN_BUDGET: String(budget), JUDGE_BUDGET_WINDOW_S: '3600' },
      logger: { level: 'warn', stream: log.stream },
    });
    const warnings = () => log.lines.filter((l) => String(l['msg']).startsWith('token budget'));
    for (let i = 11; i <= 14; i++) {
      const r = await h.app.inject({ method: 'POST', url: '/v1/judge', payload: judgeBody(i) });
      expect(r.statusCode).toBe(200);
    }
    // 4 t of 4.5 t: one warning (when a call of the 4th judgment passed 80 %), still admitting.
    expect(warnings()).toHaveLength(1);
    expect(String(warnings()[0]?.['msg'])).toMatch(/^token budget: 8\d % of JUDGE_TOKEN_BUDGET spent/);
    expect(
      (await h.app.inject({ method: 'POST', url: '/v1/judge', payload: judgeBody(15) })).statusCode,
    ).toBe(200);
    const refused = await h.app.inject({ method: 'POST', url: '/v1/judge', payload: judgeBody(16) });
    expect(refused.statusCode).toBe(429);
    expect(refused.json<{ code: string }>().code).toBe('RW_BUDGET_EXHAUSTED');
    // Retry-After: the end of the epoch-aligned hour.
    const toEnd = Math.ceil((Math.floor(Date.now() / 3_600_000 + 1) * 3_600_000 - Date.now()) / 1000);
    expect(Math.abs(Number(refused.headers['retry-after']) - toEnd)).toBeLessThanOrEqual(2);
    expect(warnings()).toHaveLength(2);
    expect(warnings()[1]?.['msg']).toBe(
      'token budget exhausted: new judgments are refused until the window ends',
    );
    // A cached judgment spends nothing: still answered.
    const cached = await h.app.inject({ method: 'POST', url: '/v1/judge', payload: judgeBody(11) });
    expect(cached.statusCode).toBe(200);
    expect(cached.json<{ cached: boolean }>().cached).toBe(true);

    const ready = await h.app.inject({ method: 'GET', url: '/readyz' });
    expect(ready.statusCode).toBe(200);
    const b = ready.json<{ budget: ReadyBudget }>().budget;
    expect(b).toMatchObject({ budget_tokens: budget, remaining_tokens: 0, exhausted: true });
    // Prompts differ by a few tokens (candidate text, fence nonce): 5 judgments ≈ 5 t.
    expect(b.spent_tokens / (5 * t)).toBeCloseTo(1, 1);
    const metrics = (await h.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(metrics).toContain('reward_budget_remaining_tokens{window_s="3600"} 0');
    expect(metrics).toMatch(
      /reward_request_errors_total\{route="\/v1\/judge",code="RW_BUDGET_EXHAUSTED"\} 1/,
    );
    // The budget itself, so that an alert can take the share left (RewardTokenBudgetLow).
    expect(metrics).toContain(`reward_budget_limit_tokens{window_s="3600"} ${budget}`);
  });

  it('lets admitted work finish: overshoot is at most the tokens of the judgments in flight', async () => {
    const t = await tokensPerJudgment();
    const budget = Math.ceil(1.5 * t);
    const h = await start({ fake: { latencyMs: 60 }, env: { JUDGE_TOKEN_BUDGET: String(budget) } });
    // 10 judgments admitted together (nothing spent yet); the budget is crossed while all are in flight.
    const burst = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        h.app.inject({ method: 'POST', url: '/v1/judge', payload: judgeBody(20 + i) }),
      ),
    );
    for (const r of burst) {
      expect(r.statusCode).toBe(200);
      expect(r.json<{ status: string }>().status).toBe('ok');
    }
    const spent = (await h.app.inject({ method: 'GET', url: '/readyz' })).json<{ budget: ReadyBudget }>()
      .budget.spent_tokens;
    // Every admitted judgment finished and counted (≈ 10 t; prompts differ by a few tokens).
    expect(spent / (10 * t)).toBeCloseTo(1, 1);
    expect(spent - budget).toBeGreaterThan(0);
    // The bound: the tokens of the 10 judgments in flight when the budget was reached (each ≤ 1.01 t here).
    expect(spent - budget).toBeLessThanOrEqual(10 * 1.01 * t);
    const after = await h.app.inject({ method: 'POST', url: '/v1/judge', payload: judgeBody(40) });
    expect(after.statusCode).toBe(429);
  });

  it('counts the backend-reported cached prompt tokens at CACHED_TOKEN_WEIGHT', async () => {
    const h = await start({
      fake: { blockCache: true },
      env: { JUDGE_TOKEN_BUDGET: '1000000000', CACHED_TOKEN_WEIGHT: '0.25' },
    });
    const r = await h.app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: { question: QUESTION, ground_truth: GROUND_TRUTH, candidates: [candidate(80), candidate(81)] },
    });
    expect(r.statusCode).toBe(200);
    const usage = r.json<{
      usage: { prompt_tokens: number; completion_tokens: number; cached_prompt_tokens: number };
    }>().usage;
    expect(usage.cached_prompt_tokens).toBeGreaterThan(0); // the shared prefix of the group
    const spent = (await h.app.inject({ method: 'GET', url: '/readyz' })).json<{ budget: ReadyBudget }>()
      .budget.spent_tokens;
    const expected = usage.prompt_tokens - 0.75 * usage.cached_prompt_tokens + usage.completion_tokens;
    // Whole tokens per call (rounded up): within one token per call of the exact sum.
    expect(spent).toBeGreaterThanOrEqual(Math.floor(expected));
    expect(spent).toBeLessThanOrEqual(Math.ceil(expected) + 6);
  });

  it('starts a fresh budget when the window ends', async () => {
    let offsetMs = 0;
    const h = await start({
      env: { JUDGE_TOKEN_BUDGET: '1', JUDGE_BUDGET_WINDOW_S: '60' },
      now: () => Date.now() + offsetMs,
    });
    expect(
      (await h.app.inject({ method: 'POST', url: '/v1/judge', payload: judgeBody(70) })).statusCode,
    ).toBe(200);
    const refused = await h.app.inject({ method: 'POST', url: '/v1/judge', payload: judgeBody(71) });
    expect(refused.statusCode).toBe(429);
    const retryAfterS = Number(refused.headers['retry-after']);
    expect(retryAfterS).toBeGreaterThan(0);
    expect(retryAfterS).toBeLessThanOrEqual(60);
    offsetMs = retryAfterS * 1000;
    const next = await h.app.inject({ method: 'POST', url: '/v1/judge', payload: judgeBody(71) });
    expect(next.statusCode).toBe(200);
    const b = (await h.app.inject({ method: 'GET', url: '/readyz' })).json<{ budget: ReadyBudget }>().budget;
    expect(b.exhausted).toBe(true); // the new window's first judgment spent it again
    expect(Date.parse(b.window_ends_at) - (Date.now() + offsetMs)).toBeGreaterThan(0);
  });

  it('answers the trainer adapters with the same 429 and Retry-After', async () => {
    const h = await start({ env: { JUDGE_TOKEN_BUDGET: '1' } });
    expect(
      (await h.app.inject({ method: 'POST', url: '/v1/judge', payload: judgeBody(50) })).statusCode,
    ).toBe(200);
    const slime = await h.app.inject({
      method: 'POST',
      url: '/slime',
      payload: { prompt: QUESTION, response: candidate(51), label: GROUND_TRUTH },
    });
    const openrlhf = await h.app.inject({
      method: 'POST',
      url: '/get_reward',
      payload: { query: [candidate(52)], labels: [GROUND_TRUTH] },
    });
    const verify = await h.app.inject({
      method: 'POST',
      url: '/verify',
      payload: {
        responses_create_params: { input: QUESTION },
        response: { output: [{ type: 'message', role: 'assistant', content: candidate(53) }] },
        ground_truth: GROUND_TRUTH,
      },
    });
    for (const r of [slime, openrlhf, verify]) {
      expect(r.statusCode).toBe(429);
      expect(r.json<{ code: string }>().code).toBe('RW_BUDGET_EXHAUSTED');
      expect(Number(r.headers['retry-after'])).toBeGreaterThan(0);
    }
  });
});

describeRedis('token budget shared through Redis', () => {
  let redis: RedisServer;
  let fake: FakeOpenAI;
  const open: Array<{ close(): Promise<void> }> = [];
  beforeAll(async () => {
    redis = await startRedis();
    fake = await startFakeOpenAI({ fallback: markerJudge });
  });
  afterAll(async () => {
    await fake.close();
    await redis.stop();
  });
  afterEach(async () => {
    for (const o of open.splice(0)) await o.close();
  });

  async function replica(prefix: string, budget: number) {
    const config = loadConfig({
      JUDGE_BASE_URL: fake.baseURL,
      JUDGE_MODEL: 'fake-model',
      JUDGE_API_KEY: 'test',
      JUDGE_MAX_RETRIES: '0',
      JUDGE_TOKEN_BUDGET: String(budget),
      REDIS_URL: redis.url,
      REDIS_PREFIX: prefix,
    });
    const state: RedisState = createRedisState({ ...config.redis!, observer: {} });
    expect(await state.connected(3000)).toBe(true);
    const router = createRouter({ ...config.judge, offline: createOfflineBackend });
    const app = buildApp({ config, router, state, metrics: createMetrics() });
    open.push({
      close: async () => {
        await app.close();
        await Promise.all(router.backends().map(async (b) => b.close?.()));
        await state.close();
      },
    });
    return app;
  }

  it("refuses on a replica that spent nothing once another replica's spend reaches the shared budget", async () => {
    const prefix = `budget-${Date.now()}:`;
    const a = await replica(prefix, 1);
    const b = await replica(prefix, 1);
    expect((await a.inject({ method: 'POST', url: '/v1/judge', payload: judgeBody(60) })).statusCode).toBe(
      200,
    );
    // B made no call: it learns the shared total within its refresh (1 s).
    await waitFor(
      async () =>
        (await b.inject({ method: 'GET', url: '/readyz' })).json<{ budget: ReadyBudget }>().budget.exhausted,
      'replica B to see the shared spend',
      3000,
    );
    const refused = await b.inject({ method: 'POST', url: '/v1/judge', payload: judgeBody(61) });
    expect(refused.statusCode).toBe(429);
    expect(refused.json<{ code: string }>().code).toBe('RW_BUDGET_EXHAUSTED');
    // A replica under another prefix (another deployment) has its own budget.
    const other = await replica(`${prefix}other:`, 1);
    expect(
      (await other.inject({ method: 'POST', url: '/v1/judge', payload: judgeBody(62) })).statusCode,
    ).toBe(200);
  });

  it('counts locally while Redis is down, without failing a request', async () => {
    const state = createRedisState({
      url: redis.url,
      prefix: `down-${Date.now()}:`,
      leaseMs: 2000,
      timeoutMs: 200,
    });
    expect(await state.connected(3000)).toBe(true);
    try {
      expect(await state.budget.add('w', 5, 60_000)).toBe(5);
      expect(await state.budget.add('w', 5, 60_000)).toBe(10);
      await redis.kill();
      // The local counter answers (this process's own spend during the outage).
      expect(await state.budget.add('w', 3, 60_000)).toBe(3);
      expect(state.status().degraded).toBe(true);
    } finally {
      await redis.restart();
      await state.close();
    }
  });
});
