import type { CompiledGraph } from '../judge/graph.js';
import { clusterKey, type DatasetItem } from './dataset.js';
import { isFailure, type ItemRecord } from './records.js';
import {
  BIAS_TOLERANCE,
  calibration,
  DEFAULT_RESAMPLES,
  fleissKappa,
  mcnemarExact,
  pairedF1Difference,
  proportionWithCi,
  ratesWithCi,
  reviewerCalibration,
  summarize,
  toConfusion,
  type Calibration,
  type Confusion,
  type PairedConfusion,
  type PairedF1,
  type Proportion,
  type RatesWithCi,
  type ReviewerCalibration,
  type Tally,
} from './stats.js';

/** A graph as it takes part in an ablation. */
export interface GraphEntry {
  /** Name shown in reports: the name asked for on the command line (e.g. `default`). */
  label: string;
  graph: CompiledGraph;
  /** Other names asked for that resolved to the same graph hash (run once). */
  aliases: string[];
  /** Labels of the graphs this one is the equal-budget vote baseline of. */
  baselineFor: string[];
  /** True when added automatically (baseline or reference), not asked for. */
  auto: boolean;
}

export interface NodeCalibration extends ReviewerCalibration {
  nodeId: string;
  role: string;
  /** Judgments in which the node ended with a stance. */
  n: number;
  confusion: Confusion;
}

export interface Agreement {
  role: string;
  nodes: string[];
  /** Judgments where every member gave a round-1 stance. */
  subjects: number;
  kappa: number | null;
}

export interface Switches {
  from: number;
  to: number;
  matchToNoMatch: number;
  noMatchToMatch: number;
  unchanged: number;
}

export interface DebateDynamics {
  /** ok judgments analysed. */
  judgments: number;
  roundsUsed: Record<string, number>;
  stopReasons: Record<string, number>;
  /** Per round, per debate node: how many judgments it ended that round on each stance. */
  perRound: { round: number; nodes: Record<string, { match: number; no_match: number; none: number }> }[];
  switches: Switches[];
  /** (agent, judgment) trajectories with a stance in their first and last round. */
  trajectories: number;
  /** Agents right in their first round and wrong in their last (by the label). */
  harmful: number;
  /** Agents wrong in their first round and right in their last. */
  helpful: number;
}

export interface Usage {
  callsPerJudgment: number | null;
  promptTokensPerJudgment: number | null;
  completionTokensPerJudgment: number | null;
  tokensPerJudgment: number | null;
  /**
   * Prompt tokens per judgment the backend served from its prefix cache, and the rest (what it prefilled).
   * Null when any judgment that made LLM calls lacks a backend-reported count: unknown, not 0.
   */
  cachedPromptTokensPerJudgment: number | null;
  uncachedPromptTokensPerJudgment: number | null;
  perRole: Record<
    string,
    { callsPerJudgment: number; promptTokensPerJudgment: number; completionTokensPerJudgment: number }
  >;
}

export interface PairedComparison {
  reference: string;
  /** F1(this) − F1(reference) on items both decided, with a paired clustered-bootstrap CI. */
  f1Difference: PairedF1;
  /** b = only this graph right, c = only the reference right. */
  mcnemar: { b: number; c: number; p: number };
}

export interface GraphResult {
  name: string;
  graph: string;
  hash: string;
  description: string | null;
  aliases: string[];
  baselineFor: string[];
  auto: boolean;
  llmCallsPerJudgment: number;
  criticalPathCalls: number;
  rounds: number;
  items: number;
  statuses: Record<ItemRecord['status'], number>;
  /** Failures (judge_error, timeout, overloaded) over all items; excluded from every rate below. */
  failure: Proportion;
  failureCodes: Record<string, number>;
  /** Over decided items (ok + rejected_input; a rejected input is a real no_match). */
  metrics: RatesWithCi;
  calibration: ReviewerCalibration;
  /** Per dataset kind (positive, hard_negative, easy_negative): decided items and how many got reward 1. */
  byKind: Record<string, { decided: number; accepted: number; acceptRate: number | null }>;
  nodes: NodeCalibration[];
  scores: Calibration;
  usage: Usage;
  agreement: Agreement[];
  /** Judgments (ok) where some agent held the right stance at some point but the verdict was wrong. */
  oracleGap: Proportion | null;
  dynamics: DebateDynamics | null;
  paired: PairedComparison | null;
  /** For a cascade: judgments its first stage decided (`cascade_stop`) and judgments it escalated. */
  cascade: { stops: number; escalations: number } | null;
}

