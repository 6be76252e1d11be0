/**
 * Every member of the run graphs as a classifier on its own: one member is one (graph, node, round).
 * Pure functions over `items.jsonl` records aligned with the dataset items.
 */
import type { CompiledGraph, GraphNode } from '../../judge/graph.js';
import type { DatasetItem } from '../dataset.js';
import type { ItemRecord } from '../records.js';
import { BIAS_TOLERANCE, callBias, type Bias } from '../stats/calibration.js';
import { bootstrapInterval, type Interval } from '../stats/bootstrap.js';
import { toConfusion, type Confusion } from '../stats/confusion.js';
import type { Tally } from '../stats/proportion.js';
import {
  addPairTables,
  clusteredClopperPearson,
  clusteredDifference,
  phi,
  type BinomialInterval,
  type Difference,
  type PairTable,
} from './binomial.js';

export interface Member {
  /** `graph/node` (debate nodes of a multi-round graph: `graph/node@rN`). */
  key: string;
  graph: string;
  nodeId: string;
  role: string;
  model: string | null;
  round: number;
  stage: 'debate' | 'final';
}

/** The measured graph node behind a member, or undefined when its run or node is not among `runs`. */
export function memberNode(
  member: Pick<Member, 'graph' | 'nodeId'>,
  runs: readonly GraphRun[],
): GraphNode | undefined {
  return runs.find((r) => r.label === member.graph)?.graph.byId.get(member.nodeId)?.node;
}

/** Votes of every member on every item: `votes[m][i]` is 1 (match), 0 (no_match) or null (no stance). */
export interface VoteTable {
  members: Member[];
  items: readonly DatasetItem[];
  /** Cluster (ground truth) index per item, the bootstrap unit. */
  clusterOf: readonly number[];
  clusters: number;
  votes: (0 | 1 | null)[][];
  confidence: (number | null)[][];
}

export interface GraphRun {
  label: string;
  graph: CompiledGraph;
  /** One record per dataset item, in item order. */
  records: readonly ItemRecord[];
}

/** Collects the stance of every (graph, node, round) on every item; a member that never voted is dropped. */
export function voteTable(
  runs: readonly GraphRun[],
  items: readonly DatasetItem[],
  cluster: { count: number; of: number[] },
): VoteTable {
  const members: Member[] = [];
  const index = new Map<string, number>();
  const votes: (0 | 1 | null)[][] = [];
  const confidence: (number | null)[][] = [];
  for (const run of runs) {
    const multiRound = run.graph.spec.rounds > 1;
    run.records.forEach((record, i) => {
      for (const m of record.messages) {
        if (m.stance === null) continue;
        const key =
          multiRound && m.stage === 'debate'
            ? `${run.label}/${m.nodeId}@r${m.round}`
            : `${run.label}/${m.nodeId}`;
        let at = index.get(key);
        if (at === undefined) {
          at = members.length;
          index.set(key, at);
          const node = run.graph.byId.get(m.nodeId)?.node;
          members.push({
            key,
            graph: run.label,
            nodeId: m.nodeId,
            role: m.role,
            model: node?.model ?? null,
            round: m.round,
            stage: m.stage,
          });
          votes.push(items.map(() => null));
          confidence.push(items.map(() => null));
        }
        const row = votes[at];
        const conf = confidence[at];
        if (row === undefined || conf === undefined) continue;
        row[i] = m.stance === 'match' ? 1 : 0;
        conf[i] = m.confidence;
      }
    });
  }
  return { members, items, clusterOf: cluster.of, clusters: cluster.count, votes, confidence };
}

export interface BiasCall {
  /**
   * The rule `ablate` applies to graphs and agents (`callBias`): from FPR(basis) − FNR, `permissive` above
   * +tolerance, `strict` below −tolerance, else `balanced`; null when either side has no items.
   */
  label: Bias | null;
  /** The Newcombe interval of the difference supports the label (see `callBias`); null without a label. */
  shown: boolean | null;
  tolerance: number;
  /** Negatives the FPR is measured on: hard negatives when the dataset has any, else all negatives. */
  basis: 'hard_negatives' | 'negatives';
  fpr: BinomialInterval;
  difference: Difference | null;
}

