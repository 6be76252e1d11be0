/**
 * Proportions from clustered items with exact intervals: Clopper–Pearson on the effective sample size of
 * the design (Korn & Graubard 1998), so that a rare event (0 failures in 600) gets an honest upper bound
 * instead of the `[0, 0]` a bootstrap prints, and items sharing a ground truth are not counted as
 * independent. Pure functions; a rate with an empty denominator is `null`, never NaN.
 */
import { betaQuantile, normalQuantile, tQuantile } from './distributions.js';

/** Hits out of trials in one cluster (e.g. the items sharing one ground truth). */
export interface Tally {
  hits: number;
  trials: number;
}

export const DEFAULT_LEVEL = 0.95;

/** An exact (Clopper–Pearson) interval on the design's effective counts. */
export interface ExactInterval {
  lo: number | null;
  hi: number | null;
  level: number;
  method: 'clopper-pearson';
  /**
   * Design effect: the clustered variance of the rate over its binomial variance, floored at 1 (clustering
   * never makes a rate more precise than independent items). 1 when the rate is 0 or 1 (no variance to
   * estimate; Korn–Graubard's convention), null with no trials.
   */
  designEffect: number | null;
  /** trials / design effect × the t-vs-normal degrees-of-freedom factor: what the interval is exact for. */
  effectiveTrials: number | null;
  clusters: number;
  /**
   * With fewer than FEW_EVENTS events (or non-events) the design effect cannot be estimated from them, and
   * the interval above assumes unclustered events (at ICC 0.6 it covered 0.79): then also the cluster-level
   * bounds, exact on the clusters (n_eff = clusters). `hi` is the Clopper–Pearson upper bound on the share
   * of clusters with an event, which bounds the item rate at any ICC (an item's chance of the event is at
   * most its cluster's chance of one); `lo` the same from the non-events. Null otherwise.
   */
  clusterLevel: { lo: number; hi: number } | null;
  /** Why lo/hi are null (no trials), or that the interval assumes unclustered events. */
  note: string | null;
}

/** Below this many events (or non-events) a proportion also gets its cluster-level bounds. */
export const FEW_EVENTS = 5;

export interface Proportion {
  hits: number;
  trials: number;
  rate: number | null;
  ci: ExactInterval;
}

/**
 * Clopper–Pearson bounds for `x` events in `n` trials; `x` and `n` may be non-integers (effective counts).
 * Two-sided at `level`: each tail holds (1 − level) / 2.
 */
export function clopperPearson(x: number, n: number, level = DEFAULT_LEVEL): { lo: number; hi: number } {
  if (!(n > 0) || x < 0 || x > n)
    throw new RangeError(`clopperPearson: need 0 ≤ x ≤ n, n > 0 (x=${x}, n=${n})`);
  const tail = (1 - level) / 2;
  return {
    lo: x <= 0 ? 0 : betaQuantile(tail, x, n - x + 1),
    hi: x >= n ? 1 : betaQuantile(1 - tail, x + 1, n - x),
  };
}

/**
 * The Korn–Graubard degrees-of-freedom factor (z / t_{k−1})² ≤ 1 that shrinks the effective sample size
 * when there are few clusters (k). 1 for k ≤ 1 would be meaningless; then the factor of k = 2 is used.
 */
export function degreesOfFreedomFactor(clusters: number, level = DEFAULT_LEVEL): number {
  const q = 1 - (1 - level) / 2;
  const df = Math.max(1, clusters - 1);
  return (normalQuantile(q) / tQuantile(q, df)) ** 2;
}

/** Design effect of a clustered proportion (ratio estimator, with-replacement linearization variance). */
function designEffect(tallies: readonly Tally[], hits: number, trials: number): number {
  const p = hits / trials;
  if (p <= 0 || p >= 1) return 1;
  const k = tallies.filter((t) => t.trials > 0).length;
  if (k < 2) return 1;
  let squares = 0;
  for (const t of tallies) squares += (t.hits - p * t.trials) ** 2;
  const clustered = ((k / (k - 1)) * squares) / (trials * trials);
  const binomial = (p * (1 - p)) / trials;
  return Math.max(1, clustered / binomial);
}

/** A proportion over clusters, with its exact interval on the design's effective sample size. */
export function clusteredProportion(tallies: readonly Tally[], level = DEFAULT_LEVEL): Proportion {
  let hits = 0;
  let trials = 0;
  for (const t of tallies) {
    hits += t.hits;
    trials += t.trials;
  }
  const clusters = tallies.filter((t) => t.trials > 0).length;
  if (trials === 0) {
    return {
      hits,
      trials,
      rate: null,
      ci: {
        lo: null,
        hi: null,
        level,
        method: 'clopper-pearson',
        designEffect: null,
        effectiveTrials: null,
        clusters,
        clusterLevel: null,
        note: 'no trials',
      },
    };
  }
  const rate = hits / trials;
  const deff = designEffect(tallies, hits, trials);
  const effectiveTrials = (trials / deff) * degreesOfFreedomFactor(clusters, level);
  const { lo, hi } = clopperPearson(rate * effectiveTrials, effectiveTrials, level);
  let clusterLevel: { lo: number; hi: number } | null = null;
  if (Math.min(hits, trials - hits) < FEW_EVENTS) {
    const withHit = tallies.filter((t) => t.trials > 0 && t.hits > 0).length;
    const withMiss = tallies.filter((t) => t.trials > 0 && t.hits < t.trials).length;
    clusterLevel = {
      lo: 1 - clopperPearson(withMiss, clusters, level).hi,
      hi: clopperPearson(withHit, clusters, level).hi,
    };
  }
  return {
    hits,
    trials,
    rate,
    ci: {
      lo,
      hi,
      level,
      method: 'clopper-pearson',
      designEffect: deff,
      effectiveTrials,
      clusters,
      clusterLevel,
      note:
        clusterLevel === null
          ? null
          : rate === 0 || rate === 1
            ? 'assumes unclustered events (no design effect to estimate); the cluster-level bound does not'
            : `only ${Math.min(hits, trials - hits)} events: a design effect barely estimable; see the cluster-level bound`,
    },
  };
}

/**
 * The number of trials at which a rate like the observed one (same rate, same design effect) would have
 * an upper bound at or below `gate`; null when no sample can show it (the rate is at or above the gate,
 * or there is nothing to extrapolate from).
 */
export function trialsNeeded(p: Proportion, gate: number): number | null {
  const { rate, trials } = p;
  const { designEffect: deff, effectiveTrials, level } = p.ci;
  if (rate === null || deff === null || effectiveTrials === null || !(gate > 0) || rate >= gate) return null;
  // effective / trials stays fixed as the sample grows (design effect and df factor of this sample).
  const perTrial = effectiveTrials / trials;
  const upper = (n: number) => clopperPearson(rate * n * perTrial, n * perTrial, level).hi;
  let hi = Math.max(1, trials);
  while (upper(hi) > gate) {
    hi *= 2;
    if (hi > 1e12) return null;
  }
  let lo = 0;
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (mid > 0 && upper(mid) <= gate) hi = mid;
    else lo = mid;
  }
  return hi;
}
