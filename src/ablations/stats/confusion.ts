/**
 * Confusion matrices and their rates (precision, recall, F1, accuracy, specificity). Pure; an undefined
 * rate (empty denominator) is `null`, never NaN, so it survives JSON.
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

/** A fresh, mutable all-zero confusion matrix. */
export function emptyConfusion(): Confusion {
  return { tp: 0, fp: 0, tn: 0, fn: 0 };
}

export function ratio(numerator: number, denominator: number): number | null {
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

export function sumConfusions(list: readonly Confusion[]): Confusion {
  const sum = emptyConfusion();
  for (const cm of list) {
    sum.tp += cm.tp;
    sum.fp += cm.fp;
    sum.tn += cm.tn;
    sum.fn += cm.fn;
  }
  return sum;
}

export function total(cm: Confusion): number {
  return cm.tp + cm.fp + cm.tn + cm.fn;
}

/** F1 = 2TP / (2TP + FP + FN): defined (0) even when precision is undefined but positives were missed. */
export function f1Of(tp: number, fp: number, fn: number): number | null {
  return ratio(2 * tp, 2 * tp + fp + fn);
}

export function rates(cm: Confusion): Rates {
  return {
    precision: ratio(cm.tp, cm.tp + cm.fp),
    recall: ratio(cm.tp, cm.tp + cm.fn),
    f1: f1Of(cm.tp, cm.fp, cm.fn),
    accuracy: ratio(cm.tp + cm.tn, total(cm)),
    specificity: ratio(cm.tn, cm.tn + cm.fp),
  };
}

/** Adds 1 to `map[key]` (a count per status, code, round …). */
export function increment(map: Record<string, number>, key: string): void {
  map[key] = (map[key] ?? 0) + 1;
}
