/**
 * Honest selection for `--plan` and `--suggest`: the items are split by ground-truth cluster (items sharing a
 * ground truth stay on one side, as every interval of the report treats them) into a selection part, on
 * which the committee and the strictness suggestions are chosen, and a disjoint held-out part, on which the
 * chosen committee is scored. The split is a deterministic function of `--seed` and each cluster's key, so
 * it does not move when items are reordered. Pure.
 */
import { createHash } from 'node:crypto';
import { clusterKey, type DatasetItem } from '../dataset.js';
import { FEW_CLUSTERS } from '../stats/clustered.js';
import { emptyConfusion, countInto, total, type Confusion } from '../stats/confusion.js';
import { clusteredClopperPearson, type BinomialInterval } from './binomial.js';
import { ruleSaysMatch } from './condorcet.js';
import type { GraphRun, VoteTable } from './members.js';
import type { Plan, PlannedCommittee } from './plan.js';

/** Share of the ground-truth clusters held out when `--holdout` is not given. */
export const HOLDOUT_FRACTION = 0.5;

export interface SplitPart {
  items: number;
  clusters: number;
  positives: number;
  negatives: number;
}

export interface SplitSummary {
  method: 'cluster_holdout';
  seed: number;
  /** Share of the clusters held out (asked for; the realised share is `heldOut.clusters` / all clusters). */
  fraction: number;
  selection: SplitPart;
  heldOut: SplitPart;
  /** False when the held-out part is too small for an interval (no held-out scores are then made). */
  scored: boolean;
  /** E.g. a held-out part too small for an interval; printed by the CLI and in the report. */
  warnings: string[];
}

export interface ItemSplit {
  /** Item indices (into the table's items), in item order. */
  selection: number[];
  heldOut: number[];
  summary: SplitSummary;
}

function part(items: readonly DatasetItem[], indices: readonly number[]): SplitPart {
  const clusters = new Set(indices.map((i) => clusterKey(items[i] ?? { ground_truth: '' })));
  const positives = indices.filter((i) => items[i]?.label === 1).length;
  return { items: indices.length, clusters: clusters.size, positives, negatives: indices.length - positives };
}

function tooSmall(heldOut: SplitPart): boolean {
  return heldOut.clusters < 2 || heldOut.positives === 0 || heldOut.negatives === 0;
}

function splitWarnings(heldOut: SplitPart): string[] {
  if (tooSmall(heldOut)) {
    return [
      `held-out part too small for an interval: ${heldOut.clusters} cluster(s), ${heldOut.positives} positives, ` +
        `${heldOut.negatives} negatives; the plan's held-out accuracy is not reported — use more items or a larger --holdout`,
    ];
  }
  if (heldOut.clusters < FEW_CLUSTERS) {
    return [
      `only ${heldOut.clusters} held-out ground-truth clusters (< ${FEW_CLUSTERS}): the held-out intervals are wide`,
    ];
  }
  return [];
}

/**
 * Holds out round(fraction × clusters) clusters (at least one, and one fewer than all when there are two or
 * more): those whose sha256 of `seed:clusterKey` sorts first.
 */
export function splitByCluster(items: readonly DatasetItem[], seed: number, fraction: number): ItemSplit {
  const keys = items.map((item) => clusterKey(item));
  // Each cluster hashed once, not on every comparison of the sort.
  const rank = new Map(
    [...new Set(keys)].map((key) => [key, createHash('sha256').update(`${seed}:${key}`).digest('hex')]),
  );
  const distinct = [...rank.keys()].sort((a, b) => {
    const [ra, rb] = [rank.get(a) ?? '', rank.get(b) ?? ''];
    return ra < rb ? -1 : ra > rb ? 1 : 0;
  });
  const count = Math.min(
    Math.max(1, Math.round(fraction * distinct.length)),
    Math.max(1, distinct.length - 1),
  );
  const held = new Set(distinct.slice(0, count));
  const selection: number[] = [];
  const heldOut: number[] = [];
  keys.forEach((key, i) => (held.has(key) ? heldOut : selection).push(i));
  const heldPart = part(items, heldOut);
  return {
    selection,
    heldOut,
    summary: {
      method: 'cluster_holdout',
      seed,
      fraction,
      selection: part(items, selection),
      heldOut: heldPart,
      scored: !tooSmall(heldPart),
      warnings: splitWarnings(heldPart),
    },
  };
}

