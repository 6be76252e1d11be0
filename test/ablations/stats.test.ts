import { describe, expect, it } from 'vitest';
import {
  calibration,
  clusteredBootstrap,
  createRng,
  fleissKappa,
  mcnemarExact,
  pairedF1Difference,
  proportionWithCi,
  rates,
  ratesWithCi,
  reviewerCalibration,
  toConfusion,
  type Confusion,
} from '../../src/ablations/stats.js';

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

describe('createRng', () => {
  it('is deterministic per seed and different across seeds', () => {
    const a = createRng(7);
    const b = createRng(7);
    const c = createRng(8);
    const xs = Array.from({ length: 5 }, () => a());
    expect(Array.from({ length: 5 }, () => b())).toEqual(xs);
    expect(Array.from({ length: 5 }, () => c())).not.toEqual(xs);
    for (const x of xs) expect(x >= 0 && x < 1).toBe(true);
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

describe('clustered bootstrap', () => {
  it('covers the point estimate and narrows as n grows (2000 resamples)', () => {
    const small = ratesWithCi(clusters(20), { seed: 1, resamples: 2000 });
    const large = ratesWithCi(clusters(400), { seed: 1, resamples: 2000 });
    expect(small.point.precision).toBeCloseTo(large.point.precision!, 12);
    for (const r of [small, large]) {
      for (const name of ['precision', 'recall', 'f1', 'accuracy', 'specificity'] as const) {
        const { lo, hi } = r.ci[name];
        expect(lo).not.toBeNull();
        expect(lo!).toBeLessThanOrEqual(r.point[name]!);
        expect(hi!).toBeGreaterThanOrEqual(r.point[name]!);
        expect(hi! - lo!).toBeGreaterThan(0);
      }
    }
    const width = (r: typeof small) => r.ci.f1.hi! - r.ci.f1.lo!;
    // Width shrinks ~ 1/sqrt(n): 20× the clusters → ~4.5× narrower; demand at least 3×.
    expect(width(large) * 3).toBeLessThan(width(small));
    expect(small.ci.f1.resamples).toBe(2000);
  });

  it('is reproducible with the same seed and differs with another seed', () => {
    const a = ratesWithCi(clusters(30), { seed: 42 });
    const b = ratesWithCi(clusters(30), { seed: 42 });
    const c = ratesWithCi(clusters(30), { seed: 43 });
    expect(b.ci).toEqual(a.ci);
    expect(c.ci.f1).not.toEqual(a.ci.f1);
    expect(a.ci.f1.resamples).toBe(2000);
  });

  it('resamples whole clusters: a cluster-constant statistic stays on the cluster values', () => {
    // Two clusters of very different size; each resample is a multiset of whole clusters.
    const data = [
      [1, 1, 1, 1],
      [0, 0],
    ];
    const seen = new Set<number>();
    const ci = clusteredBootstrap(
      data,
      {
        mean: (sample) => {
          const flat = sample.flat();
          const m = flat.reduce((s, x) => s + x, 0) / flat.length;
          seen.add(m);
          return m;
        },
      },
      { seed: 3, resamples: 2000 },
    );
    // Possible draws: {A,A} → 1, {B,B} → 0, {A,B} → 4/6.
    expect([...seen].sort()).toEqual([0, 1, 4 / 6].sort());
    expect(ci.mean.lo).toBe(0);
    expect(ci.mean.hi).toBe(1);
  });

  it('gives a proportion with a CI around it', () => {
    const p = proportionWithCi(
      Array.from({ length: 50 }, (_, i) => ({ hits: i % 10 === 0 ? 1 : 0, trials: 1 })),
      { seed: 5 },
    );
    expect(p.rate).toBeCloseTo(0.1, 12);
    expect(p.ci.lo!).toBeLessThan(0.1);
    expect(p.ci.hi!).toBeGreaterThan(0.1);
  });
});

describe('pairedF1Difference', () => {
  it('is exactly 0 with a degenerate CI for identical classifiers', () => {
    const cs = clusters(25).map((cm) => ({ a: cm, b: cm }));
    const d = pairedF1Difference(cs, { seed: 9 });
    expect(d.difference).toBe(0);
    expect(d.ci.lo).toBe(0);
    expect(d.ci.hi).toBe(0);
  });

  it('is positive with a CI above 0 when a is uniformly better', () => {
    const cs = clusters(60).map((cm) => ({
      a: { tp: cm.tp + cm.fn, fn: 0, fp: 0, tn: cm.tn + cm.fp },
      b: cm,
    }));
    const d = pairedF1Difference(cs, { seed: 9 });
    expect(d.f1A).toBe(1);
    expect(d.difference!).toBeGreaterThan(0.2);
    expect(d.ci.lo!).toBeGreaterThan(0);
  });
});

describe('fleissKappa', () => {
  it('is 1 for unanimous raters', () => {
    expect(
      fleissKappa([
        [3, 0],
        [0, 3],
        [3, 0],
        [0, 3],
      ]),
    ).toBeCloseTo(1, 12);
  });

  it('matches the published example (Fleiss 1971 as on Wikipedia: 10 subjects, 14 raters) κ ≈ 0.210', () => {
    const table = [
      [0, 0, 0, 0, 14],
      [0, 2, 6, 4, 2],
      [0, 0, 3, 5, 6],
      [0, 3, 9, 2, 0],
      [2, 2, 8, 1, 1],
      [7, 7, 0, 0, 0],
      [3, 2, 6, 3, 0],
      [2, 5, 3, 2, 2],
      [6, 5, 2, 1, 0],
      [0, 2, 2, 3, 7],
    ];
    expect(fleissKappa(table)!).toBeCloseTo(0.20993, 4);
  });

  it('is negative for systematic disagreement and null when undefined', () => {
    expect(
      fleissKappa([
        [1, 1],
        [1, 1],
      ]),
    ).toBeCloseTo(-1, 12);
    expect(fleissKappa([[2, 0]])).toBeNull();
    expect(() =>
      fleissKappa([
        [2, 0],
        [1, 0],
      ]),
    ).toThrow(/expected 2/);
  });
});

describe('mcnemarExact', () => {
  it('matches the binomial tail on known tables', () => {
    // b=2, c=8: 2·P(X≤2 | n=10) = 2·(1+10+45)/1024
    expect(mcnemarExact(2, 8)).toBeCloseTo((2 * 56) / 1024, 12);
    expect(mcnemarExact(8, 2)).toBeCloseTo((2 * 56) / 1024, 12);
    // b=0, c=5: 2/32
    expect(mcnemarExact(0, 5)).toBeCloseTo(0.0625, 12);
    expect(mcnemarExact(5, 5)).toBe(1);
    expect(mcnemarExact(0, 0)).toBe(1);
    // Large n stays finite: b=100, c=150 is clearly significant but > 0.
    const p = mcnemarExact(100, 150);
    expect(p).toBeGreaterThan(0);
    expect(p).toBeLessThan(0.01);
  });
});

describe('calibration', () => {
  it('has ECE ≈ 0 on a perfectly calibrated set', () => {
    const rows: { score: number; label: 0 | 1 }[] = [];
    for (let b = 0; b < 10; b++) {
      const score = b / 10 + 0.05;
      for (let i = 0; i < 20; i++) rows.push({ score, label: i < Math.round(score * 20) ? 1 : 0 });
    }
    const c = calibration(rows);
    expect(c.ece!).toBeLessThan(1e-9);
    // Brier of a calibrated forecaster = mean p(1−p) over bins.
    const expected =
      Array.from({ length: 10 }, (_, b) => (b / 10 + 0.05) * (1 - (b / 10 + 0.05))).reduce((s, x) => s + x) /
      10;
    expect(c.brier!).toBeCloseTo(expected, 9);
  });

  it('measures over-confidence', () => {
    const rows = Array.from({ length: 100 }, (_, i) => ({ score: 0.95, label: (i % 2) as 0 | 1 }));
    const c = calibration(rows);
    expect(c.ece!).toBeCloseTo(0.45, 9);
    expect(c.bins[9]!.n).toBe(100);
    expect(c.brier!).toBeCloseTo((0.05 ** 2 + 0.95 ** 2) / 2, 9);
  });
});

describe('reviewerCalibration', () => {
  it('calls an always-match reviewer permissive', () => {
    const r = reviewerCalibration({ tp: 10, fn: 0, fp: 30, tn: 0 });
    expect(r).toMatchObject({ tpr: 1, tnr: 0, fpr: 1, fnr: 0, bias: 'permissive' });
  });

  it('calls an always-no_match reviewer strict and a symmetric one balanced', () => {
    expect(reviewerCalibration({ tp: 0, fn: 10, fp: 0, tn: 30 }).bias).toBe('strict');
    expect(reviewerCalibration({ tp: 90, fn: 10, fp: 12, tn: 88 }).bias).toBe('balanced');
    expect(reviewerCalibration({ tp: 90, fn: 10, fp: 16, tn: 84 }).bias).toBe('permissive');
    expect(reviewerCalibration({ tp: 0, fn: 0, fp: 1, tn: 1 }).bias).toBeNull();
  });
});
