import { describe, expect, it } from 'vitest';
import {
  binomialCdf,
  clopperPearson,
  phi,
  proportionDifference,
  wilson,
} from '../../src/ablations/calibrate/binomial.js';
import {
  betaBinomialPmf,
  betaBinomialPrediction,
  independentPrediction,
  jointPrediction,
  type Voter,
} from '../../src/ablations/calibrate/condorcet.js';
import { calibrateMember, errorCorrelations, type VoteTable } from '../../src/ablations/calibrate/members.js';
import type { DatasetItem } from '../../src/ablations/dataset.js';

describe('binomial intervals', () => {
  it('Clopper–Pearson matches closed forms and tabulated values', () => {
    // x = 0: hi = 1 − (α/2)^(1/n); x = n: lo = (α/2)^(1/n).
    const zero = clopperPearson(0, 10);
    expect(zero.lo).toBe(0);
    expect(zero.hi).toBeCloseTo(1 - 0.025 ** (1 / 10), 9);
    const all = clopperPearson(10, 10);
    expect(all.lo).toBeCloseTo(0.025 ** (1 / 10), 9);
    expect(all.hi).toBe(1);
    // 5/10: qbeta(0.025, 5, 6) = 0.187086, qbeta(0.975, 6, 5) = 0.812914 (R).
    const half = clopperPearson(5, 10);
    expect(half.lo).toBeCloseTo(0.187086, 5);
    expect(half.hi).toBeCloseTo(0.812914, 5);
    // The bound is where the tail is exactly α/2.
    expect(binomialCdf(4, 10, half.lo ?? 0)).toBeCloseTo(0.975, 9);
    expect(clopperPearson(0, 0).rate).toBeNull();
  });

  it('Wilson and the Newcombe difference match hand-computed values', () => {
    // 5/10, z = 1.959964: centre 0.5, half = z·sqrt(0.025 + z²/400)/(1 + z²/10) = 0.263403.
    const w = wilson(5, 10);
    expect(w.lo).toBeCloseTo(0.236597, 5);
    expect(w.hi).toBeCloseTo(0.763403, 5);
    const d = proportionDifference(5, 10, 5, 10);
    expect(d?.point).toBe(0);
    expect(d?.lo).toBeCloseTo(-Math.SQRT2 * 0.263403, 4);
    expect(proportionDifference(1, 0, 1, 2)).toBeNull();
  });

  it('phi of error tables', () => {
    expect(phi({ both: 5, firstOnly: 0, secondOnly: 0, neither: 5 })).toBe(1);
    expect(phi({ both: 0, firstOnly: 5, secondOnly: 5, neither: 0 })).toBe(-1);
    // (2·4 − 1·3) / sqrt(3·7·5·5) = 5 / sqrt(525)
    expect(phi({ both: 2, firstOnly: 1, secondOnly: 3, neither: 4 })).toBeCloseTo(5 / Math.sqrt(525), 12);
    expect(phi({ both: 0, firstOnly: 0, secondOnly: 3, neither: 4 })).toBeNull();
  });
});

function item(id: number, label: 0 | 1, kind: DatasetItem['kind']): DatasetItem {
  return {
    id: `i${id}`,
    question: 'q',
    candidate: 'c',
    ground_truth: `gt${id}`,
    label,
    kind,
    source: 's',
    venue: 'v',
    area: 'a',
  };
}