/** The table restricted to some items (clusters renumbered). */
export function subsetTable(table: VoteTable, indices: readonly number[]): VoteTable {
  const renumber = new Map<number, number>();
  const clusterOf = indices.map((i) => {
    const c = table.clusterOf[i] ?? -1 - i;
    let at = renumber.get(c);
    if (at === undefined) {
      at = renumber.size;
      renumber.set(c, at);
    }
    return at;
  });
  const pick = <T>(row: readonly T[]): T[] => indices.map((i) => row[i] as T);
  return {
    members: table.members,
    items: pick(table.items),
    clusterOf,
    clusters: renumber.size,
    votes: table.votes.map(pick),
    confidence: table.confidence.map(pick),
  };
}

/** The runs' records restricted to some items (records are aligned with the items). */
export function subsetRuns(runs: readonly GraphRun[], indices: readonly number[]): GraphRun[] {
  return runs.map((run) => ({
    ...run,
    records: indices.map((i) => run.records[i]).filter((r) => r !== undefined),
  }));
}

export interface Rates {
  accuracy: BinomialInterval;
  tpr: BinomialInterval;
  tnr: BinomialInterval;
  precision: BinomialInterval;
}

/** Accuracy, TPR, TNR and precision with exact intervals over clusters, from per-cluster confusion matrices. */
export function clusteredRates(perCluster: Iterable<Confusion>, level: number): Rates {
  const clusters = [...perCluster];
  const rate = (hits: (c: Confusion) => number, trials: (c: Confusion) => number) =>
    clusteredClopperPearson(
      clusters.map((c) => ({ hits: hits(c), trials: trials(c) })),
      level,
    );
  return {
    accuracy: rate((c) => c.tp + c.tn, total),
    tpr: rate(
      (c) => c.tp,
      (c) => c.tp + c.fn,
    ),
    tnr: rate(
      (c) => c.tn,
      (c) => c.tn + c.fp,
    ),
    precision: rate(
      (c) => c.tp,
      (c) => c.tp + c.fp,
    ),
  };
}

export interface HeldOutScore extends Rates {
  members: string[];
  /** Held-out items on which every seat voted (the committee's verdict by majority, ties → no_match). */
  n: number;
  /** Held-out items where some seat gave no stance (a failure): not scored. */
  incomplete: number;
}

/** A majority committee of measured members replayed on the table's items, with clustered exact intervals. */
export function scoreCommittee(
  table: VoteTable,
  keys: readonly string[],
  level: number,
): HeldOutScore | null {
  const rows = keys.map((k) => table.members.findIndex((m) => m.key === k));
  if (rows.length === 0 || rows.some((r) => r < 0)) return null;
  const perCluster = new Map<number, Confusion>();
  let n = 0;
  table.items.forEach((item, i) => {
    const votes = rows.map((r) => table.votes[r]?.[i] ?? null);
    if (votes.some((v) => v === null)) return;
    const ones: (0 | 1)[] = votes.map((v) => (v === 1 ? 1 : 0));
    const said = ruleSaysMatch('majority', ones, [], []) ? 1 : 0;
    const key = table.clusterOf[i] ?? -1 - i;
    const cm = perCluster.get(key) ?? emptyConfusion();
    perCluster.set(key, cm);
    countInto(cm, item.label, said);
    n++;
  });
  return {
    members: [...keys],
    n,
    incomplete: table.items.length - n,
    ...clusteredRates(perCluster.values(), level),
  };
}

/** The plan's committees replayed on the held-out items: what the selection-time accuracies are worth. */
export interface PlanHeldOut {
  best: HeldOutScore | null;
  independenceChoice: HeldOutScore | null;
  bestSingle: HeldOutScore | null;
  /** Held-out accuracy of best − bestSingle and best − independenceChoice (points, no interval). */
  committeeGain: number | null;
  decorrelationGain: number | null;
  /** Selection-time accuracy of `best` minus its held-out accuracy: the optimism of picking and scoring on the same items. */
  optimism: number | null;
}

export function scorePlanHeldOut(
  plan: Plan,
  heldOut: VoteTable,
  split: SplitSummary,
  level: number,
): PlanHeldOut {
  const score = (c: PlannedCommittee | null) =>
    c === null || !split.scored ? null : scoreCommittee(heldOut, c.members, level);
  const best = score(plan.best);
  const independenceChoice = score(plan.independenceChoice);
  const bestSingle = score(plan.bestSingle);
  const minus = (a: HeldOutScore | null, b: HeldOutScore | null): number | null =>
    a?.accuracy.rate == null || b?.accuracy.rate == null ? null : a.accuracy.rate - b.accuracy.rate;
  return {
    best,
    independenceChoice,
    bestSingle,
    committeeGain: minus(best, bestSingle),
    decorrelationGain: minus(best, independenceChoice),
    optimism:
      plan.best === null || best?.accuracy.rate == null
        ? null
        : plan.best.predicted.accuracy - best.accuracy.rate,
  };
}
