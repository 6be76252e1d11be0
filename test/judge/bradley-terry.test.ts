import { describe, expect, it } from 'vitest';

import {
  expectedWinRates,
  fitBradleyTerry,
  fitBradleyTerryMM,
  fitElo,
  scoreIntervals,
  scoreOutcomes,
  type Outcome,
} from '../../src/judge/bradley-terry.js';

const win = (i: number, j: number): Outcome => ({ i, j, winner: 'i' });
const tie = (i: number, j: number): Outcome => ({ i, j, winner: 'tie' });

describe('Bradley–Terry fit', () => {
  it('recovers the maximum-likelihood ratio without a prior: 3 wins of 4 → P(win) = 3/4', () => {
    const outcomes = [win(0, 1), win(0, 1), win(0, 1), win(1, 0)];
    const fit = fitBradleyTerry(2, outcomes, { prior: 0 });
    const [p0, p1] = fit.strengths as [number, number];
    expect(p0 / (p0 + p1)).toBeCloseTo(0.75, 9);
    expect(scoreOutcomes(2, outcomes)[0]).toBeGreaterThan(0.5);
  });

  it('solves the anchored likelihood equations: expected wins = observed wins (+ prior/2) for each candidate', () => {
    const outcomes = [win(0, 1), win(0, 2), win(1, 2), tie(1, 2), win(2, 0)];
    const prior = 1;
    const { strengths } = fitBradleyTerry(3, outcomes, { prior });
    const p = strengths as number[];
    const observed = [0, 0, 0];
    const expected = [0, 0, 0];
    for (const o of outcomes) {
      const pi = p[o.i]!;
      const pj = p[o.j]!;
      expected[o.i]! += pi / (pi + pj);
      expected[o.j]! += pj / (pi + pj);
      observed[o.i]! += o.winner === 'i' ? 1 : o.winner === 'tie' ? 0.5 : 0;
      observed[o.j]! += o.winner === 'j' ? 1 : o.winner === 'tie' ? 0.5 : 0;
    }
    for (let k = 0; k < 3; k++) {
      const withPrior = expected[k]! + (prior * p[k]!) / (p[k]! + 1);
      expect(withPrior).toBeCloseTo(observed[k]! + prior / 2, 8);
    }
  });

  it('exists under perfect separation (the prior keeps strengths finite) and orders the candidates', () => {
    // 0 beats everyone, 1 beats 2: the maximum-likelihood estimate without a prior diverges.
    const outcomes = [win(0, 1), win(0, 2), win(1, 2)];
    const { strengths } = fitBradleyTerry(3, outcomes);
    for (const s of strengths) expect(Number.isFinite(s)).toBe(true);
    const scores = expectedWinRates(strengths) as number[];
    expect(scores[0]!).toBeGreaterThan(scores[1]!);
    expect(scores[1]!).toBeGreaterThan(scores[2]!);
    for (const s of scores) {
      expect(s).toBeGreaterThan(0);
      expect(s).toBeLessThan(1);
    }
    // Expected win rates of a group sum to G/2 (each pair shares one unit of probability).
    expect(scores.reduce((a, b) => a + b, 0)).toBeCloseTo(1.5, 12);
  });

  it('gives 0.5 to everyone when every comparison is a tie, and null to a candidate never compared', () => {
    const scores = scoreOutcomes(4, [tie(0, 1), tie(1, 2), tie(0, 2)]);
    expect(scores.slice(0, 3).map((s) => Number(s!.toFixed(12)))).toEqual([0.5, 0.5, 0.5]);
    expect(scores[3]).toBeNull();
  });
});