describe('member calibration on a written example', () => {
  // 4 positives, 4 hard negatives, 2 easy negatives. Member "lenient" accepts everything but the easy negatives.
  const items = [
    ...[0, 1, 2, 3].map((i) => item(i, 1, 'positive')),
    ...[4, 5, 6, 7].map((i) => item(i, 0, 'hard_negative')),
    ...[8, 9].map((i) => item(i, 0, 'easy_negative')),
  ];
  const lenient: (0 | 1)[] = [1, 1, 1, 1, 1, 1, 1, 1, 0, 0];
  const fair: (0 | 1)[] = [1, 1, 1, 0, 0, 0, 1, 0, 0, 0];
  const table: VoteTable = {
    members: ['lenient', 'fair'].map((n) => ({
      key: `g/${n}`,
      graph: 'g',
      nodeId: n,
      role: 'judge',
      model: null,
      round: 1,
      stage: 'debate',
    })),
    items,
    clusterOf: items.map((_, i) => i),
    clusters: items.length,
    votes: [lenient, fair],
    confidence: [lenient.map(() => 0.9), fair.map(() => 0.6)],
  };

  it('rates, exact intervals, and a bias label only when the interval excludes balanced', () => {
    const a = calibrateMember(table, 0);
    expect(a?.confusion).toEqual({ tp: 4, fn: 0, fp: 4, tn: 2 });
    expect(a?.tpr.rate).toBe(1);
    expect(a?.fpr.rate).toBeCloseTo(4 / 6, 12);
    // Clustered (ground truths): never narrower than the unclustered exact interval, here wider (few clusters).
    expect(a?.tnr.hi).toBeGreaterThan(1 - clopperPearson(4, 6).lo! + 0.01);
    expect(a?.tnr.designEffect).toBeGreaterThanOrEqual(1);
    expect(a?.accuracy.rate).toBe(0.6);
    // On hard negatives FPR = 4/4 vs FNR 0/4: the Newcombe interval lies above 0 → permissive.
    expect(a?.bias.basis).toBe('hard_negatives');
    expect(a?.bias.fpr.x).toBe(4);
    expect(a?.bias.fpr.n).toBe(4);
    expect(a?.bias.label).toBe('permissive');
    // fair: FNR 1/4, FPR(hard) 1/4: interval contains 0 → balanced.
    const b = calibrateMember(table, 1);
    expect(b?.fnr.rate).toBe(0.25);
    expect(b?.bias.difference?.point).toBe(0);
    expect(b?.bias.label).toBe('balanced');
    expect(b?.meanConfidence.match).toBeCloseTo(0.6, 12);
  });

  it('error correlation: the errors of the two members as a 2×2 table', () => {
    const [pair] = errorCorrelations(table, { seed: 1, resamples: 200 });
    // lenient wrong on 4,5,6,7; fair wrong on 3,6 → both 1 (item 6), only lenient 3, only fair 1, neither 5.
    expect(pair?.table).toEqual({ both: 1, firstOnly: 3, secondOnly: 1, neither: 5 });
    expect(pair?.phi).toBeCloseTo((1 * 5 - 3 * 1) / Math.sqrt(4 * 6 * 2 * 8), 12);
    expect(pair?.ci.lo).not.toBeNull();
    // lenient never errs on positives: no within-positive correlation.
    expect(pair?.phiPositive).toBeNull();
  });
});

describe("the seed's three reviewers (balanced classes)", () => {
  // A: 80 % accurate, FPR 0.30 → TNR 0.70, TPR 0.90. B: 75 %, FNR 0.35 → TPR 0.65, TNR 0.85. C: 70 % balanced.
  const A: Voter = { tpr: 0.9, tnr: 0.7 };
  const B: Voter = { tpr: 0.65, tnr: 0.85 };
  const C: Voter = { tpr: 0.7, tnr: 0.7 };

  it('each member alone', () => {
    expect(independentPrediction('majority', [A], 0.5).accuracy).toBeCloseTo(0.8, 12);
    expect(independentPrediction('majority', [B], 0.5).accuracy).toBeCloseTo(0.75, 12);
    expect(independentPrediction('majority', [C], 0.5).accuracy).toBeCloseTo(0.7, 12);
  });

  it('pairs: a 2-member majority needs both (tie → no_match), so TPR = TPR₁·TPR₂ and FPR = FPR₁·FPR₂', () => {
    const ab = independentPrediction('majority', [A, B], 0.5);
    const ac = independentPrediction('majority', [A, C], 0.5);
    const bc = independentPrediction('majority', [B, C], 0.5);
    // AB: TPR .9·.65 = .585, FPR .3·.15 = .045 → accuracy (.585 + .955)/2 = .77, precision .585/.63.
    expect(ab.tpr).toBeCloseTo(0.585, 12);
    expect(ab.tnr).toBeCloseTo(0.955, 12);
    expect(ab.accuracy).toBeCloseTo(0.77, 12);
    expect(ab.precision).toBeCloseTo(0.585 / 0.63, 12);
    // AC: TPR .63, FPR .09 → accuracy .77, precision .63/.72 = .875, F1 2·.875·.63/1.505.
    expect(ac.accuracy).toBeCloseTo(0.77, 12);
    expect(ac.precision).toBeCloseTo(0.875, 12);
    expect(ac.f1).toBeCloseTo((2 * 0.875 * 0.63) / 1.505, 12);
    // BC: TPR .455, FPR .045 → accuracy .705.
    expect(bc.accuracy).toBeCloseTo(0.705, 12);
    // Best pair: AB and AC tie on accuracy (.77); AC wins on F1 (.7326 vs .7178), AB on precision (.9286).
    expect(ac.f1!).toBeGreaterThan(ab.f1!);
    expect(ab.f1).toBeCloseTo((2 * (0.585 / 0.63) * 0.585) / (0.585 / 0.63 + 0.585), 12);
    // A pair is no better than A alone (.80): the third member is what buys the Condorcet gain.
  });

  it('all three, majority: P(≥ 2 of 3) per class', () => {
    const abc = independentPrediction('majority', [A, B, C], 0.5);
    // Positives: all .4095 + exactly two (.1755 + .2205 + .0455) = .851.
    expect(abc.tpr).toBeCloseTo(0.851, 12);
    // Negatives (FPR .3, .15, .3): all .0135 + exactly two (.0315 + .0765 + .0315) = .153 → TNR .847.
    expect(abc.tnr).toBeCloseTo(0.847, 12);
    expect(abc.accuracy).toBeCloseTo(0.849, 12);
    // Unanimous of three: TPR .4095, FPR .0135.
    const u = independentPrediction('unanimous', [A, B, C], 0.5);
    expect(u.tpr).toBeCloseTo(0.4095, 12);
    expect(u.tnr).toBeCloseTo(1 - 0.0135, 12);
  });

  it('confidence_weighted with confidences: a confident member outvotes two hesitant ones', () => {
    const sure = { tpr: 0.9, tnr: 0.7, confidence: { match: 0.95, no_match: 0.95 } };
    const unsure = { tpr: 0.65, tnr: 0.85, confidence: { match: 0.55, no_match: 0.55 } };
    // A says match, the other two no_match: score = (.95·.95 + 2·.55·.45)/(.95 + 1.1) = .681 > .5 → match.
    const p = independentPrediction('confidence_weighted', [sure, unsure, unsure], 0.5);
    const m = independentPrediction('majority', [sure, unsure, unsure], 0.5);
    // A alone against both: (.95·.05 + 2·.55·.55)/2.05 = .318 → no_match. So the verdict is always A's.
    expect(p.tpr).toBeCloseTo(0.9, 12);
    expect(p.tnr).toBeCloseTo(0.7, 12);
    expect(p.tpr).toBeGreaterThan(m.tpr);
  });
});

