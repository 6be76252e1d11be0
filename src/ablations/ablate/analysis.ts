/**
 * Every statistic of an ablation from its per-item records: per graph the rates under three views of
 * failures, failures, calibration and bias, cost, agent statistics; the paired comparisons with the
 * reference and with the budget-matched vote baselines, Holm-adjusted per family.
 */
import { graphWarnings, type Decision } from '../../judge/graph.js';
import { STANCE_OF_LABEL, agreement, dynamics, nodeCalibration } from './agents.js';
import { clusterIndex, type DatasetItem } from '../dataset.js';
import { isFailure, type ItemRecord } from '../records.js';
import { BIAS_TOLERANCE, calibration, reviewerCalibration, type ScoreKind } from '../stats/calibration.js';
import { DEFAULT_RESAMPLES, FEW_CLUSTERS, REPORT_METHOD, type EstimateOptions } from '../stats/clustered.js';
import { emptyConfusion, increment } from '../stats/confusion.js';
import { clusteredProportion, type Proportion, type Tally } from '../stats/proportion.js';
import { pairedRates, ratesWithCi, type PairedCluster } from '../stats/rates.js';
import { holm } from '../stats/significance.js';
import {
  biasClusters,
  confusionsByCluster,
  emptyTallies,
  type ItemSet,
  type Prediction,
} from '../tallies.js';
import type {
  AblationResults,
  BaselineComparison,
  Budget,
  GraphEntry,
  GraphResult,
  HolmAdjusted,
  MatchedOn,
  PairedComparison,
} from '../types.js';
import { spend, usage } from './usage.js';

export interface AnalyzeOptions {
  items: readonly DatasetItem[];
  datasetSha256: string;
  invalidLines: number;
  entries: readonly GraphEntry[];
  /** Records aligned with `items`, per entry label. */
  outcomes: ReadonlyMap<string, readonly ItemRecord[]>;
  seed: number;
  resamples?: number | undefined;
  backend: string;
  promptVersion: string;
  /** Label of the reference graph for paired comparisons, or null. */
  reference: string | null;
}

/** Confidence level of every interval in a report. */
export const LEVEL = 0.95;

function isDecided(r: ItemRecord): r is ItemRecord & { reward: 0 | 1 } {
  return !isFailure(r) && r.reward !== null;
}

/** The reward of a decided record, else null. */
const decidedReward =
  (records: readonly ItemRecord[]): Prediction =>
  (i) => {
    const r = records[i];
    return r !== undefined && isDecided(r) ? r.reward : null;
  };

/** What a graph's score is (see ScoreKind), from its decision rule. */
export function scoreKind(decision: Decision): ScoreKind {
  switch (decision.rule) {
    case 'evaluator':
      return 'confidence';
    case 'majority':
    case 'unanimous':
      return 'vote-share';
    case 'confidence_weighted':
      return 'weighted-confidence';
  }
}

/** Paired per-cluster confusions of two graphs over the items both decided. */
export function pairedClusters(
  set: ItemSet,
  mine: readonly ItemRecord[],
  theirs: readonly ItemRecord[],
): PairedCluster[] {
  const out: PairedCluster[] = Array.from({ length: set.clusters.count }, () => ({
    a: emptyConfusion(),
    b: emptyConfusion(),
    onlyA: 0,
    onlyB: 0,
  }));
  const x = decidedReward(mine);
  const y = decidedReward(theirs);
  const both = (i: number) => x(i) !== null && y(i) !== null;
  const a = confusionsByCluster(set, (i) => (both(i) ? x(i) : null));
  const b = confusionsByCluster(set, (i) => (both(i) ? y(i) : null));
  set.items.forEach((item, i) => {
    const p = out[set.clusters.of[i] ?? -1];
    if (p === undefined || !both(i)) return;
    const aRight = x(i) === item.label;
    const bRight = y(i) === item.label;
    if (aRight && !bRight) p.onlyA++;
    if (!aRight && bRight) p.onlyB++;
  });
  return out.map((p, c) => ({ ...p, a: a[c] ?? emptyConfusion(), b: b[c] ?? emptyConfusion() }));
}

