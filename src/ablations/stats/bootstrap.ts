/**
 * Intervals over whole clusters for statistics that are not sums of per-cluster columns: the percentile
 * bootstrap, and the leave-one-cluster-out jackknife-t the reports use (as `clustered.ts` does for sums).
 */
import { createRng, quantile } from '../../math/sampling.js';
import { DEFAULT_RESAMPLES } from './clustered.js';
import { tQuantile } from './distributions.js';

/** A percentile interval (default 95%) from the cluster bootstrap; null bounds when the statistic was never defined. */
export interface Interval {
  lo: number | null;
  hi: number | null;
  level: number;
  resamples: number;
  /** Resamples in which the statistic was undefined (excluded from the percentiles, counted here). */
  undefinedResamples: number;
  /** Default `percentile`. */
  method?: 'percentile' | 'jackknife-t' | undefined;
  /** Why lo/hi are null. */
  note?: string | null | undefined;
}

/** `mean`: any real value, no transform; `tau`: a correlation in [−1, 1], on the atanh scale. */
export type JackknifeScale = 'mean' | 'tau';

/**
 * Leave-one-cluster-out jackknife t-interval (k − 1 degrees of freedom) of a statistic of clusters; atanh
 * scale for a correlation. Null bounds, with a note, when the statistic is undefined on the data or with a
 * cluster left out, at the boundary (τ = ±1), with fewer than 2 clusters, or when it cannot vary (zero
 * jackknife variance: no interval of zero width is printed).
 */
export function jackknifeInterval<C>(
  clusters: readonly C[],
  statistic: (sample: readonly C[]) => number | null,
  scale: JackknifeScale,
  level = 0.95,
): Interval {
  const base = { level, resamples: 0, undefinedResamples: 0, method: 'jackknife-t' as const };
  const none = (note: string): Interval => ({ ...base, lo: null, hi: null, note });
  const k = clusters.length;
  const point = statistic(clusters);
  if (point === null || !Number.isFinite(point)) return none('undefined on the data');
  if (k < 2) return none('fewer than 2 clusters');
  const to = scale === 'tau' ? Math.atanh : (x: number) => x;
  const from = scale === 'tau' ? Math.tanh : (y: number) => y;
  if (scale === 'tau' && !(Math.abs(point) < 1)) return none(`at the boundary of its range (${point})`);
  const ys: number[] = [];
  for (let i = 0; i < k; i++) {
    const v = statistic([...clusters.slice(0, i), ...clusters.slice(i + 1)]);
    if (v === null || !Number.isFinite(v)) return none(`undefined with cluster ${i + 1} of ${k} left out`);
    if (scale === 'tau' && !(Math.abs(v) < 1)) return none(`at the boundary with a cluster left out (${v})`);
    ys.push(to(v));
  }
  const mean = ys.reduce((s, y) => s + y, 0) / k;
  const se = Math.sqrt(((k - 1) / k) * ys.reduce((s, y) => s + (y - mean) ** 2, 0));
  if (!(se > 0)) return none('cannot vary: the same with any cluster left out');
  const t = tQuantile(1 - (1 - level) / 2, k - 1);
  const centre = to(point);
  return { ...base, lo: from(centre - t * se), hi: from(centre + t * se), note: null };
}

/**
 * Percentile bootstrap over whole clusters (evaluate: questions; calibrate: ground truths): each resample draws
 * `clusters.length` clusters with replacement and evaluates every statistic on them, so all intervals share the
 * same resamples. For statistics that are not sums of per-cluster columns (means of ratios, Kendall τ, φ), where
 * the sum-based estimators of `clustered.ts` do not apply.
 */
export function clusterBootstrap<C>(
  clusters: readonly C[],
  statistics: ReadonlyMap<string, (sample: readonly C[]) => number | null>,
  options: { seed: number; resamples?: number | undefined; level?: number | undefined },
): Map<string, Interval> {
  const resamples = options.resamples ?? DEFAULT_RESAMPLES;
  const level = options.level ?? 0.95;
  const rng = createRng(options.seed);
  const values = new Map<string, number[]>([...statistics.keys()].map((k) => [k, []]));
  const sample: C[] = [];
  for (let r = 0; r < resamples && clusters.length > 0; r++) {
    sample.length = 0;
    for (let i = 0; i < clusters.length; i++) {
      const drawn = clusters[Math.floor(rng() * clusters.length)];
      if (drawn !== undefined) sample.push(drawn);
    }
    for (const [name, statistic] of statistics) {
      const v = statistic(sample);
      if (v !== null && Number.isFinite(v)) values.get(name)?.push(v);
    }
  }
  const out = new Map<string, Interval>();
  for (const [name, list] of values) {
    const sorted = list.sort((a, b) => a - b);
    out.set(name, {
      lo: quantile(sorted, (1 - level) / 2),
      hi: quantile(sorted, 1 - (1 - level) / 2),
      level,
      resamples,
      undefinedResamples: resamples - sorted.length,
    });
  }
  return out;
}

/** `clusterBootstrap` of one statistic. */
export function bootstrapInterval<C>(
  clusters: readonly C[],
  statistic: (sample: readonly C[]) => number | null,
  options: { seed: number; resamples?: number | undefined; level?: number | undefined },
): Interval {
  const interval = clusterBootstrap(clusters, new Map([['statistic', statistic]]), options).get('statistic');
  if (interval === undefined) throw new Error('bootstrap lost its statistic');
  return interval;
}
