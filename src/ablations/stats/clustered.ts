/**
 * Intervals and tests for statistics of clustered items (items sharing a ground truth are not
 * independent): every statistic is a function of per-cluster count vectors summed over clusters, so that
 * both methods below only ever re-sum rows.
 *
 * - `percentile`: cluster bootstrap (whole clusters drawn with replacement, seeded mulberry32), percentile
 *   interval; the two-sided p-value of a difference inverts that interval. On request only: the reports use
 *   the jackknife-t at every cluster count (`methodFor`).
 * - `jackknife-t`: leave-one-cluster-out jackknife standard error on a variance-stabilising scale (logit for a
 *   rate, atanh for a difference) with a Student t quantile on k − 1 degrees of freedom. The percentile
 *   bootstrap undercovers (0.91–0.93 with 34 clusters, 0.925–0.936 with 60–100); this one holds (see
 *   test/ablations/stats/coverage.test.ts). Deterministic: no Monte-Carlo error.
 *
 * An interval is never made up: a statistic undefined in more than (1 − level)/2 of the resamples, or in a
 * leave-one-out sample, or a bootstrap interval of zero width after dropping undefined resamples, gives
 * `lo = hi = null` with a `note` saying why.
 */
import { createRng, quantile } from '../../math/sampling.js';
import { tCdf, tQuantile } from './distributions.js';

/** Per-cluster count vectors: one row per cluster, the same columns in every row. */
export type ClusterRows = readonly (readonly number[])[];
/** A statistic of the column sums; null where it is undefined (an empty denominator). */
export type SumStatistic = (sums: readonly number[]) => number | null;

export type EstimateMethod = 'percentile' | 'jackknife-t';
/** `rate`: values in [0, 1]; `difference`: values in [−1, 1] (the test is of 0). */
export type Scale = 'rate' | 'difference';

/** Below this many clusters the report warns that its intervals are wide (every method is then fragile). */
export const FEW_CLUSTERS = 50;
/** Bootstrap resamples (the ablation reports never use fewer). */
export const DEFAULT_RESAMPLES = 2000;

/**
 * The reports' method at every cluster count: the jackknife-t. The percentile bootstrap undercovered F1 at
 * 50–100 clusters as well as below (0.925 at 60, 0.936 at 100 MOOSE-like clusters, where the jackknife-t gave
 * 0.945 and 0.949; docs/ablations.md "Coverage"), so the switch at 50 clusters is gone. `percentile` stays for
 * callers that ask for it.
 */
export const REPORT_METHOD: EstimateMethod = 'jackknife-t';

export interface Interval {
  lo: number | null;
  hi: number | null;
  level: number;
  method: EstimateMethod | 'clopper-pearson-bound';
  /** Bootstrap resamples drawn (0 for the deterministic methods). */
  resamples: number;
  /** Resamples in which the statistic was undefined (never silently dropped: counted here). */
  undefinedResamples: number;
  /** Monte-Carlo standard error of the endpoints (the larger of the two); 0 for deterministic methods. */
  mcError: number;
  /** Why `lo`/`hi` are null, or what the interval is when it is not the method's own. */
  note: string | null;
  /**
   * When a difference has no interval because the two agree on every item it counts (a zero-width interval
   * is no interval): the exact upper bound on the share of clusters, hence of items, where they differ.
   */
  discordantBound?: number | undefined;
}

/**
 * The exact (Clopper–Pearson, two-sided `level`) upper bound on the rate of an event seen in 0 of `k`
 * clusters: 1 − ((1 − level)/2)^(1/k). A cluster-level bound, valid at any intra-cluster correlation, and a
 * bound on the item-level rate too (an item's chance of the event is at most its cluster's chance of one).
 */
export function zeroEventBound(clusters: number, level = 0.95): number {
  return clusters < 1 ? 1 : 1 - ((1 - level) / 2) ** (1 / clusters);
}

/**
 * A difference that is 0 in every resample (or every leave-one-out sample): the two agree on every item the
 * statistic counts. Its interval would have zero width, which no 95% interval is (a true difference of
 * 0.0065 gave [0, 0] in 34% of samples at 60 clusters); instead: null, and the exact bound on disagreement.
 */
function agreementInterval(base: Omit<Interval, 'lo' | 'hi' | 'note'>, clusters: number): Interval {
  const bound = zeroEventBound(clusters, base.level);
  return {
    ...base,
    lo: null,
    hi: null,
    discordantBound: bound,
    note: `no interval: the two agree on every item it counts in all ${clusters} clusters; they differ on at most ${(100 * bound).toFixed(1)}% of clusters (exact ${Math.round(base.level * 100)}% bound, 0 of ${clusters})`,
  };
}

