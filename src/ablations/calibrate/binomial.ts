import { logGamma } from '../stats/distributions.js';
import {
  clopperPearson as sharedClopperPearson,
  clusteredProportion,
  type Tally,
} from '../stats/proportion.js';

/**
 * Exact and score intervals for binomial proportions, and the phi coefficient of two binary error
 * indicators. Pure functions. The exact interval is issue 9's (../stats/proportion.ts); Wilson, the
 * Newcombe difference and phi are this report's own.
 */

export interface BinomialInterval {
  /** Successes and trials. */
  x: number;
  n: number;
  /** x / n; null when n = 0 (as are the bounds). */
  rate: number | null;
  lo: number | null;
  hi: number | null;
  level: number;
  method: 'clopper_pearson' | 'wilson';
  /**
   * For a clustered rate (`clusteredClopperPearson`): the design effect the exact interval is adjusted by,
   * and with few events the cluster-level bounds (see ExactInterval in ../stats/proportion.ts).
   */
  designEffect?: number | null | undefined;
  clusterLevel?: { lo: number; hi: number } | null | undefined;
}

function logChoose(n: number, k: number): number {
  return logGamma(n + 1) - logGamma(k + 1) - logGamma(n - k + 1);
}

/** P(X ≤ k) for X ~ Binomial(n, p). */
export function binomialCdf(k: number, n: number, p: number): number {
  if (k < 0) return 0;
  if (k >= n) return 1;
  if (p <= 0) return 1;
  if (p >= 1) return 0;
  let sum = 0;
  for (let i = 0; i <= k; i++) {
    sum += Math.exp(logChoose(n, i) + i * Math.log(p) + (n - i) * Math.log(1 - p));
  }
  return Math.min(1, sum);
}

/** Clopper–Pearson exact interval (issue 9's `clopperPearson` in ../stats/proportion.ts); null bounds when n = 0. */
export function clopperPearson(x: number, n: number, level = 0.95): BinomialInterval {
  if (n === 0) return { x, n, rate: null, lo: null, hi: null, level, method: 'clopper_pearson' };
  const { lo, hi } = sharedClopperPearson(x, n, level);
  return { x, n, rate: x / n, lo, hi, level, method: 'clopper_pearson' };
}

/**
 * The exact interval of a rate over clustered items (one tally per ground truth): Clopper–Pearson on the
 * design-effect-adjusted sample size with the few-cluster degrees-of-freedom factor, as the ablation's
 * proportions (`clusteredProportion`). Items sharing a ground truth are not independent: MOOSE-Chem accuracy
 * 135/200 is [0.605, 0.739] unclustered and [0.577, 0.763] clustered (design effect 1.75).
 */
export function clusteredClopperPearson(tallies: readonly Tally[], level = 0.95): BinomialInterval {
  const p = clusteredProportion(tallies, level);
  return {
    x: p.hits,
    n: p.trials,
    rate: p.rate,
    lo: p.ci.lo,
    hi: p.ci.hi,
    level,
    method: 'clopper_pearson',
    designEffect: p.ci.designEffect,
    clusterLevel: p.ci.clusterLevel,
  };
}

/**
 * Newcombe's difference of two clustered rates: each rate's Wilson interval on its design-effect-adjusted
 * counts (x / deff of n / deff), so clustering widens the bias interval as it widens the rates'.
 */
export function clusteredDifference(
  first: readonly Tally[],
  second: readonly Tally[],
  level = 0.95,
): Difference | null {
  const effective = (tallies: readonly Tally[]) => {
    const p = clusteredProportion(tallies, level);
    const deff = p.ci.designEffect ?? 1;
    return { x: p.hits / deff, n: p.trials / deff };
  };
  const a = effective(first);
  const b = effective(second);
  return proportionDifference(a.x, a.n, b.x, b.n, level);
}

