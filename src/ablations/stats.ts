/**
 * Statistics for judge ablations: confusion-matrix rates, clustered percentile bootstrap, Fleiss' κ,
 * McNemar's exact test, calibration (ECE, Brier) and reviewer bias. Pure functions, no I/O.
 * Undefined quantities (a rate with an empty denominator) are `null`, never NaN, so they survive JSON.
 */

export interface Confusion {
  tp: number;
  fp: number;
  tn: number;
  fn: number;
}

export interface Rates {
  precision: number | null;
  recall: number | null;
  f1: number | null;
  accuracy: number | null;
  specificity: number | null;
}
export type RateName = keyof Rates;
export const RATE_NAMES: readonly RateName[] = ['precision', 'recall', 'f1', 'accuracy', 'specificity'];

export const EMPTY_CONFUSION: Readonly<Confusion> = Object.freeze({ tp: 0, fp: 0, tn: 0, fn: 0 });

/** A fresh, mutable all-zero confusion matrix. */
export function emptyConfusion(): Confusion {
  return { tp: 0, fp: 0, tn: 0, fn: 0 };
}

function ratio(numerator: number, denominator: number): number | null {
  return denominator === 0 ? null : numerator / denominator;
}

/** Counts one (label, predicted) pair into `cm`; 1 = match. The one place a confusion cell is chosen. */
export function countInto(cm: Confusion, label: 0 | 1, predicted: 0 | 1): void {
  if (label === 1) {
    if (predicted === 1) cm.tp++;
    else cm.fn++;
  } else if (predicted === 1) cm.fp++;
  else cm.tn++;
}

/** Counts (label, predicted) pairs; 1 = match. */
export function toConfusion(rows: Iterable<{ label: 0 | 1; predicted: 0 | 1 }>): Confusion {
  const cm = emptyConfusion();
  for (const { label, predicted } of rows) countInto(cm, label, predicted);
  return cm;
}

/** Adds 1 to `map[key]` (a count per status, code, round …). */
export function increment(map: Record<string, number>, key: string): void {
  map[key] = (map[key] ?? 0) + 1;
}

export function addConfusion(a: Confusion, b: Confusion): Confusion {
  return { tp: a.tp + b.tp, fp: a.fp + b.fp, tn: a.tn + b.tn, fn: a.fn + b.fn };
}

export function rates(cm: Confusion): Rates {
  const precision = ratio(cm.tp, cm.tp + cm.fp);
  const recall = ratio(cm.tp, cm.tp + cm.fn);
  // F1 = 2TP / (2TP + FP + FN): defined (0) even when precision is undefined but positives were missed.
  const f1 = ratio(2 * cm.tp, 2 * cm.tp + cm.fp + cm.fn);
  return {
    precision,
    recall,
    f1,
    accuracy: ratio(cm.tp + cm.tn, cm.tp + cm.tn + cm.fp + cm.fn),
    specificity: ratio(cm.tn, cm.tn + cm.fp),
  };
}

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

/** Quantile with linear interpolation between order statistics (R type 7) of an ascending array. */
export function quantile(sorted: readonly number[], q: number): number | null {
  if (sorted.length === 0) return null;
  const position = (sorted.length - 1) * q;
  const below = Math.floor(position);
  const above = Math.ceil(position);
  const lo = sorted[below] ?? Number.NaN;
  const hi = sorted[above] ?? Number.NaN;
  return lo + (hi - lo) * (position - below);
}

export interface Interval {
  /** Percentile bounds; null when the statistic was undefined in every resample. */
  lo: number | null;
  hi: number | null;
  /** Confidence level, e.g. 0.95. */
  level: number;
  resamples: number;
  /** Resamples in which the statistic was undefined (excluded from the percentiles). */
  undefinedResamples: number;
}

export interface BootstrapOptions {
  /** Number of resamples (default 2000; the ablation reports never use fewer). */
  resamples?: number | undefined;
  seed: number;
  /** Default 0.95. */
  level?: number | undefined;
}

export const DEFAULT_RESAMPLES = 2000;

/**
 * Clustered percentile bootstrap: each resample draws `clusters.length` clusters with replacement (the
 * cluster is the unit, e.g. all items sharing one ground truth) and evaluates every statistic on the drawn
 * clusters. All statistics share the same resamples, so their intervals are mutually consistent.
 */
export function clusteredBootstrap<C, K extends string>(
  clusters: readonly C[],
  statistics: Readonly<Record<K, (sample: readonly C[]) => number | null>>,
  options: BootstrapOptions,
): Record<K, Interval> {
  const resamples = options.resamples ?? DEFAULT_RESAMPLES;
  const level = options.level ?? 0.95;
  const rng = createRng(options.seed);
  const names = Object.keys(statistics).filter((k): k is K => Object.hasOwn(statistics, k));
  const values = new Map<K, number[]>(names.map((k) => [k, []]));
  const sample: C[] = new Array<C>(clusters.length);
  for (let r = 0; r < resamples; r++) {
    for (let i = 0; i < clusters.length; i++) {
      const drawn = clusters[Math.floor(rng() * clusters.length)];
      if (drawn !== undefined) sample[i] = drawn;
    }
    for (const name of names) {
      const value = statistics[name](clusters.length === 0 ? [] : sample);
      if (value !== null && Number.isFinite(value)) values.get(name)?.push(value);
    }
  }
  // Every statistic name gets an interval; Record<string, _> is assignable to Record<K, _>.
  const out: Record<string, Interval> = {};
  for (const name of names) {
    const sorted = (values.get(name) ?? []).sort((a, b) => a - b);
    out[name] = {
      lo: quantile(sorted, (1 - level) / 2),
      hi: quantile(sorted, 1 - (1 - level) / 2),
      level,
      resamples,
      undefinedResamples: resamples - sorted.length,
    };
  }
  return out;
}

