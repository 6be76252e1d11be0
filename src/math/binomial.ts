/**
 * The exact (Clopper–Pearson) interval of a binomial proportion, for serving (`GET /v1/integrity`): the
 * ablation statistics have their own, richer one, and serving imports no statistics. A leaf: it imports
 * nothing. Bounds by bisection on the binomial tail (60 halvings: below 1e-15), each tail the regularized
 * incomplete beta function (a continued fraction), so an interval costs microseconds at any n.
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

/** Continued fraction of the incomplete beta function (modified Lentz; Numerical Recipes §6.4). */
function betaFraction(a: number, b: number, x: number): number {
  const tiny = 1e-300;
  let c = 1;
  let d = 1 - ((a + b) * x) / (a + 1);
  if (Math.abs(d) < tiny) d = tiny;
  d = 1 / d;
  let h = d;
  for (let m = 1; m <= 300; m++) {
    const m2 = 2 * m;
    let aa = (m * (b - m) * x) / ((a + m2 - 1) * (a + m2));
    d = 1 + aa * d;
    if (Math.abs(d) < tiny) d = tiny;
    c = 1 + aa / c;
    if (Math.abs(c) < tiny) c = tiny;
    d = 1 / d;
    h *= d * c;
    aa = (-(a + m) * (a + b + m) * x) / ((a + m2) * (a + m2 + 1));
    d = 1 + aa * d;
    if (Math.abs(d) < tiny) d = tiny;
    c = 1 + aa / c;
    if (Math.abs(c) < tiny) c = tiny;
    d = 1 / d;
    const step = d * c;
    h *= step;
    if (Math.abs(step - 1) < 1e-15) break;
  }
  return h;
}

/** The regularized incomplete beta function I_x(a, b), a, b > 0. */
function incompleteBeta(x: number, a: number, b: number): number {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const front = Math.exp(logGamma(a + b) - logGamma(a) - logGamma(b) + a * Math.log(x) + b * Math.log1p(-x));
  return x < (a + 1) / (a + b + 2)
    ? (front * betaFraction(a, b, x)) / a
    : 1 - (front * betaFraction(b, a, 1 - x)) / b;
}

/** P(X ≤ k) for X ~ Binomial(n, p) = 1 − I_p(k + 1, n − k). */
function cdf(k: number, n: number, p: number): number {
  if (k < 0) return 0;
  if (k >= n || p <= 0) return 1;
  if (p >= 1) return 0;
  return 1 - incompleteBeta(p, k + 1, n - k);
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
