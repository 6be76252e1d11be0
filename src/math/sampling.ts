/**
 * Numeric helpers shared by the judge (Bradley–Terry bootstrap) and the ablation statistics: a seeded PRNG
 * and an order-statistic quantile. A leaf: it imports nothing.
 */

/** Deterministic PRNG (mulberry32) returning floats in [0, 1). Same seed, same stream, on every platform. */
export function createRng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Quantile with linear interpolation between order statistics (R type 7) of an ascending array; null for
 * an empty one.
 */
export function quantile(sorted: readonly number[], q: number): number | null {
  if (sorted.length === 0) return null;
  const position = (sorted.length - 1) * q;
  const below = Math.floor(position);
  const above = Math.ceil(position);
  const lo = sorted[below] ?? Number.NaN;
  const hi = sorted[above] ?? Number.NaN;
  return lo + (hi - lo) * (position - below);
}