function sumConfusions(sample: readonly Confusion[]): Confusion {
  let total: Confusion = EMPTY_CONFUSION;
  for (const cm of sample) total = addConfusion(total, cm);
  return total;
}

export interface RatesWithCi {
  confusion: Confusion;
  n: number;
  point: Rates;
  ci: Record<RateName, Interval>;
}

/** Point estimates and clustered-bootstrap CIs of every rate, from one confusion matrix per cluster. */
export function ratesWithCi(clusters: readonly Confusion[], options: BootstrapOptions): RatesWithCi {
  const confusion = sumConfusions(clusters);
  const stat = (name: RateName) => (sample: readonly Confusion[]) => rates(sumConfusions(sample))[name];
  const ci = clusteredBootstrap(
    clusters,
    {
      precision: stat('precision'),
      recall: stat('recall'),
      f1: stat('f1'),
      accuracy: stat('accuracy'),
      specificity: stat('specificity'),
    },
    options,
  );
  return {
    confusion,
    n: confusion.tp + confusion.fp + confusion.tn + confusion.fn,
    point: rates(confusion),
    ci,
  };
}

/** Hits out of trials per cluster, for a proportion (failure rate, false-positive rate, flip rate). */
export interface Tally {
  hits: number;
  trials: number;
}

export interface Proportion {
  hits: number;
  trials: number;
  rate: number | null;
  ci: Interval;
}

/** A proportion with a clustered-bootstrap CI. */
export function proportionWithCi(clusters: readonly Tally[], options: BootstrapOptions): Proportion {
  const total = (sample: readonly Tally[]) => {
    let hits = 0;
    let trials = 0;
    for (const t of sample) {
      hits += t.hits;
      trials += t.trials;
    }
    return { hits, trials };
  };
  const { hits, trials } = total(clusters);
  const ci = clusteredBootstrap(
    clusters,
    {
      rate: (sample: readonly Tally[]) => {
        const t = total(sample);
        return ratio(t.hits, t.trials);
      },
    },
    options,
  ).rate;
  return { hits, trials, rate: ratio(hits, trials), ci };
}

/** Per cluster: the confusion matrices of two graphs over the same items. */
export interface PairedConfusion {
  a: Confusion;
  b: Confusion;
}

export interface PairedF1 {
  n: number;
  f1A: number | null;
  f1B: number | null;
  /** F1(a) − F1(b). */
  difference: number | null;
  ci: Interval;
}

/** Paired clustered bootstrap of F1(a) − F1(b): both graphs are resampled on the same clusters. */
export function pairedF1Difference(
  clusters: readonly PairedConfusion[],
  options: BootstrapOptions,
): PairedF1 {
  const diff = (sample: readonly PairedConfusion[]) => {
    const f1A = rates(sumConfusions(sample.map((p) => p.a))).f1;
    const f1B = rates(sumConfusions(sample.map((p) => p.b))).f1;
    return f1A === null || f1B === null ? null : f1A - f1B;
  };
  const a = sumConfusions(clusters.map((p) => p.a));
  const f1A = rates(a).f1;
  const f1B = rates(sumConfusions(clusters.map((p) => p.b))).f1;
  return {
    n: a.tp + a.fp + a.tn + a.fn,
    f1A,
    f1B,
    difference: f1A === null || f1B === null ? null : f1A - f1B,
    ci: clusteredBootstrap(clusters, { diff }, options).diff,
  };
}

function logFactorialTable(n: number): Float64Array {
  const table = new Float64Array(n + 1);
  for (let i = 2; i <= n; i++) table[i] = (table[i - 1] ?? 0) + Math.log(i);
  return table;
}

/**
 * McNemar's exact (binomial) two-sided p-value. `b` = pairs where only the first classifier is right,
 * `c` = pairs where only the second is right; under H0 b ~ Binomial(b + c, ½).
 * p = min(1, 2 · P(X ≤ min(b, c))).
 */
export function mcnemarExact(b: number, c: number): number {
  if (!Number.isInteger(b) || !Number.isInteger(c) || b < 0 || c < 0) {
    throw new RangeError('mcnemarExact: b and c must be non-negative integers');
  }
  const n = b + c;
  if (n === 0) return 1;
  const logF = logFactorialTable(n);
  const k = Math.min(b, c);
  let tail = 0;
  for (let i = 0; i <= k; i++) {
    tail += Math.exp((logF[n] ?? 0) - (logF[i] ?? 0) - (logF[n - i] ?? 0) - n * Math.LN2);
  }
  return Math.min(1, 2 * tail);
}