export interface Estimate {
  point: number | null;
  ci: Interval;
  /** Two-sided p-value of "the statistic is 0" (differences only), from the same method as `ci`. */
  p: number | null;
}

export interface StatisticSpec {
  fn: SumStatistic;
  scale: Scale;
}

export interface EstimateOptions {
  seed: number;
  resamples?: number | undefined;
  level?: number | undefined;
  /** Default: REPORT_METHOD. */
  method?: EstimateMethod | undefined;
}

export function columnSums(rows: ClusterRows): number[] {
  const width = rows[0]?.length ?? 0;
  const sums = new Array<number>(width).fill(0);
  for (const row of rows) for (let j = 0; j < width; j++) sums[j] = (sums[j] ?? 0) + (row[j] ?? 0);
  return sums;
}

const finite = (v: number | null): v is number => v !== null && Number.isFinite(v);

/**
 * Cluster bootstrap of several statistics on shared resamples: each resample draws `rows.length` clusters
 * with replacement. Returns every statistic's defined values, ascending, and how many were undefined.
 */
export function bootstrapSums<K extends string>(
  rows: ClusterRows,
  statistics: Readonly<Record<K, SumStatistic>>,
  options: { seed: number; resamples?: number | undefined },
): Record<K, { values: number[]; undefined: number }> {
  const resamples = options.resamples ?? DEFAULT_RESAMPLES;
  const rng = createRng(options.seed);
  const names = Object.keys(statistics).filter((k): k is K => Object.hasOwn(statistics, k));
  const values = new Map<K, number[]>(names.map((k) => [k, []]));
  const width = rows[0]?.length ?? 0;
  const sums = new Array<number>(width);
  for (let r = 0; r < resamples; r++) {
    sums.fill(0);
    for (let i = 0; i < rows.length; i++) {
      const row = rows[Math.floor(rng() * rows.length)];
      if (row !== undefined) for (let j = 0; j < width; j++) sums[j] = (sums[j] ?? 0) + (row[j] ?? 0);
    }
    for (const name of names) {
      const v = statistics[name](sums);
      if (finite(v)) values.get(name)?.push(v);
    }
  }
  // Every name gets an entry; Record<string, _> is assignable to Record<K, _>.
  const out: Record<string, { values: number[]; undefined: number }> = {};
  for (const name of names) {
    const list = (values.get(name) ?? []).sort((a, b) => a - b);
    out[name] = { values: list, undefined: resamples - list.length };
  }
  return out;
}

/** The statistic with each cluster left out in turn (null where it is undefined). */
export function jackknifeSums(rows: ClusterRows, statistic: SumStatistic): (number | null)[] {
  const total = columnSums(rows);
  return rows.map((row) => {
    const v = statistic(total.map((s, j) => s - (row[j] ?? 0)));
    return finite(v) ? v : null;
  });
}

const logit = (x: number) => Math.log(x / (1 - x));
const expit = (y: number) => 1 / (1 + Math.exp(-y));
const TRANSFORMS: Record<
  Scale,
  { to: (x: number) => number; from: (y: number) => number; inside: (x: number) => boolean }
> = {
  rate: { to: logit, from: expit, inside: (x) => x > 0 && x < 1 },
  difference: { to: Math.atanh, from: Math.tanh, inside: (x) => x > -1 && x < 1 },
};

function nullInterval(base: Omit<Interval, 'lo' | 'hi' | 'note'>, note: string): Interval {
  return { ...base, lo: null, hi: null, note };
}

/** Standard error of a bootstrap quantile from the spread of the order statistics around it. */
function quantileError(sorted: readonly number[], q: number): number {
  const m = sorted.length;
  const spread = 1.96 * Math.sqrt(m * q * (1 - q));
  const at = (i: number) => sorted[Math.min(m - 1, Math.max(0, Math.round(i)))] ?? 0;
  return (at((m - 1) * q + spread) - at((m - 1) * q - spread)) / (2 * 1.96);
}

