import { describe, expect, it } from 'vitest';
import {
  bootstrapSums,
  estimate,
  jackknifeSums,
  REPORT_METHOD,
  type SumStatistic,
} from '../../../src/ablations/stats/clustered.js';

const ratioOf: SumStatistic = ([x = 0, n = 0]) => (n === 0 ? null : x / n);

describe('bootstrapSums', () => {
  it('resamples whole clusters: a cluster-constant statistic stays on the cluster values', () => {
    // Two clusters of very different size (4 items all 1, 2 items all 0).
    const { mean } = bootstrapSums(
      [
        [4, 4],
        [0, 2],
      ],
      { mean: ratioOf },
      { seed: 3, resamples: 2000 },
    );
    // Possible draws: {A,A} → 1, {B,B} → 0, {A,B} → 4/6.
    expect([...new Set(mean.values)].sort()).toEqual([0, 1, 4 / 6].sort());
    expect(mean.undefined).toBe(0);
  });

  it('is reproducible with the same seed and differs with another', () => {
    const rows = Array.from({ length: 30 }, (_, i) => [i % 3, 3]);
    const a = bootstrapSums(rows, { r: ratioOf }, { seed: 42 });
    expect(bootstrapSums(rows, { r: ratioOf }, { seed: 42 })).toEqual(a);
    expect(bootstrapSums(rows, { r: ratioOf }, { seed: 43 }).r.values).not.toEqual(a.r.values);
    expect(a.r.values).toHaveLength(2000);
  });
});

describe('estimate', () => {
  it('reports by the jackknife-t at every cluster count (the percentile bootstrap undercovered at 60–100)', () => {
    expect(REPORT_METHOD).toBe('jackknife-t');
  });

  it('counts undefined resamples and refuses an interval when more than α/2 of them are undefined', () => {
    // 1 of 40 clusters holds every trial: most resamples miss it and the rate is undefined there.
    const rows = [[3, 5], ...Array.from({ length: 39 }, () => [0, 0]), [0, 0]];
    const some = [[3, 5], [1, 4], ...Array.from({ length: 58 }, () => [0, 1])];
    const { rate } = estimate(
      rows.map((r) => [...r, 1]),
      { rate: { fn: ratioOf, scale: 'rate' } },
      {
        seed: 1,
        method: 'percentile',
      },
    );
    expect(rate.point).toBeCloseTo(0.6, 12);
    expect(rate.ci.undefinedResamples).toBeGreaterThan(0.025 * 2000);
    expect(rate.ci.lo).toBeNull();
    expect(rate.ci.note).toMatch(/undefined in \d+ of 2000 resamples/);
    const ok = estimate(some, { rate: { fn: ratioOf, scale: 'rate' } }, { seed: 1, method: 'percentile' });
    expect(ok.rate.ci.lo).not.toBeNull();
  });

  it('never prints a zero-width interval from dropped resamples', () => {
    // A rate that is 1 wherever defined, undefined in a few resamples (the one cluster with trials is small).
    const rows = [[2, 2, 1], [1, 1, 1], ...Array.from({ length: 58 }, () => [0, 0, 1])];
    const { rate } = estimate(
      rows,
      { rate: { fn: ratioOf, scale: 'rate' } },
      { seed: 5, method: 'percentile' },
    );
    expect(rate.point).toBe(1);
    expect(rate.ci.lo).toBeNull();
    expect(rate.ci.hi).toBeNull();
    expect(rate.ci.note).toMatch(/undefined|zero width/);
  });

  it('reports the Monte-Carlo error of bootstrap endpoints, none for the deterministic jackknife', () => {
    const rows = Array.from({ length: 80 }, (_, i) => [i % 5 === 0 ? 2 : i % 2, 2]);
    const boot = estimate(rows, { r: { fn: ratioOf, scale: 'rate' } }, { seed: 2, method: 'percentile' });
    const jack = estimate(rows, { r: { fn: ratioOf, scale: 'rate' } }, { seed: 2, method: 'jackknife-t' });
    expect(boot.r.ci.mcError).toBeGreaterThan(0);
    expect(boot.r.ci.mcError).toBeLessThan(0.02);
    expect(jack.r.ci.mcError).toBe(0);
    expect(jack.r.ci.lo!).toBeLessThan(boot.r.point!);
    expect(jack.r.ci.hi!).toBeGreaterThan(boot.r.point!);
  });

  it('jackknife: an undefined leave-one-out or a boundary estimate gives no interval, and says why', () => {
    const lonely = [[1, 2], ...Array.from({ length: 9 }, () => [0, 0]), [0, 0]];
    const a = estimate(
      lonely.map((r) => [...r, 1]),
      { r: { fn: ratioOf, scale: 'rate' } },
      { seed: 1, method: 'jackknife-t' },
    );
    expect(a.r.ci.lo).toBeNull();
    expect(a.r.ci.note).toMatch(/undefined with 1 of 11 clusters left out/);
    const boundary = Array.from({ length: 10 }, () => [2, 2]);
    const b = estimate(boundary, { r: { fn: ratioOf, scale: 'rate' } }, { seed: 1, method: 'jackknife-t' });
    expect(b.r.ci.lo).toBeNull();
    expect(b.r.ci.note).toMatch(/boundary/);
    expect(jackknifeSums(boundary, ratioOf)).toEqual(Array.from({ length: 10 }, () => 1));
  });

  it('gives a difference a two-sided p-value consistent with its interval', () => {
    const diff: SumStatistic = ([a = 0, b = 0, n = 0]) => (n === 0 ? null : (a - b) / n);
    const rows = Array.from({ length: 60 }, (_, i) => [i % 2, i % 3 === 0 ? 1 : 0, 1]);
    for (const method of ['percentile', 'jackknife-t'] as const) {
      const { d } = estimate(rows, { d: { fn: diff, scale: 'difference' } }, { seed: 4, method });
      const excludes = d.ci.lo! > 0 || d.ci.hi! < 0;
      expect(d.p! < 0.05).toBe(excludes);
    }
  });
});
