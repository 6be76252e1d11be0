/**
 * The high lane reaches the engine (issue 29, item 3): with JUDGE_ENGINE_PRIORITY=vllm a high-priority
 * judgment's calls carry `priority: -1` (vLLM schedules lower values first under
 * `--scheduling-policy priority`); normal calls carry none. An engine without priority scheduling refuses
 * any priority but 0 (vLLM's 400): the replica stops sending it and the call goes on without.
 */
import { describe, expect, it } from 'vitest';

import { candidate, GROUND_TRUTH, QUESTION, useHarness } from './helpers.js';

const harness = useHarness();

const judge = (i: number, priority?: 'high') => ({
  question: QUESTION,
  ground_truth: GROUND_TRUTH,
  candidate: candidate(i),
  ...(priority === undefined ? {} : { priority }),
});

describe('engine request priority', () => {
  it('sends priority -1 on the high lane’s calls to a vLLM with priority scheduling, none on normal ones', async () => {
    const h = await harness({
      env: { JUDGE_ENGINE_PRIORITY: 'vllm' },
      fake: { engine: { slots: 4, stepMs: 5, tokens: 2, priorityScheduling: true } },
    });
    const normal = await h.app.inject({ method: 'POST', url: '/v1/judge', payload: judge(0) });
    const high = await h.app.inject({ method: 'POST', url: '/v1/judge', payload: judge(1, 'high') });
    expect(normal.statusCode).toBe(200);
    expect(high.statusCode).toBe(200);
    const priorities = h.fake.calls.map((c) => c.body['priority']);
    // analysts-2: 3 calls each.
    expect(priorities).toEqual([undefined, undefined, undefined, -1, -1, -1]);
  });

  it('stops sending it to an engine that refuses it, and the call succeeds', async () => {
    const h = await harness({
      env: { JUDGE_ENGINE_PRIORITY: 'vllm' },
      fake: { engine: { slots: 4, stepMs: 5, tokens: 2 } },
    });
    const first = await h.app.inject({ method: 'POST', url: '/v1/judge', payload: judge(2, 'high') });
    expect(first.statusCode).toBe(200);
    expect(first.json()).toMatchObject({ status: 'ok' });
    const second = await h.app.inject({ method: 'POST', url: '/v1/judge', payload: judge(3, 'high') });
    expect(second.json()).toMatchObject({ status: 'ok' });
    const refused = h.fake.calls.filter((c) => c.status === 400);
    expect(refused.length).toBeGreaterThanOrEqual(1);
    expect(refused.length).toBeLessThanOrEqual(2);
    // After the refusal no call carries a priority.
    const last = h.fake.calls.slice(-3);
    expect(last.map((c) => c.body['priority'])).toEqual([undefined, undefined, undefined]);
  });
});