/** Holm over a family of comparisons, test by test; returns each comparison's adjusted p-values. */
function holmFamily(family: readonly Omit<PairedComparison, 'holm'>[]): HolmAdjusted[] {
  const f1 = holm(family.map((c) => c.rates.f1.p));
  const precision = holm(family.map((c) => c.rates.precision.p));
  const recall = holm(family.map((c) => c.rates.recall.p));
  const exact = holm(family.map((c) => c.rates.mcnemar.exactP));
  const clustered = holm(family.map((c) => c.rates.mcnemar.clusteredP));
  return family.map((_, i) => ({
    f1: f1[i] ?? null,
    precision: precision[i] ?? null,
    recall: recall[i] ?? null,
    mcnemarExact: exact[i] ?? null,
    mcnemarClustered: clustered[i] ?? null,
  }));
}

/** What every graph's statistics share: the items, their clusters, the estimation options, every record. */
interface Analysis {
  set: ItemSet;
  est: EstimateOptions;
  entries: readonly GraphEntry[];
  /** The records of an entry, aligned with the items (throws when missing or misaligned). */
  recordsOf: (label: string) => readonly ItemRecord[];
  /** Per item: every graph decided it (the `common` view). */
  decidedByAll: readonly boolean[];
  spendOf: ReadonlyMap<string, ReturnType<typeof spend>>;
}

/**
 * Every statistic of the ablation, from the per-item records. Deterministic in (records, seed, resamples):
 * no clock, no latency (latency lives in `timing.json`, see `timingSummary`).
 */
export function analyze(options: AnalyzeOptions): AblationResults {
  const { items, entries } = options;
  const resamples = options.resamples ?? DEFAULT_RESAMPLES;
  const clusters = clusterIndex(items);
  const set: ItemSet = { items, clusters, hardNegatives: items.some((i) => i.kind === 'hard_negative') };
  // One method for the whole report, at every cluster count.
  const method = REPORT_METHOD;
  const est: EstimateOptions = { seed: options.seed, resamples, level: LEVEL, method };
  const warnings: string[] = [];
  if (clusters.count < FEW_CLUSTERS) {
    warnings.push(
      `only ${clusters.count} ground-truth clusters (< ${FEW_CLUSTERS}): F1 and every difference use the cluster ` +
        'jackknife t-interval (k − 1 degrees of freedom) and proportions the degrees-of-freedom-adjusted exact ' +
        'interval; intervals are wide, read them before the point estimates',
    );
  }
  for (const entry of entries)
    warnings.push(...graphWarnings(entry.graph).map((w) => `${entry.label}: ${w}`));
  const kinds: Record<string, number> = {};
  for (const item of items) increment(kinds, item.kind);
  const recordsOf = (label: string): readonly ItemRecord[] => {
    const records = options.outcomes.get(label);
    if (records === undefined || records.length !== items.length) {
      throw new Error(`analyze: records for "${label}" are missing or not aligned with the items`);
    }
    return records;
  };
  const all = entries.map((e) => recordsOf(e.label));
  const decidedByAll = items.map((_, i) => all.every((records) => decidedReward(records)(i) !== null));
  const spendOf = new Map(entries.map((e) => [e.label, spend(recordsOf(e.label))]));
  const analysis: Analysis = { set, est, entries, recordsOf, decidedByAll, spendOf };

  const graphs = entries.map((entry) => graphResult(analysis, entry));
  const reference = options.reference;
  if (reference !== null) pairWithReference(analysis, graphs, reference);
  const baselines = baselineComparisons(analysis);

  return {
    version: 2,
    dataset: {
      sha256: options.datasetSha256,
      items: items.length,
      positives: items.filter((i) => i.label === 1).length,
      negatives: items.filter((i) => i.label === 0).length,
      clusters: clusters.count,
      kinds,
      invalidLines: options.invalidLines,
    },
    seed: options.seed,
    resamples,
    level: LEVEL,
    biasTolerance: BIAS_TOLERANCE,
    method,
    warnings,
    backend: options.backend,
    promptVersion: options.promptVersion,
    reference,
    commonItems: decidedByAll.filter(Boolean).length,
    graphs,
    baselines,
  };
}

/** Per-graph counts over its records, per cluster where an interval needs them. */
export interface RecordTallies {
  statuses: GraphResult['statuses'];
  /** Failures by error code (the status when there is none). */
  failureCodes: Record<string, number>;
  /** Per cluster: failures among all records. */
  failures: Tally[];
  /** Per cluster: decided `ok` records whose verdict was wrong though some voter took the right stance. */
  gaps: Tally[];
  /** Per item kind, per cluster: rewards among decided records. */
  kindTallies: Map<string, Tally[]>;
  /** Every decided record's score, with its item's label. */
  scored: { score: number; label: 0 | 1 }[];
}

