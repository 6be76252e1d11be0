/** What the load generator counts from the server's answers (bench/load-tally.ts), without a server. */
import { describe, expect, it } from 'vitest';

import { createLoadTally } from '../../bench/load-tally.js';

const group = (results: Array<{ status: string; cached?: boolean; latency_ms?: number; error?: string }>) =>
  JSON.stringify({
    rewards: results.map((r) => (r.status === 'ok' || r.status === 'rejected_input' ? 1 : null)),
    results,
  });

describe('createLoadTally', () => {
  it('counts a group’s rewarded, failed and cached items, their statuses and server latencies', () => {
    const tally = createLoadTally('groups');
    tally.answered(
      200,
      group([
        { status: 'ok', cached: true, latency_ms: 5 },
        { status: 'ok', latency_ms: 7 },
        { status: 'judge_error', latency_ms: 9, error: 'RW_JUDGE_UNAVAILABLE' },
      ]),
      3,
      40,
    );
    const r = tally.finish({ requests: 1, wallMs: 100, cpuMs: 3, timedOut: false });
    expect(r).toMatchObject({ requests: 1, judgments: 3, rewarded: 2, failed: 1, cached: 1, wallMs: 100 });
    expect(r.statuses).toEqual({ '200': 1 });
    expect(r.itemStatuses).toEqual({ ok: 2, judge_error: 1 });
    expect(r.firstError).toBe('item judge_error: RW_JUDGE_UNAVAILABLE');
    expect(r.latency).toEqual({ p50: 40, p90: 40, p99: 40, max: 40 });
    expect(r.itemLatency).toMatchObject({ p50: 7, max: 9 });
  });

  it('counts every item of a refused request and of one that got no answer as failed', () => {
    const tally = createLoadTally('rollouts');
    tally.answered(503, '{"code":"RW_OVERLOADED"}', 1, 2);
    tally.failed(new Error('socket hang up'), 1);
    const r = tally.finish({ requests: 2, wallMs: 10, cpuMs: 1, timedOut: true });
    expect(r).toMatchObject({ judgments: 2, rewarded: 0, failed: 2, timedOut: true });
    expect(r.statuses).toEqual({ '503': 1, error: 1 });
    expect(r.firstError).toBe('HTTP 503: {"code":"RW_OVERLOADED"}');
    expect(r.itemLatency).toBeUndefined();
  });

  it('keeps the first error only, cut at 500 characters', () => {
    const tally = createLoadTally('rollouts');
    tally.answered(500, 'x'.repeat(2000), 1, 1);
    tally.failed(new Error('later'), 1);
    expect(tally.finish({ requests: 2, wallMs: 1, cpuMs: 0, timedOut: false }).firstError).toHaveLength(500);
  });
});