export interface MemberCalibration {
  member: Member;
  /** Items on which the member gave a stance. */
  n: number;
  confusion: Confusion;
  tpr: BinomialInterval;
  tnr: BinomialInterval;
  fpr: BinomialInterval;
  fnr: BinomialInterval;
  accuracy: BinomialInterval;
  /** Mean confidence when saying match / no_match (null when never said or never reported). */
  meanConfidence: { match: number | null; no_match: number | null };
  bias: BiasCall;
}

function mean(values: readonly number[]): number | null {
  return values.length === 0 ? null : values.reduce((s, x) => s + x, 0) / values.length;
}

/** Per-cluster tallies of one member's counts. */
interface ClusterCounts {
  tp: number;
  fn: number;
  tn: number;
  fp: number;
  hardAccepted: number;
  hardTotal: number;
}

/** The bias of a member from its false positives (on hard negatives when the set has any) and misses. */
function biasCall(
  falsePositives: readonly Tally[],
  misses: readonly Tally[],
  hasHard: boolean,
  level: number,
): BiasCall {
  const difference = clusteredDifference(falsePositives, misses, level);
  const call = callBias(difference?.point ?? null, difference?.lo ?? null, difference?.hi ?? null);
  return {
    label: call.bias,
    shown: call.shown,
    tolerance: BIAS_TOLERANCE,
    basis: hasHard ? 'hard_negatives' : 'negatives',
    fpr: clusteredClopperPearson(falsePositives, level),
    difference,
  };
}

/**
 * One member's rates with exact intervals over the ground-truth clusters (design effect and few-cluster
 * factor, as the ablation's rates) and its bias call.
 */
export function calibrateMember(table: VoteTable, m: number, level = 0.95): MemberCalibration | null {
  const member = table.members[m];
  const row = table.votes[m];
  const conf = table.confidence[m];
  if (member === undefined || row === undefined || conf === undefined) return null;
  const rows: { label: 0 | 1; predicted: 0 | 1 }[] = [];
  const perCluster = new Map<number, ClusterCounts>();
  const confMatch: number[] = [];
  const confNo: number[] = [];
  table.items.forEach((item, i) => {
    const v = row[i];
    if (v === null || v === undefined) return;
    rows.push({ label: item.label, predicted: v });
    const key = table.clusterOf[i] ?? -1 - i;
    let c = perCluster.get(key);
    if (c === undefined) {
      c = { tp: 0, fn: 0, tn: 0, fp: 0, hardAccepted: 0, hardTotal: 0 };
      perCluster.set(key, c);
    }
    if (item.label === 1) c[v === 1 ? 'tp' : 'fn']++;
    else c[v === 1 ? 'fp' : 'tn']++;
    if (item.kind === 'hard_negative') {
      c.hardTotal++;
      c.hardAccepted += v;
    }
    const cf = conf[i];
    if (cf !== null && cf !== undefined) (v === 1 ? confMatch : confNo).push(cf);
  });
  const clusters = [...perCluster.values()];
  const rate = (hits: (c: ClusterCounts) => number, trials: (c: ClusterCounts) => number) =>
    clusters.map((c) => ({ hits: hits(c), trials: trials(c) }));
  const positives = rate(
    (c) => c.fn,
    (c) => c.tp + c.fn,
  );
  const hasHard = table.items.some((item) => item.kind === 'hard_negative');
  const falsePositives = hasHard
    ? rate(
        (c) => c.hardAccepted,
        (c) => c.hardTotal,
      )
    : rate(
        (c) => c.fp,
        (c) => c.tn + c.fp,
      );
  return {
    member,
    n: rows.length,
    confusion: toConfusion(rows),
    tpr: clusteredClopperPearson(
      rate(
        (c) => c.tp,
        (c) => c.tp + c.fn,
      ),
      level,
    ),
    tnr: clusteredClopperPearson(
      rate(
        (c) => c.tn,
        (c) => c.tn + c.fp,
      ),
      level,
    ),
    fpr: clusteredClopperPearson(
      rate(
        (c) => c.fp,
        (c) => c.tn + c.fp,
      ),
      level,
    ),
    fnr: clusteredClopperPearson(positives, level),
    accuracy: clusteredClopperPearson(
      rate(
        (c) => c.tp + c.tn,
        (c) => c.tp + c.tn + c.fp + c.fn,
      ),
      level,
    ),
    meanConfidence: { match: mean(confMatch), no_match: mean(confNo) },
    bias: biasCall(falsePositives, positives, hasHard, level),
  };
}