function percentileEstimate(
  point: number | null,
  draws: { values: number[]; undefined: number },
  scale: Scale,
  resamples: number,
  level: number,
  clusters: number,
): Estimate {
  const tail = (1 - level) / 2;
  const base = {
    level,
    method: 'percentile' as const,
    resamples,
    undefinedResamples: draws.undefined,
    mcError: 0,
  };
  if (point === null) return { point, ci: nullInterval(base, 'undefined on the data'), p: null };
  if (draws.undefined > tail * resamples) {
    return {
      point,
      ci: nullInterval(base, `undefined in ${draws.undefined} of ${resamples} resamples`),
      p: null,
    };
  }
  const sorted = draws.values;
  const lo = quantile(sorted, tail);
  const hi = quantile(sorted, 1 - tail);
  if (lo === null || hi === null) return { point, ci: nullInterval(base, 'no defined resample'), p: null };
  const flat = hi - lo <= 0;
  if (flat && scale === 'difference' && draws.undefined === 0 && lo === 0) {
    return { point, ci: agreementInterval(base, clusters), p: 1 };
  }
  if (flat) {
    const why =
      draws.undefined > 0
        ? `zero width after dropping ${draws.undefined} undefined resamples`
        : 'zero width: every resample gave the same value';
    return { point, ci: nullInterval(base, why), p: null };
  }
  const mcError = Math.max(quantileError(sorted, tail), quantileError(sorted, 1 - tail));
  let p: number | null = null;
  if (scale === 'difference') {
    let below = 0;
    let equal = 0;
    for (const v of sorted) {
      if (v < 0) below++;
      else if (v === 0) equal++;
    }
    const above = sorted.length - below - equal;
    // Inverts the percentile interval: the smallest two-sided level at which 0 leaves it. Resamples equal to
    // 0 count on both sides (an interval that touches 0 is not significant); +1: p is never 0.
    p = Math.min(1, (2 * (Math.min(below, above) + equal + 1)) / (sorted.length + 1));
  }
  return { point, ci: { ...base, lo, hi, mcError, note: null }, p };
}

function jackknifeEstimate(
  point: number | null,
  leaveOneOut: readonly (number | null)[],
  scale: Scale,
  level: number,
): Estimate {
  const base = { level, method: 'jackknife-t' as const, resamples: 0, undefinedResamples: 0, mcError: 0 };
  const k = leaveOneOut.length;
  if (point === null) return { point, ci: nullInterval(base, 'undefined on the data'), p: null };
  if (k < 2) return { point, ci: nullInterval(base, 'fewer than 2 clusters'), p: null };
  const missing = leaveOneOut.filter((v) => v === null).length;
  if (missing > 0) {
    return {
      point,
      ci: nullInterval(
        { ...base, undefinedResamples: missing },
        `undefined with ${missing} of ${k} clusters left out`,
      ),
      p: null,
    };
  }
  const values = leaveOneOut.filter(finite);
  const g = TRANSFORMS[scale];
  if (scale === 'difference' && point === 0 && values.every((v) => v === 0)) {
    return { point, ci: agreementInterval(base, k), p: 1 };
  }
  if (!g.inside(point) || !values.every(g.inside)) {
    return { point, ci: nullInterval(base, `at the boundary of its range (${point})`), p: null };
  }
  const ys = values.map(g.to);
  const mean = ys.reduce((s, y) => s + y, 0) / k;
  const se = Math.sqrt(((k - 1) / k) * ys.reduce((s, y) => s + (y - mean) ** 2, 0));
  if (!(se > 0)) return { point, ci: nullInterval(base, 'zero jackknife variance'), p: null };
  const t = tQuantile(1 - (1 - level) / 2, k - 1);
  const centre = g.to(point);
  const p = scale === 'difference' ? 2 * (1 - tCdf(Math.abs(centre / se), k - 1)) : null;
  return { point, ci: { ...base, lo: g.from(centre - t * se), hi: g.from(centre + t * se), note: null }, p };
}

/**
 * Point estimates, intervals and (for differences) p-values of several statistics of the same clusters,
 * by `options.method` (default REPORT_METHOD). Percentile intervals share one set of resamples.
 */
export function estimate<K extends string>(
  allRows: ClusterRows,
  statistics: Readonly<Record<K, StatisticSpec>>,
  options: EstimateOptions,
): Record<K, Estimate> {
  const level = options.level ?? 0.95;
  const resamples = options.resamples ?? DEFAULT_RESAMPLES;
  // A cluster with no item in this (sub)population carries nothing: it neither counts nor gets drawn.
  const rows = allRows.filter((row) => row.some((v) => v !== 0));
  const method = options.method ?? REPORT_METHOD;
  const names = Object.keys(statistics).filter((k): k is K => Object.hasOwn(statistics, k));
  const total = columnSums(rows);
  const out: Record<string, Estimate> = {};
  if (method === 'percentile') {
    const fns: Record<string, SumStatistic> = {};
    for (const name of names) fns[name] = statistics[name].fn;
    const draws = bootstrapSums(rows, fns, { seed: options.seed, resamples });
    for (const name of names) {
      const spec = statistics[name];
      const point = spec.fn(total);
      const d = draws[name] ?? { values: [], undefined: resamples };
      out[name] = percentileEstimate(
        finite(point) ? point : null,
        d,
        spec.scale,
        resamples,
        level,
        rows.length,
      );
    }
  } else {
    for (const name of names) {
      const spec = statistics[name];
      const point = spec.fn(total);
      out[name] = jackknifeEstimate(
        finite(point) ? point : null,
        jackknifeSums(rows, spec.fn),
        spec.scale,
        level,
      );
    }
  }
  return out;
}