/** One pass over a graph's records (aligned with `set.items`); `stanceNodes` is the graph's voter count. */
export function tallyRecords(
  set: ItemSet,
  records: readonly ItemRecord[],
  stanceNodes: number,
): RecordTallies {
  const { items, clusters } = set;
  const t: RecordTallies = {
    statuses: { ok: 0, rejected_input: 0, judge_error: 0, timeout: 0, overloaded: 0 },
    failureCodes: {},
    failures: emptyTallies(clusters.count),
    gaps: emptyTallies(clusters.count),
    kindTallies: new Map(),
    scored: [],
  };
  records.forEach((record, i) => {
    const item = items[i];
    const c = clusters.of[i] ?? -1;
    const failure = t.failures[c];
    const gap = t.gaps[c];
    if (item === undefined || failure === undefined || gap === undefined) return;
    t.statuses[record.status]++;
    failure.trials++;
    if (isFailure(record)) {
      failure.hits++;
      increment(t.failureCodes, record.error?.code ?? record.status);
      return;
    }
    if (!isDecided(record)) return;
    let kind = t.kindTallies.get(item.kind);
    if (kind === undefined) {
      kind = emptyTallies(clusters.count);
      t.kindTallies.set(item.kind, kind);
    }
    const k = kind[c];
    if (k !== undefined) {
      k.trials++;
      k.hits += record.reward;
    }
    if (record.score !== null) t.scored.push({ score: record.score, label: item.label });
    if (record.status === 'ok' && stanceNodes >= 2) {
      const right = STANCE_OF_LABEL(item.label);
      gap.trials++;
      if (record.verdict !== right && record.messages.some((m) => m.stance === right)) gap.hits++;
    }
  });
  return t;
}

/** The rates under the three views of failures: decided items, items every graph decided, failure = wrong. */
function rateViews(analysis: Analysis, reward: Prediction): GraphResult['views'] {
  const { set, est, decidedByAll } = analysis;
  const complete = ratesWithCi(confusionsByCluster(set, reward), est);
  const common = ratesWithCi(
    confusionsByCluster(set, (i) => (decidedByAll[i] === true ? reward(i) : null)),
    est,
  );
  // A failure counted as the wrong answer: 1 − label.
  const failureAsWrong = ratesWithCi(
    confusionsByCluster(set, (i) => {
      const r = reward(i);
      const label = set.items[i]?.label;
      return r ?? (label === undefined ? null : label === 1 ? 0 : 1);
    }),
    est,
  );
  return { complete, common, failureAsWrong };
}

/** One graph's statistics (its paired comparison with the reference is filled in later). */
function graphResult(analysis: Analysis, entry: GraphEntry): GraphResult {
  const { set, est, entries } = analysis;
  const records = analysis.recordsOf(entry.label);
  const reward = decidedReward(records);
  const stanceNodes = entry.graph.voters.length;
  const t = tallyRecords(set, records, stanceNodes);
  const views = rateViews(analysis, reward);
  const byKind: Record<string, Proportion> = {};
  for (const [kind, tallies] of [...t.kindTallies].sort(([a], [b]) => (a < b ? -1 : 1))) {
    byKind[kind] = clusteredProportion(tallies, LEVEL);
  }
  const own = analysis.spendOf.get(entry.label) ?? null;
  return {
    name: entry.label,
    graph: entry.graph.name,
    hash: entry.graph.hash,
    description: entry.graph.spec.description ?? null,
    aliases: entry.aliases,
    baselineFor: entry.baselineFor,
    auto: entry.auto,
    llmCallsPerJudgment: entry.graph.llmCallsPerJudgment,
    criticalPathCalls: entry.graph.criticalPathCalls,
    rounds: entry.graph.spec.rounds,
    items: records.length,
    statuses: t.statuses,
    failure: clusteredProportion(t.failures, LEVEL),
    failureCodes: t.failureCodes,
    metrics: views.complete,
    views,
    calibration: reviewerCalibration(biasClusters(set, reward), {
      ...est,
      hardNegatives: set.hardNegatives,
    }),
    byKind,
    nodes: nodeCalibration(entry.graph, set, records, est),
    scores: calibration(t.scored, scoreKind(entry.graph.spec.decision)),
    usage: usage(records),
    budget: own === null ? null : budgetOf(entry.label, own, entries),
    agreement: agreement(entry.graph, records),
    oracleGap: stanceNodes >= 2 ? clusteredProportion(t.gaps, LEVEL) : null,
    dynamics: entry.graph.spec.rounds > 1 ? dynamics(entry.graph, set.items, records) : null,
    paired: null,
    cascade:
      entry.graph.cascade === undefined
        ? null
        : {
            stops: records.filter((r) => r.stopReason === 'cascade_stop').length,
            escalations: records.filter((r) => r.stopReason === 'escalated').length,
          },
  };
}