export interface ErrorCorrelation {
  a: string;
  b: string;
  /** Items both members voted on. */
  n: number;
  /** Errors (vote ≠ label) of a and b: both wrong, only a, only b, neither. */
  table: PairTable;
  /** Phi of the two error indicators over all shared items, with a clustered-bootstrap CI. */
  phi: number | null;
  ci: Interval;
  /** Phi within positives and within negatives: the per-class correlation the beta-binomial uses. */
  phiPositive: number | null;
  phiNegative: number | null;
}

const EMPTY_TABLE: PairTable = { both: 0, firstOnly: 0, secondOnly: 0, neither: 0 };

/** Per-class error tables of two members, one per cluster. */
function pairTables(table: VoteTable, a: number, b: number): { pos: PairTable; neg: PairTable }[] {
  const out = Array.from({ length: table.clusters }, () => ({
    pos: { ...EMPTY_TABLE },
    neg: { ...EMPTY_TABLE },
  }));
  const va = table.votes[a];
  const vb = table.votes[b];
  if (va === undefined || vb === undefined) return out;
  table.items.forEach((item, i) => {
    const x = va[i];
    const y = vb[i];
    const c = out[table.clusterOf[i] ?? -1];
    if (x === null || y === null || x === undefined || y === undefined || c === undefined) return;
    const ea = x !== item.label;
    const eb = y !== item.label;
    const t = item.label === 1 ? c.pos : c.neg;
    if (ea && eb) t.both++;
    else if (ea) t.firstOnly++;
    else if (eb) t.secondOnly++;
    else t.neither++;
  });
  return out;
}

function sumTables(sample: readonly { pos: PairTable; neg: PairTable }[]): {
  pos: PairTable;
  neg: PairTable;
} {
  let pos = EMPTY_TABLE;
  let neg = EMPTY_TABLE;
  for (const c of sample) {
    pos = addPairTables(pos, c.pos);
    neg = addPairTables(neg, c.neg);
  }
  return { pos, neg };
}

/** Phi on errors for every pair of members, with clustered-bootstrap CIs (`resamples`, `seed`). */
export function errorCorrelations(
  table: VoteTable,
  options: { seed: number; resamples: number; level?: number | undefined },
): ErrorCorrelation[] {
  const out: ErrorCorrelation[] = [];
  for (let a = 0; a < table.members.length; a++) {
    for (let b = a + 1; b < table.members.length; b++) {
      const clusters = pairTables(table, a, b);
      const { pos, neg } = sumTables(clusters);
      const all = addPairTables(pos, neg);
      const ci = bootstrapInterval(
        clusters,
        (sample) => {
          const t = sumTables(sample);
          return phi(addPairTables(t.pos, t.neg));
        },
        { seed: options.seed + a * 1009 + b, resamples: options.resamples, level: options.level ?? 0.95 },
      );
      out.push({
        a: table.members[a]?.key ?? '',
        b: table.members[b]?.key ?? '',
        n: all.both + all.firstOnly + all.secondOnly + all.neither,
        table: all,
        phi: phi(all),
        ci,
        phiPositive: phi(pos),
        phiNegative: phi(neg),
      });
    }
  }
  return out;
}
