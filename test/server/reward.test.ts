import { describe, expect, it } from 'vitest';

import { getPreset } from '../../src/judge/presets.js';
import { candidate, GROUND_TRUTH, QUESTION, useHarness } from './helpers.js';

const CALLS = getPreset('default')!.llmCallsPerJudgment;

const harness = useHarness();

describe('POST /v1/reward', () => {
  it('answers rewards, scores, per-item results, Dr. GRPO group statistics, graph, backend and usage', async () => {
    const h = await harness();
    const candidates = [candidate(0, true), candidate(1, false), candidate(2, true), 'Thought process:'];
    const res = await h.app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: { question: QUESTION, ground_truth: GROUND_TRUTH, candidates, request_id: 'r-1' },
    });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.rewards).toEqual([1, 0, 1, 0]);
    expect(body.scores).toHaveLength(4);
    expect(body.scores[0]).toBeGreaterThan(0.5);
    expect(body.scores[1]).toBeLessThan(0.5);
    expect(body.results[0]).toMatchObject({
      reward: 1,
      verdict: 'match',
      status: 'ok',
      cached: false,
      calls: CALLS,
    });
    expect(typeof body.results[0].judgment_id).toBe('string');
    expect(typeof body.results[0].latency_ms).toBe('number');
    expect(body.results[0].transcript).toBeUndefined();
    // The degenerate candidate is a real 0 decided without an LLM call.
    expect(body.results[3]).toMatchObject({ reward: 0, status: 'rejected_input', calls: 0 });
    expect(typeof body.results[3].reason).toBe('string');
    expect(body.group).toEqual({
      mean: 0.5,
      std: 0.5,
      advantages: [0.5, -0.5, 0.5, -0.5],
      n_ok: 4,
      n_failed: 0,
    });
    expect(body.graph).toEqual({ name: 'analysts-2', hash: getPreset('analysts-2')!.hash });
    expect(body.backend).toBe('openai-compatible');
    expect(body.usage.calls).toBe(3 * CALLS);
    expect(body.usage.prompt_tokens).toBeGreaterThan(0);
    expect(body.request_id).toBe('r-1');
    expect(h.fake.callCount).toBe(3 * CALLS);
  });

  it('gives null (never 0) with status judge_error when the backend keeps failing, and excludes it from the group', async () => {
    const h = await harness();
    // Calls whose prompt mentions "BROKEN" fail with 500; the rest follow the marker judge.
    h.fake.setScript([], (body) => {
      const user = body.messages?.find((m) => m.role === 'user')?.content ?? '';
      if (user.includes('BROKEN')) return { kind: 'status', status: 500 };
      return {
        kind: 'json',
        body: {
          reasoning: 'r',
          gt_components: [],
          candidate_components: [],
          stance: 'match',
          verdict: 'match',
          confidence: 0.9,
        },
      };
    });
    const res = await h.app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: {
        question: QUESTION,
        ground_truth: GROUND_TRUTH,
        candidates: [candidate(0, true), 'A BROKEN idea that the judge cannot handle at all today.'],
      },
    });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.rewards).toEqual([1, null]);
    expect(body.scores[1]).toBeNull();
    expect(body.results[1]).toMatchObject({ reward: null, verdict: null, status: 'judge_error' });
    expect(body.results[1].error_code).toBe('RW_JUDGE_UNAVAILABLE');
    expect(typeof body.results[1].error).toBe('string');
    expect(body.group).toEqual({ mean: 1, std: 0, advantages: [0, null], n_ok: 1, n_failed: 1 });
  });

  it('includes transcripts only when asked', async () => {
    const h = await harness();
    const res = await h.app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: {
        question: QUESTION,
        ground_truth: GROUND_TRUTH,
        candidates: [candidate(0)],
        include_transcripts: true,
      },
    });
    const result = res.json().results[0];
    expect(result.transcript).toHaveLength(CALLS);
    expect(result.transcript[0]).toMatchObject({ role: 'analyst', nodeId: 'analyst_1' });
    expect(result.stop_reason).toBe('single_round');
  });

  it('runs a named preset and an inline graph spec (reported as custom with its own hash)', async () => {
    const h = await harness({ env: { ALLOW_INLINE_GRAPHS: 'true' } });
    const named = await h.app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: {
        question: QUESTION,
        ground_truth: GROUND_TRUTH,
        candidates: [candidate(0)],
        graph: 'single-judge',
      },
    });
    expect(named.statusCode).toBe(200);
    expect(named.json().graph.name).toBe('single-judge');
    expect(named.json().usage.calls).toBe(1);

    const spec = {
      decision: { rule: 'evaluator', node: 'j' },
      nodes: [{ id: 'j', role: 'judge', temperature: 0 }],
    };
    const inline = await h.app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: { question: QUESTION, ground_truth: GROUND_TRUTH, candidates: [candidate(2)], graph: spec },
    });
    expect(inline.statusCode).toBe(200);
    expect(inline.json().graph.name).toBe('custom');
    expect(inline.json().graph.hash).toMatch(/^[0-9a-f]{16}$/);
    expect(inline.json().rewards).toEqual([1]);
  });

  it('answers 404 RW_UNKNOWN_GRAPH for an unknown name and 400 RW_INVALID_GRAPH for a broken spec', async () => {
    const h = await harness({ env: { ALLOW_INLINE_GRAPHS: 'true' } });
    const unknown = await h.app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: {
        question: QUESTION,
        ground_truth: GROUND_TRUTH,
        candidates: [candidate(0)],
        graph: 'constructor',
      },
    });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json().code).toBe('RW_UNKNOWN_GRAPH');
    const broken = await h.app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: {
        question: QUESTION,
        ground_truth: GROUND_TRUTH,
        candidates: [candidate(0)],
        graph: { decision: { rule: 'evaluator', node: 'x' }, nodes: [{ id: 'x', role: 'wizard' }] },
      },
    });
    expect(broken.statusCode).toBe(400);
    expect(broken.json().code).toBe('RW_INVALID_GRAPH');
    expect(broken.json().message).toContain("'x'");
    expect(h.fake.callCount).toBe(0);
  });
});

