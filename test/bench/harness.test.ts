/** The bench harness end to end with tiny numbers: real fake-backend, server and load processes. */
import { afterEach, describe, expect, it } from 'vitest';
import { BLOCK } from '../../bench/data.js';
import { runSuite } from '../../bench/harness.js';
import { DEFAULT_OPTIONS } from '../../bench/options.js';
import { killTracked, liveChildren } from '../../bench/procs.js';
import { suiteMarkdown, targets } from '../../bench/report.js';

afterEach(() => {
  killTracked(); // only children this file started, by PID
});

describe('bench harness', () => {
  it('runs every scenario end to end with tiny numbers and reaps its processes', async () => {
    const n = 2 * BLOCK;
    const result = await runSuite({
      ...DEFAULT_OPTIONS,
      runs: 1,
      latencyMs: 5,
      inflight: BLOCK,
      judgments: n,
      warmupJudgments: BLOCK,
      lightGroups: 1,
      maxScenarioSeconds: 30,
      server: 'src',
    });
    const run = result.runs[0]!;
    for (const scenario of [run.groups, run.rollouts, run.groupsCached, run.rolloutsCached]) {
      expect(scenario.load.rewarded, scenario.name).toBe(n);
      expect(scenario.load.failed, scenario.name).toBe(0);
    }
    // Fresh pairs cost 3 backend calls each; replays are all cache hits.
    expect(run.groups.backendCalls).toBe(3 * n);
    expect(run.rollouts.backendCalls).toBe(3 * n);
    expect(run.groupsCached.backendCalls).toBe(0);
    expect(run.groupsCached.load.cached).toBe(n);
    expect(run.rolloutsCached.backendCalls).toBe(0);
    expect(run.light.load.rewarded).toBe(BLOCK);
    expect(run.floor.result.calls).toBe(3 * n);
    expect(run.floor.result.failedCalls).toBe(0);
    expect(run.peakRssMb).toBeGreaterThan(0);
    expect(result.limitJudgmentsPerSecond).toBe(BLOCK / ((2 * 5) / 1000));
    expect(targets(result)).toHaveLength(6);
    expect(suiteMarkdown(result)).toContain('ratio to floor');
    expect(liveChildren()).toBe(0);
  }, 120_000);
});
