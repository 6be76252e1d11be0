/**
 * Per-cluster counts of a set of predictions against the labels: the input of every clustered statistic of
 * an ablation (confusion matrices, bias tallies, hits over trials). Pure.
 */
import type { DatasetItem } from './dataset.js';
import type { BiasCluster } from './stats/calibration.js';
import { countInto, emptyConfusion, type Confusion } from './stats/confusion.js';
import type { Tally } from './stats/proportion.js';

/** Clusters of the items (see `clusterIndex`): how many, and each item's cluster. */
export interface ClusterIndex {
  count: number;
  of: readonly number[];
}

/** What the analysis of one item set shares: the items, their clusters, whether hard negatives exist. */
export interface ItemSet {
  items: readonly DatasetItem[];
  clusters: ClusterIndex;
  /** The set has hard negatives: the bias is measured on them (else on every negative). */
  hardNegatives: boolean;
}

/** A prediction for item `i`, or null when there is none (a failure, a node without a stance). */
export type Prediction = (i: number) => 0 | 1 | null;

export function emptyTallies(count: number): Tally[] {
  return Array.from({ length: count }, () => ({ hits: 0, trials: 0 }));
}

/** One confusion matrix per cluster over the items with a prediction. */
export function confusionsByCluster(set: ItemSet, predicted: Prediction): Confusion[] {
  const out = Array.from({ length: set.clusters.count }, emptyConfusion);
  set.items.forEach((item, i) => {
    const p = predicted(i);
    const cm = out[set.clusters.of[i] ?? -1];
    if (p !== null && cm !== undefined) countInto(cm, item.label, p);
  });
  return out;
}

/** Per cluster: the confusion matrix and the false positives among hard negatives (for the bias). */
export function biasClusters(set: ItemSet, predicted: Prediction): BiasCluster[] {
  const all = confusionsByCluster(set, predicted);
  const hard = emptyTallies(set.clusters.count);
  set.items.forEach((item, i) => {
    const p = predicted(i);
    const t = hard[set.clusters.of[i] ?? -1];
    if (p === null || t === undefined || item.kind !== 'hard_negative') return;
    t.trials++;
    t.hits += p;
  });
  return all.map((cm, c) => ({ all: cm, hard: hard[c] ?? { hits: 0, trials: 0 } }));
}
