/** Percentile bootstrap over whole clusters, for statistics that are not sums of per-cluster columns. */
import { createRng, quantile } from '../../math/sampling.js';
import { DEFAULT_RESAMPLES } from './clustered.js';

/** A percentile interval (default 95%) from the cluster bootstrap; null bounds when the statistic was never defined. */
export interface Interval {
  lo: number | null;
  hi: number | null;
  level: number;
  resamples: number;
  /** Resamples in which the statistic was undefined (excluded from the percentiles, counted here). */
  undefinedResamples: number;
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
