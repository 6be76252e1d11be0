/** Issue 14 over HTTP: cached prompt tokens in /metrics, results and usage; cascade stop reasons. */
import { describe, expect, it } from 'vitest';

import { candidate, GROUND_TRUTH, QUESTION, type Harness, useHarness } from './helpers.js';

const harness = useHarness();

interface RewardJson {
  results: Array<{ status: string; prompt_tokens: number; cached_prompt_tokens: number | null }>;
  usage: { prompt_tokens: number; cached_prompt_tokens: number | null };
}

/** `name{labels} value` samples of one metric from Prometheus text. */
function samples(text: string, name: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    const [series, value] = line.split(' ');
    out.set(series!.slice(name.length), Number(value));
  }
  return out;
}

async function rewardGroup(harness: Harness): Promise<RewardJson> {
  const res = await harness.app.inject({
    method: 'POST',
    url: '/v1/reward',
    payload: {
      question: QUESTION,
      ground_truth: GROUND_TRUTH,
      candidates: [0, 1, 2, 3].map((i) => candidate(i)),
    },
  });
  expect(res.statusCode).toBe(200);
  return res.json<RewardJson>();
}

/** Upper bound of the cached_tokens the fake sent back: it reports floor(cached chars / 4) per call. */
const fakeCachedTokens = (harness: Harness): number => Math.floor(harness.fake.prefill().cachedChars / 4);

describe('cached prompt tokens', () => {
  it('counts the backend-reported cached_tokens in /metrics by backend and role, and per judgment', async () => {
    const h = await harness({ fake: { blockCache: true } });
    const body = await rewardGroup(h);
    expect(body.results.map((r) => r.status)).toEqual(['ok', 'ok', 'ok', 'ok']);
    // Later judgments of the group reuse the shared prefix, so they report cached tokens.
    const perItem = body.results.map((r) => r.cached_prompt_tokens);
    expect(perItem.every((c) => typeof c === 'number')).toBe(true);
    const total = perItem.reduce<number>((a, c) => a + (c ?? 0), 0);
    expect(total).toBeGreaterThan(0);
    expect(body.usage.cached_prompt_tokens).toBe(total);
    expect(total).toBeLessThan(body.usage.prompt_tokens);
    // Each call's cached_tokens is floor(cached chars / 4); summing per call is ≤ the fake's total / 4.
    expect(total).toBeLessThanOrEqual(fakeCachedTokens(h));
    expect(total).toBeGreaterThan(fakeCachedTokens(h) - h.fake.callCount);

    const text = (await h.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(text).toContain('# TYPE reward_backend_cached_prompt_tokens_total counter');
    const series = samples(text, 'reward_backend_cached_prompt_tokens_total');
    expect([...series.keys()].sort()).toEqual([
      '{backend="default",role="analyst"}',
      '{backend="default",role="evaluator"}',
    ]);
    expect([...series.values()].reduce((a, b) => a + b, 0)).toBe(total);
    expect(series.get('{backend="default",role="analyst"}')).toBeGreaterThan(0);
  });

  it('reports null and no series when the backend does not report cached_tokens', async () => {
    const h = await harness();
    const body = await rewardGroup(h);
    expect(body.results.map((r) => r.cached_prompt_tokens)).toEqual([null, null, null, null]);
    expect(body.usage.cached_prompt_tokens).toBeNull();
    expect(body.usage.prompt_tokens).toBeGreaterThan(0);
    const text = (await h.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(samples(text, 'reward_backend_cached_prompt_tokens_total').size).toBe(0);
  });
});

describe('cascade through /v1/reward', () => {
  it('reports stop_reason per result: confident no_match stops, a match escalates', async () => {
    const h = await harness();
    const res = await h.app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: {
        question: QUESTION,
        ground_truth: GROUND_TRUTH,
        candidates: [candidate(0, true), candidate(1, false)],
        graph: 'cascade',
      },
    });
    expect(res.statusCode).toBe(200);
    const body = res.json<{
      rewards: number[];
      results: Array<{ stop_reason: string; calls: number }>;
      graph: { name: string };
      usage: { calls: number };
    }>();
    expect(body.graph.name).toBe('cascade');
    expect(body.rewards).toEqual([1, 0]);
    expect(body.results.map((r) => [r.stop_reason, r.calls])).toEqual([
      ['escalated', 4],
      ['cascade_stop', 1],
    ]);
    expect(body.usage.calls).toBe(5);
    expect(h.fake.callCount).toBe(5);
  });
});
