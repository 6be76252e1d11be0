import { describe, expect, it } from 'vitest';
import { fleissKappa } from '../../../src/ablations/stats/agreement.js';
import {
  calibration,
  reviewerCalibration,
  type BiasCluster,
} from '../../../src/ablations/stats/calibration.js';

describe('calibration', () => {
  it('has ECE ≈ 0 on a perfectly calibrated set and keeps the score kind', () => {
    const rows: { score: number; label: 0 | 1 }[] = [];
    for (let b = 0; b < 10; b++) {
      const score = b / 10 + 0.05;
      for (let i = 0; i < 20; i++) rows.push({ score, label: i < Math.round(score * 20) ? 1 : 0 });
    }
    const c = calibration(rows, 'confidence');
    expect(c.kind).toBe('confidence');
    expect(c.ece!).toBeLessThan(1e-9);
    // Brier of a calibrated forecaster = mean p(1−p) over bins.
    const expected =
      Array.from({ length: 10 }, (_, b) => (b / 10 + 0.05) * (1 - (b / 10 + 0.05))).reduce((s, x) => s + x) /
      10;
    expect(c.brier!).toBeCloseTo(expected, 9);
  });

  it('measures over-confidence', () => {
    const rows = Array.from({ length: 100 }, (_, i) => ({ score: 0.95, label: (i % 2) as 0 | 1 }));
    const c = calibration(rows, 'vote-share');
    expect(c.ece!).toBeCloseTo(0.45, 9);
    expect(c.bins[9]!.n).toBe(100);
    expect(c.brier!).toBeCloseTo((0.05 ** 2 + 0.95 ** 2) / 2, 9);
  });
});

/**
 * 100 clusters: each has 1 positive, 1 hard negative and 1 easy negative. The reviewer misses 20% of the
 * positives, accepts 20% of the hard negatives and no easy negative.
 */
function reviewer(fnEvery: number, hardFpEvery: number): BiasCluster[] {
  return Array.from({ length: 100 }, (_, i) => {
    const fn = i % fnEvery === 0 ? 1 : 0;
    const fp = i % hardFpEvery === 1 ? 1 : 0;
    return { all: { tp: 1 - fn, fn, fp, tn: 2 - fp }, hard: { hits: fp, trials: 1 } };
  });
}

describe('reviewerCalibration', () => {
  it('measures the bias on hard negatives: easy negatives do not make a reviewer look strict', () => {
    const c = reviewerCalibration(reviewer(5, 5), { seed: 1, hardNegatives: true });
    expect(c.negatives).toBe('hard_negative');
    expect(c.negativeFpr.rate).toBeCloseTo(0.2, 12);
    expect(c.positiveFnr.rate).toBeCloseTo(0.2, 12);
    expect(c.difference.point).toBeCloseTo(0, 12);
    expect(c.bias).toBe('balanced');
    // Over all negatives the same reviewer has FPR 0.1 vs FNR 0.2 and would be called strict.
    const all = reviewerCalibration(reviewer(5, 5), { seed: 1, hardNegatives: false });
    expect(all.fpr).toBeCloseTo(0.1, 12);
    expect(all.bias).toBe('strict');
  });

  it('says whether the interval supports the label', () => {
    const permissive = reviewerCalibration(reviewer(10, 2), { seed: 1, hardNegatives: true });
    expect(permissive.bias).toBe('permissive');
    expect(permissive.difference.ci.lo!).toBeGreaterThan(0);
    expect(permissive.shown).toBe(true);
    // Balanced on the point, but 100 clusters cannot show |FPR − FNR| ≤ 0.05.
    const balanced = reviewerCalibration(reviewer(5, 5), { seed: 1, hardNegatives: true });
    expect(balanced.shown).toBe(false);
    expect(reviewerCalibration([], { seed: 1, hardNegatives: true }).bias).toBeNull();
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