describe('Newton fit vs the minorise–maximise reference', () => {
  const noisy = (pairs: Array<[number, number]>, seed: number): Outcome[] => {
    let state = seed;
    const rnd = (): number => (state = (state * 1103515245 + 12345) % 2147483648) / 2147483648;
    return pairs.map(([i, j]) => ({ i, j, winner: rnd() < 0.15 ? 'tie' : rnd() < 0.7 ? 'j' : 'i' }));
  };
  const allPairs = (g: number): Array<[number, number]> =>
    Array.from({ length: g }, (_, i) =>
      Array.from({ length: g - i - 1 }, (_, k): [number, number] => [i, i + k + 1]),
    ).flat();
  const ring = (g: number): Array<[number, number]> =>
    Array.from({ length: g }, (_, k): [number, number] => [k, (k + 1) % g]);

  it('reaches the same maximum on a dense graph (Cholesky steps) and a sparse one (conjugate-gradient steps)', () => {
    for (const [g, pairs] of [
      [8, allPairs(8)],
      [40, ring(40)],
    ] as const) {
      const outcomes = noisy(pairs, g);
      const newton = fitBradleyTerry(g, outcomes);
      const mm = fitBradleyTerryMM(g, outcomes, { maxIterations: 200_000, tolerance: 1e-13 });
      expect(newton.iterations).toBeLessThan(20);
      for (let k = 0; k < g; k++)
        expect(Math.log(newton.strengths[k]!)).toBeCloseTo(Math.log(mm.strengths[k]!), 6);
    }
  });
});

describe('Elo (documented alternative)', () => {
  it('updates by K·(actual − expected): one win between equals moves ±16 with K = 32', () => {
    const { strengths } = fitElo(2, [win(0, 1)]);
    const [p0, p1] = strengths as [number, number];
    expect(400 * Math.log10(p0)).toBeCloseTo(16, 9);
    expect(400 * Math.log10(p1)).toBeCloseTo(-16, 9);
    // Expected score of 1016 vs 984: 1 / (1 + 10^(−32/400)) = 0.54592.
    expect(scoreOutcomes(2, [win(0, 1)], 'elo')[0]).toBeCloseTo(0.54592, 5);
  });
});

describe('score intervals (Laplace posterior)', () => {
  it('is deterministic for a seed, brackets the point estimate, and is null for unrated candidates', () => {
    const outcomes = [win(0, 1), win(0, 2), win(1, 2), win(0, 1), tie(1, 2), win(0, 2)];
    const a = scoreIntervals(4, outcomes, { seed: 7, draws: 300 });
    const b = scoreIntervals(4, outcomes, { seed: 7, draws: 300 });
    expect(a).toEqual(b);
    const points = scoreOutcomes(4, outcomes);
    for (let k = 0; k < 3; k++) {
      const [lo, hi] = a[k]!;
      expect(lo).toBeLessThanOrEqual(points[k]!);
      expect(hi).toBeGreaterThanOrEqual(points[k]!);
      expect(lo).toBeGreaterThanOrEqual(0);
      expect(hi).toBeLessThanOrEqual(1);
    }
    expect(a[3]).toBeNull();
  });

  it('gives one comparison a wide interval, never a zero-width one (the bootstrap printed [0.82, 0.82])', () => {
    const [ci0, ci1] = scoreIntervals(2, [win(0, 1)]);
    expect(ci0![1] - ci0![0]).toBeGreaterThan(0.5);
    expect(ci0![0]).toBeLessThan(0.5);
    // Symmetric: the loser's interval mirrors the winner's.
    expect(ci1![0]).toBeCloseTo(1 - ci0![1], 9);
  });

  it('narrows as the same result repeats', () => {
    const width = (k: number) => {
      const ci = scoreIntervals(
        2,
        Array.from({ length: k }, (_, i) => (i % 4 === 3 ? win(1, 0) : win(0, 1))),
      )[0]!;
      return ci[1] - ci[0];
    };
    expect(width(40)).toBeLessThan(width(4));
  });

  it('is null for every candidate under Elo (no sampling model)', () => {
    expect(scoreIntervals(3, [win(0, 1), win(1, 2)], { method: 'elo' })).toEqual([null, null, null]);
  });
});
