/**
 * Intervals for a classifier's rates over clustered items, and the paired comparison of two classifiers on
 * the same items. Precision, recall, accuracy and specificity are proportions: exact intervals with the
 * design effect (`proportion.ts`). F1: `clustered.ts` (cluster bootstrap, or the jackknife-t below 50
 * clusters). Every paired difference: the cluster jackknife-t, at every cluster count.
 */
import { estimate, type Estimate, type EstimateOptions, type Interval } from './clustered.js';
import { f1Of, rates, sumConfusions, total, type Confusion, type Rates } from './confusion.js';
import { clusteredProportion, type ExactInterval, type Proportion } from './proportion.js';
import { clusteredMcnemar, mcnemarExact } from './significance.js';

export type AnyInterval = Interval | ExactInterval;

export interface RatesWithCi {
  confusion: Confusion;
  n: number;
  point: Rates;
  ci: {
    precision: ExactInterval;
    recall: ExactInterval;
    accuracy: ExactInterval;
    specificity: ExactInterval;
    f1: Interval;
  };
}

const confusionRow = (cm: Confusion): number[] => [cm.tp, cm.fp, cm.tn, cm.fn];
const f1OfRow = ([tp = 0, fp = 0, , fn = 0]: readonly number[]): number | null => f1Of(tp, fp, fn);

/** 2PR / (P + R), 0 when both are 0. */
function harmonic(p: number, r: number): number {
  return p + r === 0 ? 0 : (2 * p * r) / (p + r);
}

/**
 * When resampling cannot give F1 an interval (degenerate or undefined), F1's monotonicity in precision and
 * recall still does: their exact intervals at level 1 − (1 − level)/2 each bound F1 at ≥ `level` jointly
 * (Bonferroni). Wider, never made up.
 */
function f1Bound(precision: Proportion, recall: Proportion, level: number, why: string | null): Interval {
  const lo = harmonic(precision.ci.lo ?? 0, recall.ci.lo ?? 0);
  const hi = harmonic(precision.ci.hi ?? 1, recall.ci.hi ?? 1);
  return {
    lo,
    hi,
    level,
    method: 'clopper-pearson-bound',
    resamples: 0,
    undefinedResamples: 0,
    mcError: 0,
    note: `bounded by the exact precision and recall intervals${why === null ? '' : ` (${why})`}`,
  };
}

/** Rates of a classifier from one confusion matrix per cluster, each with its interval. */
export function ratesWithCi(clusters: readonly Confusion[], options: EstimateOptions): RatesWithCi {
  const level = options.level ?? 0.95;
  const confusion = sumConfusions(clusters);
  const prop = (hits: (c: Confusion) => number, trials: (c: Confusion) => number, at = level) =>
    clusteredProportion(
      clusters.map((c) => ({ hits: hits(c), trials: trials(c) })),
      at,
    );
  const precision = prop(
    (c) => c.tp,
    (c) => c.tp + c.fp,
  );
  const recall = prop(
    (c) => c.tp,
    (c) => c.tp + c.fn,
  );
  const { f1 } = estimate(clusters.map(confusionRow), { f1: { fn: f1OfRow, scale: 'rate' } }, options);
  let f1Ci = f1.ci;
  if (f1.point !== null && (f1.ci.lo === null || f1.ci.hi === null)) {
    const half = 1 - (1 - level) / 2;
    f1Ci = f1Bound(
      prop(
        (c) => c.tp,
        (c) => c.tp + c.fp,
        half,
      ),
      prop(
        (c) => c.tp,
        (c) => c.tp + c.fn,
        half,
      ),
      level,
      f1.ci.note,
    );
  }
  return {
    confusion,
    n: total(confusion),
    point: rates(confusion),
    ci: {
      precision: precision.ci,
      recall: recall.ci,
      accuracy: prop((c) => c.tp + c.tn, total).ci,
      specificity: prop(
        (c) => c.tn,
        (c) => c.tn + c.fp,
      ).ci,
      f1: f1Ci,
    },
  };
}

/** Per cluster: two classifiers on the same items, and how often exactly one of them is right. */
export interface PairedCluster {
  a: Confusion;
  b: Confusion;
  /** Items where only `a` is right / only `b` is right. */
  onlyA: number;
  onlyB: number;
}

export interface PairedRates {
  /** Items both decided. */
  n: number;
  clusters: number;
  /** a − b, each with its jackknife-t interval and p-value (paired: both left out on the same clusters). */
  f1: Estimate;
  precision: Estimate;
  recall: Estimate;
  accuracy: Estimate;
  /**
   * McNemar's tests, of **accuracy**: b = only a right, c = only b right. `exactP` treats items as
   * independent; `clusteredP` (Durkalski) respects the clusters.
   */
  mcnemar: { b: number; c: number; exactP: number; clusteredP: number };
}

const diff = (x: number | null, y: number | null): number | null => (x === null || y === null ? null : x - y);

/** Paired differences a − b of F1, precision, recall and accuracy, and McNemar's tests of accuracy. */
export function pairedRates(clusters: readonly PairedCluster[], options: EstimateOptions): PairedRates {
  const rows = clusters.map((p) => [...confusionRow(p.a), ...confusionRow(p.b)]);
  const split = (s: readonly number[]) => {
    const [atp = 0, afp = 0, atn = 0, afn = 0, btp = 0, bfp = 0, btn = 0, bfn = 0] = s;
    return [
      rates({ tp: atp, fp: afp, tn: atn, fn: afn }),
      rates({ tp: btp, fp: bfp, tn: btn, fn: bfn }),
    ] as const;
  };
  const of = (name: 'f1' | 'precision' | 'recall' | 'accuracy') => ({
    scale: 'difference' as const,
    fn: (s: readonly number[]) => {
      const [ra, rb] = split(s);
      return diff(ra[name], rb[name]);
    },
  });
  // Differences use the jackknife-t at every cluster count: the paired percentile bootstrap covered ΔF1 at
  // 0.929 with 50 clusters and 0.937 with 100, and its p-value's type-I error was 0.056–0.061 (the coverage
  // table of docs/ablations.md has the jackknife-t's).
  const estimates = estimate(
    rows,
    { f1: of('f1'), precision: of('precision'), recall: of('recall'), accuracy: of('accuracy') },
    { ...options, method: 'jackknife-t' },
  );
  let b = 0;
  let c = 0;
  for (const p of clusters) {
    b += p.onlyA;
    c += p.onlyB;
  }
  return {
    n: total(sumConfusions(clusters.map((p) => p.a))),
    clusters: clusters.filter((p) => total(p.a) > 0).length,
    ...estimates,
    mcnemar: {
      b,
      c,
      exactP: mcnemarExact(b, c),
      clusteredP: clusteredMcnemar(clusters.map((p) => ({ b: p.onlyA, c: p.onlyB }))),
    },
  };
}
