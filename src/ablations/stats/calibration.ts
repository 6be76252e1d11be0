/**
 * How a reviewer errs: calibration of its score (ECE, Brier) and the direction of its bias (FPR on hard
 * negatives vs FNR, with an interval). Pure.
 */
import { clusteredProportion, type Proportion, type Tally } from './proportion.js';
import { estimate, type Estimate, type EstimateOptions } from './clustered.js';
import { ratio, sumConfusions, type Confusion } from './confusion.js';

/**
 * What a graph's `score` is: the deciding node's `confidence` turned towards match, a `vote-share` (the
 * fraction of voters saying match: not a probability, its ECE is not comparable with a confidence's), or a
 * `weighted-confidence` (confidence-weighted vote).
 */
export type ScoreKind = 'confidence' | 'vote-share' | 'weighted-confidence';

export interface CalibrationBin {
  lo: number;
  hi: number;
  n: number;
  meanScore: number | null;
  positiveRate: number | null;
}

export interface Calibration {
  kind: ScoreKind;
  n: number;
  /** Expected calibration error: Σ_b (n_b / n) · |positive rate_b − mean score_b|, equal-width bins. */
  ece: number | null;
  /** Mean squared error of the score against the 0/1 label. */
  brier: number | null;
  bins: CalibrationBin[];
}

/** ECE and Brier score of scores in [0,1] (estimated P(match)) against labels. Default 10 bins. */
export function calibration(
  rows: readonly { score: number; label: 0 | 1 }[],
  kind: ScoreKind,
  binCount = 10,
): Calibration {
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
  return { kind, n, ece: n === 0 ? null : ece, brier: ratio(squared, n), bins };
}

export type Bias = 'permissive' | 'strict' | 'balanced';

/** Default tolerance on |FPR − FNR| for a reviewer to count as balanced. */
export const BIAS_TOLERANCE = 0.05;

/** One cluster's outcomes for the bias: its confusion on every item, and its hard negatives. */
export interface BiasCluster {
  all: Confusion;
  /** False positives (hits) among the cluster's hard negatives (trials). */
  hard: Tally;
}

export interface ReviewerCalibration {
  /** On every decided item (points). */
  tpr: number | null;
  tnr: number | null;
  fpr: number | null;
  fnr: number | null;
  /** Which negatives the bias is measured on: hard negatives, or all when the set has none. */
  negatives: 'hard_negative' | 'all';
  /** FPR on those negatives and FNR, with exact intervals. */
  negativeFpr: Proportion;
  positiveFnr: Proportion;
  /** negativeFpr − positiveFnr, with its clustered interval. */
  difference: Estimate;
  /**
   * `permissive` when the difference > tolerance (accepts too much), `strict` when < −tolerance, else
   * `balanced`; null when either class is absent. Easy negatives are left out: a committee that rejects
   * unrelated ideas is not strict for it.
   */
  bias: Bias | null;
  /**
   * True when the interval supports the label: it excludes 0 on the label's side (permissive, strict) or
   * lies within ±tolerance (balanced). False: the label is the point estimate's, not shown by the data.
   */
  shown: boolean | null;
  tolerance: number;
}

/** A bias label and whether its interval shows it (see `callBias`). */
export interface BiasLabel {
  bias: Bias | null;
  shown: boolean | null;
}

/**
 * The one bias rule of `ablate` (graphs and their agents) and `calibrate` (members), so the same reviewer on
 * the same items gets the same label in both: from the point estimate d = FPR − FNR, `permissive` when
 * d > tolerance (accepts too much), `strict` when d < −tolerance, else `balanced`; null without a d. `shown`:
 * the interval supports the label — it excludes 0 on the label's side (permissive, strict) or lies within
 * ±tolerance (balanced); false when it does not (or there is no interval), null without a label.
 */
export function callBias(
  point: number | null,
  lo: number | null,
  hi: number | null,
  tolerance = BIAS_TOLERANCE,
): BiasLabel {
  if (point === null) return { bias: null, shown: null };
  if (point > tolerance) return { bias: 'permissive', shown: lo !== null && lo > 0 };
  if (point < -tolerance) return { bias: 'strict', shown: hi !== null && hi < 0 };
  return { bias: 'balanced', shown: lo !== null && hi !== null && lo >= -tolerance && hi <= tolerance };
}

/** Reviewer calibration (the seed's protocol) with the bias on hard negatives and its interval. */
export function reviewerCalibration(
  clusters: readonly BiasCluster[],
  options: EstimateOptions & { hardNegatives: boolean; tolerance?: number | undefined },
): ReviewerCalibration {
  const tolerance = options.tolerance ?? BIAS_TOLERANCE;
  const hard = options.hardNegatives;
  const negativeTally = (c: BiasCluster): Tally =>
    hard ? c.hard : { hits: c.all.fp, trials: c.all.fp + c.all.tn };
  // Rows: negative false positives, negatives, false negatives, positives.
  const rows = clusters.map((c) => {
    const neg = negativeTally(c);
    return [neg.hits, neg.trials, c.all.fn, c.all.fn + c.all.tp];
  });
  const all = sumConfusions(clusters.map((c) => c.all));
  const tpr = ratio(all.tp, all.tp + all.fn);
  const tnr = ratio(all.tn, all.tn + all.fp);
  const negativeFpr = clusteredProportion(clusters.map(negativeTally), options.level);
  const positiveFnr = clusteredProportion(
    clusters.map((c) => ({ hits: c.all.fn, trials: c.all.fn + c.all.tp })),
    options.level,
  );
  const { difference } = estimate(
    rows,
    {
      difference: {
        scale: 'difference',
        fn: ([fp = 0, n = 0, fn = 0, p = 0]) => (n === 0 || p === 0 ? null : fp / n - fn / p),
      },
    },
    options,
  );
  const { bias, shown } = callBias(difference.point, difference.ci.lo, difference.ci.hi, tolerance);
  return {
    tpr,
    tnr,
    fpr: tnr === null ? null : 1 - tnr,
    fnr: tpr === null ? null : 1 - tpr,
    negatives: hard ? 'hard_negative' : 'all',
    negativeFpr,
    positiveFnr,
    difference,
    bias,
    shown,
    tolerance,
  };
}