export interface AblationResults {
  version: 1;
  dataset: {
    sha256: string;
    items: number;
    positives: number;
    negatives: number;
    clusters: number;
    kinds: Record<string, number>;
    invalidLines: number;
  };
  seed: number;
  resamples: number;
  level: number;
  biasTolerance: number;
  backend: string;
  promptVersion: string;
  reference: string | null;
  graphs: GraphResult[];
}

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

const STANCE_OF_LABEL = (label: 0 | 1) => (label === 1 ? 'match' : 'no_match');

function isDecided(r: ItemRecord): r is ItemRecord & { reward: 0 | 1 } {
  return !isFailure(r) && r.reward !== null;
}

function increment(map: Record<string, number>, key: string): void {
  map[key] = (map[key] ?? 0) + 1;
}

/** Clusters (by ground truth) in first-appearance order and each item's cluster index. */
export function clusterIndex(items: readonly DatasetItem[]): { count: number; of: number[] } {
  const index = new Map<string, number>();
  const of = items.map((item) => {
    const key = clusterKey(item);
    let i = index.get(key);
    if (i === undefined) {
      i = index.size;
      index.set(key, i);
    }
    return i;
  });
  return { count: index.size, of };
}

function lastStances(record: ItemRecord): Map<string, ItemRecord['messages'][number]> {
  const last = new Map<string, ItemRecord['messages'][number]>();
  for (const m of record.messages) if (m.stance !== null) last.set(m.nodeId, m);
  return last;
}

function nodeCalibration(
  graph: CompiledGraph,
  items: readonly DatasetItem[],
  records: readonly ItemRecord[],
): NodeCalibration[] {
  const out: NodeCalibration[] = [];
  for (const r of [...graph.debate, ...graph.final]) {
    if (!r.hasStance) continue;
    const rows: { label: 0 | 1; predicted: 0 | 1 }[] = [];
    records.forEach((record, i) => {
      const item = items[i];
      if (item === undefined || record.status !== 'ok') return;
      const m = lastStances(record).get(r.node.id);
      if (m?.stance == null) return;
      rows.push({ label: item.label, predicted: m.stance === 'match' ? 1 : 0 });
    });
    const confusion = toConfusion(rows);
    out.push({
      nodeId: r.node.id,
      role: r.role.name,
      n: rows.length,
      confusion,
      ...reviewerCalibration(confusion),
    });
  }
  return out;
}

/** Groups of ≥ 2 same-role debate nodes that do not read each other in the same round (parallel members). */
export function parallelGroups(graph: CompiledGraph): { role: string; nodes: string[] }[] {
  const byRole = new Map<string, { id: string; deps: readonly string[] }[]>();
  for (const r of graph.debate) {
    if (!r.hasStance) continue;
    const list = byRole.get(r.role.name) ?? [];
    list.push({ id: r.node.id, deps: r.deps });
    byRole.set(r.role.name, list);
  }
  const groups: { role: string; nodes: string[] }[] = [];
  for (const [role, members] of byRole) {
    const ids = new Set(members.map((m) => m.id));
    const parallel = members.filter((m) => !m.deps.some((d) => ids.has(d))).map((m) => m.id);
    if (parallel.length >= 2) groups.push({ role, nodes: parallel });
  }
  return groups;
}

