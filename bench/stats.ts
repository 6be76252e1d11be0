/** Small statistics helpers for the benchmark (percentiles of latencies, median/min/max over runs). */

/** Nearest-rank percentile (p in [0, 100]) of unsorted values; NaN when empty. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  return nearestRank(
    [...values].sort((a, b) => a - b),
    p,
  );
}

function nearestRank(sorted: readonly number[], p: number): number {
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1]!;
}

/** Latency percentiles and max, ms. */
export interface LatencySummary {
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

/** p50/p90/p99 (nearest rank) and max of unsorted latencies, sorting once; NaN fields when empty. */
export function latencySummary(values: readonly number[]): LatencySummary {
  if (values.length === 0) return { p50: NaN, p90: NaN, p99: NaN, max: NaN };
  const sorted = [...values].sort((a, b) => a - b);
  return {
    p50: nearestRank(sorted, 50),
    p90: nearestRank(sorted, 90),
    p99: nearestRank(sorted, 99),
    max: Math.max(0, sorted[sorted.length - 1]!),
  };
}

export interface Spread {
  median: number;
  min: number;
  max: number;
  n: number;
}

/** Median (mean of the middle two for even n) with min and max; NaN fields when empty. */
export function spread(values: readonly number[]): Spread {
  const xs = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (xs.length === 0) return { median: NaN, min: NaN, max: NaN, n: 0 };
  const mid = xs.length >> 1;
  const median = xs.length % 2 === 1 ? xs[mid]! : (xs[mid - 1]! + xs[mid]!) / 2;
  return { median, min: xs[0]!, max: xs[xs.length - 1]!, n: xs.length };
}

/** A number with `digits` decimals, or `—` when not finite. */
export function fmt(value: number, digits = 0): string {
  return Number.isFinite(value) ? value.toFixed(digits) : '—';
}

/** `median (min–max)`; just the median when n = 1. */
export function fmtSpread(s: Spread, digits = 0): string {
  if (s.n <= 1) return fmt(s.median, digits);
  return `${fmt(s.median, digits)} (${fmt(s.min, digits)}–${fmt(s.max, digits)})`;
}