describe('POST /v1/reward/batch', () => {
  it('answers one group result per group, each with its own statistics, and the summed usage', async () => {
    const h = await harness();
    const res = await h.app.inject({
      method: 'POST',
      url: '/v1/reward/batch',
      payload: {
        groups: [
          {
            question: QUESTION,
            ground_truth: GROUND_TRUTH,
            candidates: [candidate(0, true), candidate(1, false)],
          },
          {
            question: QUESTION,
            ground_truth: GROUND_TRUTH,
            candidates: [candidate(2, true)],
            graph: 'single-judge',
          },
        ],
      },
    });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.groups).toHaveLength(2);
    expect(body.groups[0].rewards).toEqual([1, 0]);
    expect(body.groups[0].group.advantages).toEqual([0.5, -0.5]);
    expect(body.groups[1].rewards).toEqual([1]);
    expect(body.groups[1].graph.name).toBe('single-judge');
    expect(body.usage.calls).toBe(2 * CALLS + 1);
    expect(body.backend).toBe('openai-compatible');
  });

  it('states FAILURE_REWARD as failure_reward when the server sets it, leaving failed rewards null', async () => {
    const payload = {
      groups: [{ question: QUESTION, ground_truth: GROUND_TRUTH, candidates: [candidate(0)] }],
    };
    const failing = { fallback: { kind: 'status', status: 500 } } as const;
    const set = await harness({ env: { FAILURE_REWARD: '0.25', JUDGE_MAX_RETRIES: '0' }, fake: failing });
    const withReward = (await set.app.inject({ method: 'POST', url: '/v1/reward/batch', payload })).json();
    expect(withReward.failure_reward).toBe(0.25);
    expect(withReward.groups[0].rewards).toEqual([null]);
    const unset = await harness({ env: { JUDGE_MAX_RETRIES: '0' }, fake: failing });
    const without = (await unset.app.inject({ method: 'POST', url: '/v1/reward/batch', payload })).json();
    expect(without.groups[0].rewards).toEqual([null]);
    expect('failure_reward' in without).toBe(false);
  });

  it('refuses more candidates in all than MAX_CANDIDATES', async () => {
    const h = await harness({ env: { MAX_CANDIDATES: '3' } });
    const group = {
      question: QUESTION,
      ground_truth: GROUND_TRUTH,
      candidates: [candidate(0), candidate(1)],
    };
    const res = await h.app.inject({
      method: 'POST',
      url: '/v1/reward/batch',
      payload: { groups: [group, group] },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().code).toBe('RW_BAD_REQUEST');
    expect(res.json().message).toContain('groups');
  });
});

describe('POST /v1/judge', () => {
  it('always returns the transcript, the graph, the prompt version and usage', async () => {
    const h = await harness();
    const res = await h.app.inject({
      method: 'POST',
      url: '/v1/judge',
      payload: { question: QUESTION, ground_truth: GROUND_TRUTH, candidate: candidate(0, true) },
    });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ reward: 1, verdict: 'match', status: 'ok', cached: false, calls: CALLS });
    expect(body.transcript).toHaveLength(CALLS);
    expect(body.prompt_version).toMatch(/^[0-9a-f]{12}$/);
    expect(body.graph.name).toBe('analysts-2');
    expect(body.usage.calls).toBe(CALLS);
  });
});

describe('GET /v1/graphs', () => {
  it('lists every preset with its hash, call count and spec', async () => {
    const h = await harness();
    const res = await h.app.inject({ method: 'GET', url: '/v1/graphs' });
    expect(res.statusCode).toBe(200);
    const names = res.json().graphs.map((g: { name: string }) => g.name);
    for (const name of [
      'default',
      'analysts-2',
      'ordinary',
      'vote-3',
      'lexical',
      'round-robin-3',
      'proposer-critic',
    ]) {
      expect(names).toContain(name);
    }
    expect(res.json().default).toBe('default');
    const one = await h.app.inject({ method: 'GET', url: '/v1/graphs/vote-3' });
    expect(one.json()).toMatchObject({
      name: 'vote-3',
      llm_calls_per_judgment: 3,
      hash: getPreset('vote-3')!.hash,
    });
    expect(one.json().spec.decision.rule).toBe('majority');
    const missing = await h.app.inject({ method: 'GET', url: '/v1/graphs/__proto__' });
    expect(missing.statusCode).toBe(404);
    expect(missing.json().code).toBe('RW_UNKNOWN_GRAPH');
  });
});
