import { describe, expect, it } from 'vitest';
import { rates, toConfusion, type Confusion } from '../../../src/ablations/stats/confusion.js';
import { pairedRates, ratesWithCi, type PairedCluster } from '../../../src/ablations/stats/rates.js';

describe('rates', () => {
  it('computes P/R/F1/accuracy/specificity on a fixed confusion matrix', () => {
    const r = rates({ tp: 40, fp: 10, tn: 30, fn: 20 });
    expect(r.precision).toBeCloseTo(0.8, 12);
    expect(r.recall).toBeCloseTo(40 / 60, 12);
    expect(r.f1).toBeCloseTo(80 / 110, 12); // 2PR/(P+R) = 2·0.8·0.6667/1.4667 = 0.72727
    expect(r.accuracy).toBeCloseTo(0.7, 12);
    expect(r.specificity).toBeCloseTo(0.75, 12);
  });

  it('returns null, not NaN, for an empty denominator', () => {
    const r = rates({ tp: 0, fp: 0, tn: 5, fn: 0 });
    expect(r.precision).toBeNull();
    expect(r.recall).toBeNull();
    expect(r.f1).toBeNull();
    expect(r.specificity).toBe(1);
  });

  it('counts label/prediction pairs', () => {
    const cm = toConfusion([
      { label: 1, predicted: 1 },
      { label: 1, predicted: 0 },
      { label: 0, predicted: 1 },
      { label: 0, predicted: 0 },
      { label: 0, predicted: 0 },
    ]);
    expect(cm).toEqual({ tp: 1, fn: 1, fp: 1, tn: 2 });
  });
});

/** n clusters of 3 items each with a repeating pattern of outcomes (precision 0.75, recall 0.6 overall). */
function clusters(n: number): Confusion[] {
  const patterns: Confusion[] = [
    { tp: 2, fp: 0, tn: 1, fn: 0 },
    { tp: 1, fp: 1, tn: 0, fn: 1 },
    { tp: 0, fp: 1, tn: 1, fn: 1 },
    { tp: 3, fp: 0, tn: 0, fn: 0 },
    { tp: 0, fp: 0, tn: 1, fn: 2 },
  ];
  return Array.from({ length: n }, (_, i) => patterns[i % patterns.length]!);
}

describe('ratesWithCi', () => {
  it('gives proportions exact intervals and F1 a resampled one, all around the point, narrowing with n', () => {
    const small = ratesWithCi(clusters(20), { seed: 1, resamples: 2000, method: 'percentile' });
    const large = ratesWithCi(clusters(400), { seed: 1, resamples: 2000, method: 'percentile' });
    expect(small.point.precision).toBeCloseTo(large.point.precision!, 12);
    for (const r of [small, large]) {
      for (const name of ['precision', 'recall', 'f1', 'accuracy', 'specificity'] as const) {
        const { lo, hi } = r.ci[name];
        expect(lo!).toBeLessThanOrEqual(r.point[name]!);
        expect(hi!).toBeGreaterThanOrEqual(r.point[name]!);
        expect(hi! - lo!).toBeGreaterThan(0);
      }
      expect(r.ci.precision.method).toBe('clopper-pearson');
      expect(r.ci.f1.method).toBe('percentile');
    }
    const width = (r: typeof small) => r.ci.f1.hi! - r.ci.f1.lo!;
    // Width shrinks ~ 1/sqrt(n): 20× the clusters → ~4.5× narrower; demand at least 3×.
    expect(width(large) * 3).toBeLessThan(width(small));
    expect(small.ci.f1.resamples).toBe(2000);
  });

  it('bounds a degenerate F1 by the exact precision and recall intervals instead of printing [1, 1]', () => {
    // 6 clusters, every positive found, no false positive: every resample has F1 = 1.
    const perfect = Array.from({ length: 60 }, (_, i) =>
      i < 6 ? { tp: 1, fp: 0, tn: 0, fn: 0 } : { tp: 0, fp: 0, tn: 1, fn: 0 },
    );
    const r = ratesWithCi(perfect, { seed: 1, method: 'percentile' });
    expect(r.point.f1).toBe(1);
    expect(r.ci.f1.method).toBe('clopper-pearson-bound');
    expect(r.ci.f1.hi).toBe(1);
    expect(r.ci.f1.lo!).toBeLessThan(0.75);
    expect(r.ci.f1.note).toMatch(/zero width/);
    // Precision 6/6: its own exact interval is far from [1, 1] too.
    expect(r.ci.precision.lo!).toBeLessThan(0.6);
  });
});

/** Per cluster two classifiers and who alone was right, from per-item (label, a, b) triples. */
function paired(items: readonly (readonly [label: 0 | 1, a: 0 | 1, b: 0 | 1])[][]): PairedCluster[] {
  return items.map((cluster) => ({
    a: toConfusion(cluster.map(([label, a]) => ({ label, predicted: a }))),
    b: toConfusion(cluster.map(([label, , b]) => ({ label, predicted: b }))),
    onlyA: cluster.filter(([l, a, b]) => a === l && b !== l).length,
    onlyB: cluster.filter(([l, a, b]) => b === l && a !== l).length,
  }));
}

describe('pairedRates', () => {
  it('is exactly 0 with p = 1 and no zero-width interval for identical classifiers, but an exact bound', () => {
    const same = paired(
      Array.from({ length: 60 }, (_, i) => [
        [1, i % 3 === 0 ? 0 : 1, i % 3 === 0 ? 0 : 1],
        [0, i % 4 === 0 ? 1 : 0, i % 4 === 0 ? 1 : 0],
      ]),
    );
    for (const method of ['percentile', 'jackknife-t'] as const) {
      const d = pairedRates(same, { seed: 9, method });
      expect(d.f1.point).toBe(0);
      expect([d.f1.ci.lo, d.f1.ci.hi]).toEqual([null, null]);
      // 0 discordant clusters of 60: 1 − 0.025^(1/60).
      expect(d.f1.ci.discordantBound).toBeCloseTo(1 - 0.025 ** (1 / 60), 12);
      expect(d.f1.ci.note).toMatch(/agree on every item.*6\.0% of clusters/);
      expect(d.f1.p).toBe(1);
      expect(d.mcnemar).toEqual({ b: 0, c: 0, exactP: 1, clusteredP: 1 });
    }
  });

  it('is positive with an interval above 0 and a small p when a is uniformly better', () => {
    const better = paired(
      Array.from({ length: 60 }, (_, i) => [
        [1, 1, (i % 2) as 0 | 1],
        [0, 0, i % 3 === 0 ? 1 : 0],
      ]),
    );
    for (const method of ['percentile', 'jackknife-t'] as const) {
      const d = pairedRates(better, { seed: 9, method });
      expect(d.f1.point!).toBeGreaterThan(0.2);
      expect(d.f1.ci.lo!).toBeGreaterThan(0);
      expect(d.f1.p!).toBeLessThan(0.01);
      expect(d.mcnemar.b).toBeGreaterThan(0);
      expect(d.mcnemar.c).toBe(0);
    }
  });
});