/** Two-sided standard-normal quantile for a confidence level (Acklam's rational approximation). */
export function normalQuantile(level: number): number {
  const p = 1 - (1 - level) / 2;
  const a = [
    -39.69683028665376, 220.9460984245205, -275.9285104469687, 138.357751867269, -30.66479806614716,
    2.506628277459239,
  ];
  const b = [
    -54.47609879822406, 161.5858368580409, -155.6989798598866, 66.80131188771972, -13.28068155288572,
  ];
  const c = [
    -0.007784894002430293, -0.3223964580411365, -2.400758277161838, -2.549732539343734, 4.374664141464968,
    2.938163982698783,
  ];
  const d = [0.007784695709041462, 0.3224671290700398, 2.445134137142996, 3.754408661907416];
  const at = (arr: number[], i: number): number => arr[i] ?? 0;
  if (p > 0.97575) {
    const q = Math.sqrt(-2 * Math.log(1 - p));
    return (
      -(((((at(c, 0) * q + at(c, 1)) * q + at(c, 2)) * q + at(c, 3)) * q + at(c, 4)) * q + at(c, 5)) /
      ((((at(d, 0) * q + at(d, 1)) * q + at(d, 2)) * q + at(d, 3)) * q + 1)
    );
  }
  const q = p - 0.5;
  const r = q * q;
  return (
    ((((((at(a, 0) * r + at(a, 1)) * r + at(a, 2)) * r + at(a, 3)) * r + at(a, 4)) * r + at(a, 5)) * q) /
    (((((at(b, 0) * r + at(b, 1)) * r + at(b, 2)) * r + at(b, 3)) * r + at(b, 4)) * r + 1)
  );
}

/** Wilson score interval. */
export function wilson(x: number, n: number, level = 0.95): BinomialInterval {
  if (n === 0) return { x, n, rate: null, lo: null, hi: null, level, method: 'wilson' };
  const z = normalQuantile(level);
  const p = x / n;
  const denom = 1 + (z * z) / n;
  const centre = (p + (z * z) / (2 * n)) / denom;
  const half = (z * Math.sqrt((p * (1 - p)) / n + (z * z) / (4 * n * n))) / denom;
  return {
    x,
    n,
    rate: p,
    lo: Math.max(0, centre - half),
    hi: Math.min(1, centre + half),
    level,
    method: 'wilson',
  };
}

export interface Difference {
  /** p1 − p2 and its interval (Newcombe's hybrid score method, from two Wilson intervals). */
  point: number;
  lo: number;
  hi: number;
  level: number;
}

/** Newcombe (1998) method 10 interval for the difference of two independent proportions. */
export function proportionDifference(
  x1: number,
  n1: number,
  x2: number,
  n2: number,
  level = 0.95,
): Difference | null {
  const a = wilson(x1, n1, level);
  const b = wilson(x2, n2, level);
  if (
    a.rate === null ||
    b.rate === null ||
    a.lo === null ||
    a.hi === null ||
    b.lo === null ||
    b.hi === null
  ) {
    return null;
  }
  const point = a.rate - b.rate;
  return {
    point,
    lo: point - Math.sqrt((a.rate - a.lo) ** 2 + (b.hi - b.rate) ** 2),
    hi: point + Math.sqrt((a.hi - a.rate) ** 2 + (b.rate - b.lo) ** 2),
    level,
  };
}

/** A 2×2 table of two binary indicators over the same subjects: both, only the first, only the second, neither. */
export interface PairTable {
  both: number;
  firstOnly: number;
  secondOnly: number;
  neither: number;
}

export function addPairTables(a: PairTable, b: PairTable): PairTable {
  return {
    both: a.both + b.both,
    firstOnly: a.firstOnly + b.firstOnly,
    secondOnly: a.secondOnly + b.secondOnly,
    neither: a.neither + b.neither,
  };
}

/** Phi coefficient (Pearson correlation of two binary variables); null when a margin is empty (a constant). */
export function phi(t: PairTable): number | null {
  const r1 = t.both + t.firstOnly;
  const r0 = t.secondOnly + t.neither;
  const c1 = t.both + t.secondOnly;
  const c0 = t.firstOnly + t.neither;
  const denom = Math.sqrt(r1 * r0 * c1 * c0);
  if (denom === 0) return null;
  return (t.both * t.neither - t.firstOnly * t.secondOnly) / denom;
}
