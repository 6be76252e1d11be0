import { describe, expect, it } from 'vitest';
import { BLOCK, groupBody, loadCorpus, rolloutBody, tripleAt } from '../../bench/data.js';
import { replayOf } from '../../bench/harness.js';
import { sumMetric } from '../../bench/measure.js';
import { summarizeProfile } from '../../bench/profile.js';
import { percentile, spread } from '../../bench/stats.js';

describe('bench data', () => {
  const corpus = loadCorpus();

  it('gives distinct (ground truth, candidate) pairs over a long range', () => {
    const seen = new Set<string>();
    for (let k = 0; k < 20_000; k++) {
      const t = tripleAt(corpus, k);
      seen.add(`${t.groundTruth}\u0000${t.candidate}`);
    }
    expect(seen.size).toBe(20_000);
  });

  it('makes a block a group of unique, non-degenerate candidates of one paper', () => {
    const body = JSON.parse(groupBody(corpus, 3 * BLOCK, BLOCK, 'analysts-2')) as {
      ground_truth: string;
      candidates: string[];
    };
    expect(new Set(body.candidates).size).toBe(BLOCK);
    expect(body.candidates.every((c) => c.trim().length >= 20)).toBe(true);
    expect(body.ground_truth).toBe(tripleAt(corpus, 3 * BLOCK + 5).groundTruth);
    expect(() => groupBody(corpus, 3, BLOCK, 'analysts-2')).toThrow();
  });

  it('builds an OpenRLHF body whose query is the prompt plus the rollout', () => {
    const body = JSON.parse(rolloutBody(corpus, 7)) as { query: string[]; prompts: string[] };
    expect(body.query[0]!.startsWith(body.prompts[0]!)).toBe(true);
    expect(body.query[0]).toContain(tripleAt(corpus, 7).candidate);
  });
});

describe('bench helpers', () => {
  it('computes nearest-rank percentiles and median/min/max', () => {
    expect(percentile([5, 1, 4, 2, 3], 50)).toBe(3);
    expect(percentile([1, 2, 3, 4, 100], 99)).toBe(100);
    expect(spread([3, 1, 2, 10])).toEqual({ median: 2.5, min: 1, max: 10, n: 4 });
  });

  it('sums a Prometheus counter over label sets, optionally filtered', () => {
    const text = [
      '# TYPE reward_cache_lookups_total counter',
      'reward_cache_lookups_total{result="hit"} 7',
      'reward_cache_lookups_total{result="miss"} 3',
      'reward_cache_lookups_total_other 100',
    ].join('\n');
    expect(sumMetric(text, 'reward_cache_lookups_total')).toBe(10);
    expect(sumMetric(text, 'reward_cache_lookups_total', 'result="hit"')).toBe(7);
  });

  it('attributes self and inclusive time in a cpuprofile', () => {
    const frame = (functionName: string, url = 'file:///app/dist/server/http/app.js') => ({
      functionName,
      url,
      lineNumber: 0,
      columnNumber: 0,
      scriptId: '1',
    });
    const summary = summarizeProfile({
      nodes: [
        { id: 1, callFrame: frame('(root)', ''), children: [2, 4] },
        { id: 2, callFrame: frame('handler'), children: [3] },
        { id: 3, callFrame: frame('parse', 'file:///app/node_modules/zod/index.js') },
        { id: 4, callFrame: frame('(idle)', '') },
      ],
      samples: [3, 3, 2, 4, 3],
      timeDeltas: [0, 1000, 1000, 1000, 1000],
      startTime: 0,
      endTime: 5000,
    });
    expect(summary.idleMs).toBe(1);
    expect(summary.self[0]).toMatchObject({ name: 'parse', category: 'zod', ms: 2 });
    expect(summary.inclusive.find((r) => r.name === 'handler')?.ms).toBe(3);
  });
});

describe('replayOf (the cache-hit replay of a scenario)', () => {
  const options = { groupSize: 16, cacheSize: 10_000 };
  const load = (mode: 'groups' | 'rollouts', requests: number) => ({ load: { mode, requests } }) as never;

  it('replays every completed block when they all fit in the cache', () => {
    expect(replayOf(load('groups', 10), 320, options)).toEqual({ start: 320, count: 160 });
    expect(replayOf(load('rollouts', 10 * BLOCK + 3), 0, options)).toEqual({ start: 0, count: 10 * BLOCK });
  });

  it('replays only the last blocks that fit in the cache', () => {
    const r = replayOf(load('groups', 1000), 0, { groupSize: 16, cacheSize: 160 });
    expect(r).toEqual({ start: 990 * BLOCK, count: 160 });
  });
});