/** Paired comparisons with the reference: one family, Holm across its comparisons; sets each graph's `paired`. */
function pairWithReference(analysis: Analysis, graphs: GraphResult[], reference: string): void {
  const { set, est, recordsOf } = analysis;
  const against = graphs.filter((g) => g.name !== reference);
  const family = against.map((g) => ({
    against: reference,
    rates: pairedRates(pairedClusters(set, recordsOf(g.name), recordsOf(reference)), est),
  }));
  const adjusted = holmFamily(family);
  against.forEach((g, i) => {
    const c = family[i];
    const h = adjusted[i];
    if (c !== undefined && h !== undefined) g.paired = { ...c, holm: h };
  });
}

/**
 * Each graph against its budget-matched baselines (one row per pair, whatever it was matched on): a second
 * family, in the order of the graphs.
 */
function baselineComparisons(analysis: Analysis): BaselineComparison[] {
  const { set, est, entries, recordsOf, spendOf } = analysis;
  const pairs: { graph: string; baseline: string; matchedOn: MatchedOn[] }[] = [];
  for (const g of entries) {
    for (const baseline of entries) {
      const on = baseline.baselineFor.filter((b) => b.graph === g.label).map((b) => b.matchedOn);
      if (on.length > 0) pairs.push({ graph: g.label, baseline: baseline.label, matchedOn: on });
    }
  }
  const baselineFamily = pairs.map((p) => ({
    ...p,
    against: p.baseline,
    rates: pairedRates(pairedClusters(set, recordsOf(p.graph), recordsOf(p.baseline)), est),
  }));
  const baselineHolm = holmFamily(baselineFamily);
  return baselineFamily.map((c, i): BaselineComparison => {
    const g = spendOf.get(c.graph) ?? null;
    const v = spendOf.get(c.baseline) ?? null;
    return {
      graph: c.graph,
      matchedOn: c.matchedOn,
      against: c.baseline,
      graphCalls: g?.calls ?? 0,
      graphTokens: g?.tokens ?? 0,
      baselineCalls: v?.calls ?? null,
      baselineTokens: v?.tokens ?? null,
      rates: c.rates,
      holm: baselineHolm[i] ?? emptyHolm(),
    };
  });
}

function emptyHolm(): HolmAdjusted {
  return { f1: null, precision: null, recall: null, mcnemarExact: null, mcnemarClustered: null };
}

/** The graph's spend and the vote baselines matched to it (from the entries' `baselineFor`). */
function budgetOf(
  label: string,
  own: { calls: number; tokens: number },
  entries: readonly GraphEntry[],
): Budget | null {
  const find = (on: 'calls' | 'tokens') => {
    for (const e of entries) {
      const link = e.baselineFor.find((b) => b.graph === label && b.matchedOn === on);
      if (link !== undefined) return { entry: e, link };
    }
    return undefined;
  };
  const byCalls = find('calls');
  const byTokens = find('tokens');
  if (byCalls === undefined && byTokens === undefined) return null;
  const size = (e: GraphEntry) => e.graph.spec.nodes.length;
  const tokensPerCall = byTokens?.link.tokensPerCall;
  return {
    meanCalls: own.calls,
    meanTokens: own.tokens,
    byCalls: byCalls === undefined ? null : { baseline: byCalls.entry.label, n: size(byCalls.entry) },
    byTokens:
      byTokens === undefined || tokensPerCall === undefined
        ? null
        : { baseline: byTokens.entry.label, n: size(byTokens.entry), tokensPerCall },
  };
}
