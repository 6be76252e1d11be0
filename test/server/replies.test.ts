/** Real-server reply behaviour as a trainer and an operator see it: result fields and Prometheus text. */
import { describe, expect, it } from 'vitest';

import { candidate, GROUND_TRUTH, QUESTION, type Harness, useHarness } from './helpers.js';

const harness = useHarness();

const group = (candidates: string[], graph = 'single-judge') => ({
  question: QUESTION,
  ground_truth: GROUND_TRUTH,
  candidates,
  graph,
});

async function metricsText(harness: Harness): Promise<string> {
  const res = await harness.app.inject({ method: 'GET', url: '/metrics' });
  return res.body;
}

/** The first reply contradicts itself (no_match, confidence 0.1 in it); the others are coherent. */
const INCOHERENT_FIRST = {
  script: [{ kind: 'json' as const, body: { reasoning: 'r', verdict: 'no_match', confidence: 0.1 } }],
  fallback: { kind: 'json' as const, body: { reasoning: 'r', verdict: 'match', confidence: 0.9 } },
};

describe('incoherent replies in results and metrics', () => {
  it('flags a no_match with confidence 0.1 (score 0.9) in results and counts it', async () => {
    const h = await harness({ fake: INCOHERENT_FIRST });
    const res = await h.app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: group([candidate(0), candidate(1)]),
    });
    const body = res.json<{ results: Array<{ reward: number; score: number; incoherent: boolean }> }>();
    expect(body.results.map((r) => [r.reward, r.score, r.incoherent])).toEqual([
      [0, 0.9, true],
      [1, 0.9, false],
    ]);
    expect(await metricsText(h)).toContain('reward_incoherent_judgments_total{graph="single-judge"} 1');
  });

  it('logs it per rollout in OpenRLHF’s extra_logs', async () => {
    const h = await harness({ fake: INCOHERENT_FIRST });
    const res = await h.app.inject({
      method: 'POST',
      url: '/get_reward?graph=single-judge',
      payload: { query: [candidate(0), candidate(1)], labels: [GROUND_TRUTH, GROUND_TRUTH] },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json<{ extra_logs: { incoherent: number[] } }>().extra_logs.incoherent).toEqual([1, 0]);
  });
});

describe('named reasons reach the results', () => {
  it('a cut reply is error_code RW_JUDGE_TRUNCATED with reward null, after 2 calls', async () => {
    const h = await harness({
      fake: {
        fallback: {
          kind: 'budget',
          body: { reasoning: 'r', verdict: 'match', confidence: 0.9 },
          needTokens: 50_000,
        },
      },
    });
    const res = await h.app.inject({ method: 'POST', url: '/v1/reward', payload: group([candidate(0)]) });
    const [r] = res.json<{ results: Array<{ reward: null; status: string; error_code: string }> }>().results;
    expect([r?.reward, r?.status, r?.error_code]).toEqual([null, 'judge_error', 'RW_JUDGE_TRUNCATED']);
    expect(h.fake.callCount).toBe(2);
    expect(await metricsText(h)).toContain(
      'reward_llm_calls_total{role="judge",model="fake-model",outcome="RW_JUDGE_TRUNCATED"} 2',
    );
  });

  it('a context overflow is error_code RW_JUDGE_CONTEXT_OVERFLOW', async () => {
    const h = await harness({ fake: { contextTokens: 100 }, env: { JUDGE_MAX_RETRIES: '3' } });
    const res = await h.app.inject({ method: 'POST', url: '/v1/reward', payload: group([candidate(0)]) });
    const [r] = res.json<{ results: Array<{ error_code: string }> }>().results;
    expect(r?.error_code).toBe('RW_JUDGE_CONTEXT_OVERFLOW');
    expect(h.fake.callCount).toBe(1);
  });
});

describe('retry budget in metrics', () => {
  it('shows retries allowed and denied against a backend that fails every call', async () => {
    const h = await harness({
      fake: { fallback: { kind: 'status', status: 503 } },
      env: { JUDGE_MAX_RETRIES: '3', JUDGE_RETRY_BUDGET: '0.2' },
      // A dead backend's calls wait once for the open circuit: 50 ms here, not the production 5 s.
      breaker: { openMs: 50 },
    });
    const candidates = Array.from({ length: 60 }, (_, i) => candidate(i));
    const res = await h.app.inject({ method: 'POST', url: '/v1/reward', payload: group(candidates) });
    expect(res.json<{ rewards: unknown[] }>().rewards.every((r) => r === null)).toBe(true);
    const text = await metricsText(h);
    const value = (result: string): number => {
      const m = new RegExp(
        `reward_backend_retries_total\\{backend="default",result="${result}"\\} (\\d+)`,
      ).exec(text);
      return Number(m?.[1] ?? NaN);
    };
    // 60 calls: ≤ 10 + 0.2 × 60 = 22 retries allowed; without a budget 180 retries would be made.
    expect(value('allowed')).toBeLessThanOrEqual(22);
    expect(value('allowed')).toBeGreaterThanOrEqual(10);
    expect(value('denied')).toBeGreaterThan(0);
    // An allowed retry may still send nothing: the replica's circuit breaker can be open by then.
    expect(h.fake.callCount).toBeGreaterThanOrEqual(60);
    expect(h.fake.callCount).toBeLessThanOrEqual(60 + value('allowed'));
  });
});