describe('correlation-aware predictions', () => {
  it('beta-binomial: ρ = 0 is the binomial, ρ = 1 is one member, pmf sums to 1', () => {
    const pmf = betaBinomialPmf(5, 0.3, 0.2);
    expect(pmf.reduce((s, x) => s + x, 0)).toBeCloseTo(1, 10);
    // Mean n·p, variance n·p·(1−p)·(1 + (n−1)ρ).
    const mean = pmf.reduce((s, x, k) => s + k * x, 0);
    const variance = pmf.reduce((s, x, k) => s + (k - mean) ** 2 * x, 0);
    expect(mean).toBeCloseTo(1.5, 10);
    expect(variance).toBeCloseTo(5 * 0.3 * 0.7 * (1 + 4 * 0.2), 8);
    const member: Voter = { tpr: 0.8, tnr: 0.7 };
    const indep = independentPrediction('majority', [member, member, member], 0.5);
    const rho0 = betaBinomialPrediction('majority', 3, { error: 0.2, rho: 0 }, { error: 0.3, rho: 0 }, 0.5);
    expect(rho0.accuracy).toBeCloseTo(indep.accuracy, 12);
    const rho1 = betaBinomialPrediction('majority', 3, { error: 0.2, rho: 1 }, { error: 0.3, rho: 1 }, 0.5);
    expect(rho1.accuracy).toBeCloseTo(0.75, 12);
    // Correlation shrinks the Condorcet gain monotonically.
    const mid = betaBinomialPrediction(
      'majority',
      3,
      { error: 0.2, rho: 0.5 },
      { error: 0.3, rho: 0.5 },
      0.5,
    );
    expect(mid.accuracy).toBeLessThan(rho0.accuracy);
    expect(mid.accuracy).toBeGreaterThan(rho1.accuracy);
  });

  it('joint: identical members vote like one member, whatever independence says', () => {
    const items = [
      { label: 1 as const, votes: [1, 1, 1] as (0 | 1)[], confidences: [1, 1, 1] },
      { label: 1 as const, votes: [0, 0, 0] as (0 | 1)[], confidences: [1, 1, 1] },
      { label: 0 as const, votes: [0, 0, 0] as (0 | 1)[], confidences: [1, 1, 1] },
      { label: 0 as const, votes: [0, 0, 0] as (0 | 1)[], confidences: [1, 1, 1] },
    ];
    const p = jointPrediction('majority', items, [1, 1, 1], 0.5);
    expect(p?.tpr).toBe(0.5);
    expect(p?.tnr).toBe(1);
    expect(jointPrediction('majority', items.slice(0, 2), [1, 1, 1], 0.5)).toBeNull();
  });
});
