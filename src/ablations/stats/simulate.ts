/**
 * Random draws for the coverage simulations (seeded mulberry32 underneath, so every simulated table is
 * reproducible): normal, gamma, and a cluster's event rate with a given intra-cluster correlation.
 */
export type Rng = () => number;

/** Standard normal by Box–Muller. */
export function normal(rng: Rng): number {
  let u = 0;
  while (u === 0) u = rng();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * rng());
}

export const logistic = (x: number): number => 1 / (1 + Math.exp(-x));

/** Gamma(shape) by Marsaglia–Tsang (shape < 1 boosted). */
export function gamma(rng: Rng, shape: number): number {
  if (shape < 1) return gamma(rng, shape + 1) * rng() ** (1 / shape);
  const d = shape - 1 / 3;
  const c = 1 / Math.sqrt(9 * d);
  for (let i = 0; i < 1000; i++) {
    const x = normal(rng);
    const v = (1 + c * x) ** 3;
    if (v <= 0) continue;
    const u = rng();
    if (Math.log(u) < 0.5 * x * x + d * (1 - v + Math.log(v))) return d * v;
  }
  return shape;
}

/** A cluster's event rate: `p` itself, or Beta-distributed around it with intra-cluster correlation `icc`. */
export function clusterRate(rng: Rng, p: number, icc: number): number {
  if (icc === 0) return p;
  const s = (1 - icc) / icc;
  const a = gamma(rng, p * s);
  const b = gamma(rng, (1 - p) * s);
  return a / (a + b);
}