function agreement(graph: CompiledGraph, records: readonly ItemRecord[]): Agreement[] {
  return parallelGroups(graph).map(({ role, nodes }) => {
    const rows: number[][] = [];
    for (const record of records) {
      if (record.status !== 'ok') continue;
      const stances = nodes.map(
        (id) => record.messages.find((m) => m.nodeId === id && m.round === 1 && m.stance !== null)?.stance,
      );
      if (stances.some((s) => s === undefined || s === null)) continue;
      const match = stances.filter((s) => s === 'match').length;
      rows.push([match, nodes.length - match]);
    }
    return { role, nodes, subjects: rows.length, kappa: fleissKappa(rows) };
  });
}

function dynamics(
  graph: CompiledGraph,
  items: readonly DatasetItem[],
  records: readonly ItemRecord[],
): DebateDynamics {
  const roundsUsed: Record<string, number> = {};
  const stopReasons: Record<string, number> = {};
  const debateIds = graph.debate.filter((r) => r.hasStance).map((r) => r.node.id);
  const rounds = graph.spec.rounds;
  const perRound = Array.from({ length: rounds }, (_, i) => ({
    round: i + 1,
    nodes: Object.fromEntries(debateIds.map((id) => [id, { match: 0, no_match: 0, none: 0 }])),
  }));
  const switches: Switches[] = Array.from({ length: rounds - 1 }, (_, i) => ({
    from: i + 1,
    to: i + 2,
    matchToNoMatch: 0,
    noMatchToMatch: 0,
    unchanged: 0,
  }));
  let judgments = 0;
  let trajectories = 0;
  let harmful = 0;
  let helpful = 0;
  records.forEach((record, i) => {
    const item = items[i];
    if (item === undefined || record.status !== 'ok') return;
    judgments++;
    increment(roundsUsed, String(record.rounds));
    increment(stopReasons, record.stopReason);
    const right = STANCE_OF_LABEL(item.label);
    for (const id of debateIds) {
      const byRound = new Map<number, 'match' | 'no_match'>();
      for (const m of record.messages) {
        if (m.nodeId === id && m.stage === 'debate' && m.stance !== null) byRound.set(m.round, m.stance);
      }
      for (let r = 1; r <= record.rounds && r <= rounds; r++) {
        const counts = perRound[r - 1]?.nodes[id];
        if (counts === undefined) continue;
        const stance = byRound.get(r);
        if (stance === undefined) counts.none++;
        else counts[stance]++;
        const next = byRound.get(r + 1);
        const sw = switches[r - 1];
        if (sw === undefined || stance === undefined || next === undefined) continue;
        if (stance === next) sw.unchanged++;
        else if (stance === 'match') sw.matchToNoMatch++;
        else sw.noMatchToMatch++;
      }
      const seen = [...byRound.keys()].sort((a, b) => a - b);
      const first = seen[0];
      const final = seen.at(-1);
      if (first === undefined || final === undefined) continue;
      trajectories++;
      const wasRight = byRound.get(first) === right;
      const endsRight = byRound.get(final) === right;
      if (wasRight && !endsRight) harmful++;
      if (!wasRight && endsRight) helpful++;
    }
  });
  return { judgments, roundsUsed, stopReasons, perRound, switches, trajectories, harmful, helpful };
}

