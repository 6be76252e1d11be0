/**
 * Every statistic of an ablation from its per-item records: per graph the confusion matrix and rates,
 * failures, calibration, cost, agent statistics and the paired comparison with the reference.
 */
import { STANCE_OF_LABEL, agreement, dynamics, nodeCalibration } from './agents.js';
import { clusterIndex, type DatasetItem } from './dataset.js';
import { isFailure, type ItemRecord } from './records.js';
import {
  BIAS_TOLERANCE,
  calibration,
  countInto,
  DEFAULT_RESAMPLES,
  emptyConfusion,
  increment,
  mcnemarExact,
  pairedF1Difference,
  proportionWithCi,
  ratesWithCi,
  reviewerCalibration,
  type Confusion,
  type PairedConfusion,
  type Tally,
} from './stats.js';
import type { AblationResults, GraphEntry, GraphResult, PairedComparison } from './types.js';
import { usage } from './usage.js';

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

function isDecided(r: ItemRecord): r is ItemRecord & { reward: 0 | 1 } {
  return !isFailure(r) && r.reward !== null;
}

function paired(
  items: readonly DatasetItem[],
  clusters: { count: number; of: number[] },
  mine: readonly ItemRecord[],
  theirs: readonly ItemRecord[],
  reference: string,
  bootstrap: { seed: number; resamples: number },
): PairedComparison {
  const perCluster: PairedConfusion[] = Array.from({ length: clusters.count }, () => ({
    a: emptyConfusion(),
    b: emptyConfusion(),
  }));
  let b = 0;
  let c = 0;
  items.forEach((item, i) => {
    const x = mine[i];
    const y = theirs[i];
    const cluster = perCluster[clusters.of[i] ?? -1];
    if (x === undefined || y === undefined || cluster === undefined || !isDecided(x) || !isDecided(y)) return;
    countInto(cluster.a, item.label, x.reward);
    countInto(cluster.b, item.label, y.reward);
    const xRight = x.reward === item.label;
    const yRight = y.reward === item.label;
    if (xRight && !yRight) b++;
    if (!xRight && yRight) c++;
  });
  return {
    reference,
    f1Difference: pairedF1Difference(perCluster, bootstrap),
    mcnemar: { b, c, p: mcnemarExact(b, c) },
  };
}

/**
 * Every statistic of the ablation, from the per-item records. Deterministic in (records, seed, resamples):
 * no clock, no latency (latency lives in `timing.json`, see `timingSummary`).
 */
export function analyze(options: AnalyzeOptions): AblationResults {
  const { items, entries } = options;
  const resamples = options.resamples ?? DEFAULT_RESAMPLES;
  const bootstrap = { seed: options.seed, resamples };
  const clusters = clusterIndex(items);
  const kinds: Record<string, number> = {};
  for (const item of items) increment(kinds, item.kind);
  const recordsOf = (label: string): readonly ItemRecord[] => {
    const records = options.outcomes.get(label);
    if (records === undefined || records.length !== items.length) {
      throw new Error(`analyze: records for "${label}" are missing or not aligned with the items`);
    }
    return records;
  };

  const graphs = entries.map((entry): GraphResult => {
    const records = recordsOf(entry.label);
    const statuses: GraphResult['statuses'] = {
      ok: 0,
      rejected_input: 0,
      judge_error: 0,
      timeout: 0,
      overloaded: 0,
    };
    const failureCodes: Record<string, number> = {};
    const confusions: Confusion[] = Array.from({ length: clusters.count }, emptyConfusion);
    const failures: Tally[] = Array.from({ length: clusters.count }, () => ({ hits: 0, trials: 0 }));
    const gaps: Tally[] = Array.from({ length: clusters.count }, () => ({ hits: 0, trials: 0 }));
    const scored: { score: number; label: 0 | 1 }[] = [];
    const byKind: GraphResult['byKind'] = {};
    const stanceNodes = entry.graph.voters.length;
    records.forEach((record, i) => {
      const item = items[i];
      const cluster = clusters.of[i] ?? -1;
      const cm = confusions[cluster];
      const failure = failures[cluster];
      const gap = gaps[cluster];
      if (item === undefined || cm === undefined || failure === undefined || gap === undefined) return;
      statuses[record.status]++;
      failure.trials++;
      if (isFailure(record)) {
        failure.hits++;
        increment(failureCodes, record.error?.code ?? record.status);
        return;
      }
      if (!isDecided(record)) return;
      countInto(cm, item.label, record.reward);
      const kind = (byKind[item.kind] ??= { decided: 0, accepted: 0, acceptRate: null });
      kind.decided++;
      kind.accepted += record.reward;
      kind.acceptRate = kind.accepted / kind.decided;
      if (record.score !== null) scored.push({ score: record.score, label: item.label });
      if (record.status === 'ok' && stanceNodes >= 2) {
        const right = STANCE_OF_LABEL(item.label);
        gap.trials++;
        if (record.verdict !== right && record.messages.some((m) => m.stance === right)) gap.hits++;
      }
    });
    const metrics = ratesWithCi(confusions, bootstrap);
    const reference = options.reference;
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
      statuses,
      failure: proportionWithCi(failures, bootstrap),
      failureCodes,
      metrics,
      calibration: reviewerCalibration(metrics.confusion),
      byKind,
      nodes: nodeCalibration(entry.graph, items, records),
      scores: calibration(scored),
      usage: usage(records),
      agreement: agreement(entry.graph, records),
      oracleGap: stanceNodes >= 2 ? proportionWithCi(gaps, bootstrap) : null,
      dynamics: entry.graph.spec.rounds > 1 ? dynamics(entry.graph, items, records) : null,
      paired:
        reference === null || reference === entry.label
          ? null
          : paired(items, clusters, records, recordsOf(reference), reference, bootstrap),
      cascade:
        entry.graph.cascade === undefined
          ? null
          : {
              stops: records.filter((r) => r.stopReason === 'cascade_stop').length,
              escalations: records.filter((r) => r.stopReason === 'escalated').length,
            },
    };
  });

  return {
    version: 1,
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
    level: 0.95,
    biasTolerance: BIAS_TOLERANCE,
    backend: options.backend,
    promptVersion: options.promptVersion,
    reference: options.reference,
    graphs,
  };
}
