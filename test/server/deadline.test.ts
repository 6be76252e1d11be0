/**
 * Under a deadline, judgments already started finish first: backend slots go to later stages and older
 * judgments before new first stages, so a request that runs out of time returns what it completed.
 */
import { describe, expect, it } from 'vitest';

import { candidate, counterValue, QUESTION, GROUND_TRUTH, useHarness } from './helpers.js';

const harness = useHarness();

describe('deadline priority', () => {
  it('32 candidates with a deadline that fits about half: the completed half comes back ok', async () => {
    // analysts-2 = 3 calls per judgment; 4 slots × 200 ms per call → 96 calls need 4.8 s; the deadline
    // allows ~2.4 s (~16 judgments). In arrival (FIFO) order the 64 first-stage calls alone take 3.2 s,
    // so without the priority every item would come back `timeout`.
    const h = await harness({
      env: { JUDGE_MAX_INFLIGHT: '4', REQUEST_DEADLINE_MS: '2400' },
      fake: { latencyMs: 200 },
    });
    const candidates = Array.from({ length: 32 }, (_, i) => candidate(i));
    const res = await h.app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: { question: QUESTION, ground_truth: GROUND_TRUTH, candidates },
    });
    expect(res.statusCode).toBe(200);
    const body = res.json<{
      rewards: Array<number | null>;
      results: Array<{ status: string; reward: number | null }>;
    }>();
    const ok = body.results.filter((r) => r.status === 'ok');
    const timedOut = body.results.filter((r) => r.status === 'timeout');
    expect(ok.length + timedOut.length).toBe(32);
    // ~16 expected; generous margins for a loaded 2-core machine.
    expect(ok.length).toBeGreaterThanOrEqual(8);
    expect(timedOut.length).toBeGreaterThanOrEqual(1);
    for (const r of ok) expect([0, 1]).toContain(r.reward);
    for (const r of timedOut) expect(r.reward).toBeNull();
    // The completed rewards are the right ones (even candidates are GOOD → 1).
    body.results.forEach((r, i) => {
      if (r.status === 'ok') expect(r.reward).toBe(i % 2 === 0 ? 1 : 0);
    });
    // Few evaluator calls were wasted: judgments that started their second stage mostly finished.
    const evaluatorCalls = h.fake.calls.filter((c) => c.role === 'evaluator').length;
    expect(evaluatorCalls - ok.length).toBeLessThanOrEqual(4);
    expect(await counterValue(h.metrics.judgments, { status: 'ok' })).toBe(ok.length);
  });
});