/**
 * Fleiss' κ for a subjects × categories matrix of rating counts; every subject must have the same number
 * of raters (≥ 2). Returns null when κ is undefined (no subjects, or every rating in one category).
 */
export function fleissKappa(counts: readonly (readonly number[])[]): number | null {
  const first = counts[0];
  if (first === undefined) return null;
  const raters = first.reduce((s, x) => s + x, 0);
  if (raters < 2) throw new RangeError('fleissKappa: at least 2 raters per subject');
  const categories = first.length;
  const totals = new Array<number>(categories).fill(0);
  let sumPi = 0;
  for (const [index, row] of counts.entries()) {
    if (row.length !== categories)
      throw new RangeError(`fleissKappa: row ${index} has ${row.length} categories`);
    const n = row.reduce((s, x) => s + x, 0);
    if (n !== raters) throw new RangeError(`fleissKappa: row ${index} has ${n} ratings, expected ${raters}`);
    let squares = 0;
    for (const [j, x] of row.entries()) {
      squares += x * x;
      totals[j] = (totals[j] ?? 0) + x;
    }
    sumPi += (squares - raters) / (raters * (raters - 1));
  }
  const pBar = sumPi / counts.length;
  const all = counts.length * raters;
  const pe = totals.reduce((s, t) => s + (t / all) ** 2, 0);
  if (pe >= 1 - 1e-12) return null;
  return (pBar - pe) / (1 - pe);
}

export interface CalibrationBin {
  lo: number;
  hi: number;
  n: number;
  meanScore: number | null;
  positiveRate: number | null;
}

export interface Calibration {
  n: number;
  /** Expected calibration error: Σ_b (n_b / n) · |positive rate_b − mean score_b|, equal-width bins. */
  ece: number | null;
  /** Mean squared error of the score against the 0/1 label. */
  brier: number | null;
  bins: CalibrationBin[];
}

/** ECE and Brier score of scores in [0,1] (estimated P(match)) against labels. Default 10 bins. */
export function calibration(rows: readonly { score: number; label: 0 | 1 }[], binCount = 10): Calibration {
  const sums = Array.from({ length: binCount }, () => ({ n: 0, score: 0, positives: 0 }));
  let squared = 0;
  for (const { score, label } of rows) {
    const index = Math.min(binCount - 1, Math.max(0, Math.floor(score * binCount)));
    const bin = sums[index];
    if (bin === undefined) continue;
    bin.n++;
    bin.score += score;
    bin.positives += label;
    squared += (score - label) ** 2;
  }
  const n = rows.length;
  let ece = 0;
  const bins = sums.map((bin, index) => {
    const meanScore = ratio(bin.score, bin.n);
    const positiveRate = ratio(bin.positives, bin.n);
    if (meanScore !== null && positiveRate !== null) ece += (bin.n / n) * Math.abs(positiveRate - meanScore);
    return { lo: index / binCount, hi: (index + 1) / binCount, n: bin.n, meanScore, positiveRate };
  });
  return { n, ece: n === 0 ? null : ece, brier: ratio(squared, n), bins };
}

export type Bias = 'permissive' | 'strict' | 'balanced';

export interface ReviewerCalibration {
  tpr: number | null;
  tnr: number | null;
  fpr: number | null;
  fnr: number | null;
  /**
   * `permissive` when FPR − FNR > tolerance (accepts too much), `strict` when FNR − FPR > tolerance,
   * else `balanced`; null when either class is absent.
   */
  bias: Bias | null;
  tolerance: number;
}

/** Default tolerance on |FPR − FNR| for a reviewer to count as balanced. */
export const BIAS_TOLERANCE = 0.05;

/** Reviewer calibration (the seed's protocol): error rates on each class and the direction of the bias. */
export function reviewerCalibration(cm: Confusion, tolerance = BIAS_TOLERANCE): ReviewerCalibration {
  const tpr = ratio(cm.tp, cm.tp + cm.fn);
  const tnr = ratio(cm.tn, cm.tn + cm.fp);
  const fpr = tnr === null ? null : 1 - tnr;
  const fnr = tpr === null ? null : 1 - tpr;
  let bias: Bias | null = null;
  if (fpr !== null && fnr !== null) {
    if (fpr - fnr > tolerance) bias = 'permissive';
    else if (fnr - fpr > tolerance) bias = 'strict';
    else bias = 'balanced';
  }
  return { tpr, tnr, fpr, fnr, bias, tolerance };
}

/** Mean, median and 95th percentile of a list of numbers (nulls when empty). */
export function summarize(values: readonly number[]): {
  mean: number | null;
  p50: number | null;
  p95: number | null;
} {
  if (values.length === 0) return { mean: null, p50: null, p95: null };
  const sorted = [...values].sort((a, b) => a - b);
  return {
    mean: sorted.reduce((s, x) => s + x, 0) / sorted.length,
    p50: quantile(sorted, 0.5),
    p95: quantile(sorted, 0.95),
  };
}
