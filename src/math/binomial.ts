/**
 * The exact (Clopper–Pearson) interval of a binomial proportion, for serving (`GET /v1/integrity`): the
 * ablation statistics have their own, on effective counts, and serving imports no statistics. The bounds are
 * beta quantiles (`beta.ts`, shared with those statistics), so an interval costs microseconds at any n.
 */

import { betaQuantile } from './beta.js';

export interface ExactInterval {
  /** Successes over trials; null when n = 0 (as are the bounds). */
  rate: number | null;
  lo: number | null;
  hi: number | null;
}

/**
 * Clopper–Pearson interval for x successes in n trials at `level` (default 0.95): the lower bound solves
 * P(X ≥ x | p) = α/2, the upper P(X ≤ x | p) = α/2, i.e. the α/2 quantile of Beta(x, n − x + 1) and the
 * 1 − α/2 quantile of Beta(x + 1, n − x); 0 and 1 at the edges x = 0 and x = n.
 */
export function exactInterval(x: number, n: number, level = 0.95): ExactInterval {
  if (n <= 0) return { rate: null, lo: null, hi: null };
  const alpha = (1 - level) / 2;
  const lo = x <= 0 ? 0 : betaQuantile(alpha, x, n - x + 1);
  const hi = x >= n ? 1 : betaQuantile(1 - alpha, x + 1, n - x);
  return { rate: x / n, lo, hi };
}
