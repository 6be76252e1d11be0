/**
 * Issue 32 item 6: a candidate rejected without a judge call (`rejected_input`) is no measurement of its
 * graph's cost. When its zero calls were smoothed into the graph's calls per judgment, a share r of rejected
 * inputs charged the real work (1 − r) of its cost: work that could not fit was admitted and timed out.
 */
import { describe, expect, it } from 'vitest';

import { candidate, GROUND_TRUTH, QUESTION, useHarness } from './helpers.js';

const harness = useHarness();

const group = (candidates: string[], extra: Record<string, unknown> = {}) => ({
  question: QUESTION,
  ground_truth: GROUND_TRUTH,
  candidates,
  ...extra,
});

describe('admission and rejected inputs', () => {
  it('keeps charging a judgment its real calls when half the inputs are rejected, and refuses what cannot fit', async () => {
    // analysts-2: 3 calls. 2 slots × 60 ms → 33 calls/s; a 1.8 s deadline admits 0.9 × 1.8 × 33 = 54 calls.
    const h = await harness({
      env: { JUDGE_MAX_INFLIGHT: '2', JUDGE_INFLIGHT_CONTROL: 'fixed', REQUEST_DEADLINE_MS: '1800' },
      fake: { latencyMs: 60 },
    });
    // A step where half the rollouts are master-key fillers (rejected at once, 0 calls).
    let next = 0;
    for (let round = 0; round < 6; round++) {
      const candidates = Array.from({ length: 8 }, (_, i) => (i % 2 === 0 ? candidate(next++) : ':'));
      const res = await h.app.inject({ method: 'POST', url: '/v1/reward', payload: group(candidates) });
      expect(res.statusCode).toBe(200);
      const statuses = res.json<{ results: Array<{ status: string }> }>().results.map((r) => r.status);
      expect(statuses.filter((s) => s === 'rejected_input')).toHaveLength(4);
    }
    const plan = await h.app.inject({
      method: 'POST',
      url: '/v1/plan',
      payload: { rollouts: 10, group_size: 10 },
    });
    expect(plan.json<{ calls_per_judgment: number }>().calls_per_judgment).toBe(3);

    // 12 real judgments (36 calls, 1.1 s: 0.7 s to spare under a loaded CPU) fit; 15 more behind them
    // (81 calls, 2.4 s) do not: refused at once, rather than admitted at half their cost (40 calls) and
    // timed out.
    const fresh = (n: number) => Array.from({ length: n }, () => candidate(next++));
    const before = h.fake.callCount;
    const first = h.app.inject({ method: 'POST', url: '/v1/reward', payload: group(fresh(12)) });
    await h.fake.waitForCalls(before + 1); // the first is admitted (its calls reserved) and running
    const second = await h.app.inject({ method: 'POST', url: '/v1/reward', payload: group(fresh(15)) });
    expect(second.statusCode).toBe(503);
    expect(second.json()).toMatchObject({ code: 'RW_OVERLOADED', details: { reason: 'deadline' } });
    const answered = (await first).json<{ results: Array<{ status: string }> }>();
    expect(answered.results.every((r) => r.status === 'ok')).toBe(true);
  });
});
