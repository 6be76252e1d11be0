/**
 * The exact (Clopper–Pearson) interval of a binomial proportion, for serving (`GET /v1/integrity`): the
 * ablation statistics have their own, richer one, and serving imports no statistics. A leaf: it imports
 * nothing. Bounds by bisection on the binomial tail (60 halvings: below 1e-15), each tail an O(n) sum in
 * log space, so n up to ~10^5 costs a few milliseconds.
 */

/** ln Γ(x) for x > 0 (Lanczos, g = 7, 9 terms: ~15 significant digits). */
function logGamma(x: number): number {
  const c = [
    0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059,
    12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7,
  ];
  if (x < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * x)) - logGamma(1 - x);
  const z = x - 1;
  let a = c[0] ?? 1;
  const t = z + 7.5;
  for (let i = 1; i < 9; i++) a += (c[i] ?? 0) / (z + i);
  return 0.5 * Math.log(2 * Math.PI) + (z + 0.5) * Math.log(t) - t + Math.log(a);
}

/** P(X ≤ k) for X ~ Binomial(n, p). */
function cdf(k: number, n: number, p: number): number {
  if (k < 0) return 0;
  if (k >= n || p <= 0) return 1;
  if (p >= 1) return 0;
  const base = logGamma(n + 1);
  const lp = Math.log(p);
  const lq = Math.log1p(-p);
  let sum = 0;
  for (let i = 0; i <= k; i++) {
    sum += Math.exp(base - logGamma(i + 1) - logGamma(n - i + 1) + i * lp + (n - i) * lq);
  }
  return Math.min(1, sum);
}

/** The p in [0, 1] where the decreasing function f crosses `target` (bisection). */
function solveDecreasing(f: (p: number) => number, target: number): number {
  let lo = 0;
  let hi = 1;
  for (let i = 0; i < 60; i++) {
    const mid = (lo + hi) / 2;
    if (f(mid) > target) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}

export interface ExactInterval {
  /** Successes over trials; null when n = 0 (as are the bounds). */
  rate: number | null;
  lo: number | null;
  hi: number | null;
}

/**
 * Clopper–Pearson interval for x successes in n trials at `level` (default 0.95): the lower bound solves
 * P(X ≥ x | p) = α/2, the upper P(X ≤ x | p) = α/2; 0 and 1 at the edges x = 0 and x = n.
 */
export function exactInterval(x: number, n: number, level = 0.95): ExactInterval {
  if (n <= 0) return { rate: null, lo: null, hi: null };
  const alpha = (1 - level) / 2;
  const lo = x <= 0 ? 0 : solveDecreasing((p) => cdf(x - 1, n, p), 1 - alpha);
  const hi = x >= n ? 1 : solveDecreasing((p) => cdf(x, n, p), alpha);
  return { rate: x / n, lo, hi };
}