function usage(records: readonly ItemRecord[]): Usage {
  const n = records.length;
  if (n === 0) {
    return {
      callsPerJudgment: null,
      promptTokensPerJudgment: null,
      completionTokensPerJudgment: null,
      tokensPerJudgment: null,
      cachedPromptTokensPerJudgment: null,
      uncachedPromptTokensPerJudgment: null,
      perRole: {},
    };
  }
  let cachedPromptTokens: number | null = 0;
  let calls = 0;
  let promptTokens = 0;
  let completionTokens = 0;
  const roles = new Map<string, { calls: number; prompt: number; completion: number }>();
  for (const r of records) {
    calls += r.usage.calls;
    promptTokens += r.usage.promptTokens;
    completionTokens += r.usage.completionTokens;
    const cached = r.usage.cachedPromptTokens ?? null;
    if (r.usage.calls > 0)
      cachedPromptTokens =
        cached === null || cachedPromptTokens === null ? null : cachedPromptTokens + cached;
    for (const [role, u] of Object.entries(r.roles)) {
      const acc = roles.get(role) ?? { calls: 0, prompt: 0, completion: 0 };
      acc.calls += u.calls;
      acc.prompt += u.promptTokens;
      acc.completion += u.completionTokens;
      roles.set(role, acc);
    }
  }
  const perRole: Usage['perRole'] = {};
  for (const [role, acc] of [...roles].sort(([a], [b]) => (a < b ? -1 : 1))) {
    perRole[role] = {
      callsPerJudgment: acc.calls / n,
      promptTokensPerJudgment: acc.prompt / n,
      completionTokensPerJudgment: acc.completion / n,
    };
  }
  return {
    callsPerJudgment: calls / n,
    promptTokensPerJudgment: promptTokens / n,
    completionTokensPerJudgment: completionTokens / n,
    tokensPerJudgment: (promptTokens + completionTokens) / n,
    cachedPromptTokensPerJudgment: cachedPromptTokens === null ? null : cachedPromptTokens / n,
    uncachedPromptTokensPerJudgment:
      cachedPromptTokens === null ? null : (promptTokens - cachedPromptTokens) / n,
    perRole,
  };
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
    a: { tp: 0, fp: 0, tn: 0, fn: 0 },
    b: { tp: 0, fp: 0, tn: 0, fn: 0 },
  }));
  let b = 0;
  let c = 0;
  items.forEach((item, i) => {
    const x = mine[i];
    const y = theirs[i];
    const cluster = perCluster[clusters.of[i] ?? -1];
    if (x === undefined || y === undefined || cluster === undefined || !isDecided(x) || !isDecided(y)) return;
    add(cluster.a, item.label, x.reward);
    add(cluster.b, item.label, y.reward);
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

function add(cm: Confusion, label: 0 | 1, predicted: 0 | 1): void {
  if (label === 1) {
    if (predicted === 1) cm.tp++;
    else cm.fn++;
  } else if (predicted === 1) cm.fp++;
  else cm.tn++;
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
    const confusions: Confusion[] = Array.from({ length: clusters.count }, () => ({
      tp: 0,
      fp: 0,
      tn: 0,
      fn: 0,
    }));
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
      add(cm, item.label, record.reward);
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

export interface LatencySummary {
  mean: number | null;
  p50: number | null;
  p95: number | null;
}

/** Wall-clock facts that differ between runs; kept out of `results.json` (written to `timing.json`). */
export interface Timing {
  graphs: Record<string, { latencyMs: LatencySummary; perRole: Record<string, LatencySummary> }>;
}

/** Judgment latency (ms) per graph, and per role (a role's summed node latency within one judgment). */
export function timingSummary(
  entries: readonly GraphEntry[],
  outcomes: ReadonlyMap<string, readonly ItemRecord[]>,
): Timing {
  const graphs: Timing['graphs'] = {};
  for (const entry of entries) {
    const records = (outcomes.get(entry.label) ?? []).filter((r) => r.status !== 'rejected_input');
    const roles = new Map<string, number[]>();
    for (const r of records) {
      for (const [role, u] of Object.entries(r.roles)) {
        const list = roles.get(role) ?? [];
        list.push(u.latencyMs);
        roles.set(role, list);
      }
    }
    graphs[entry.label] = {
      latencyMs: summarize(records.map((r) => r.latencyMs)),
      perRole: Object.fromEntries([...roles].map(([role, xs]) => [role, summarize(xs)])),
    };
  }
  return { graphs };
}
