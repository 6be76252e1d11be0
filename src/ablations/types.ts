/**
 * The shapes of an ablation's results (`results.json`, `timing.json`) and of a graph taking part in it.
 * Types only: the computation is in `analysis.ts`, the rendering in `report.ts` and `plots.ts`.
 */
import type { CompiledGraph } from '../judge/graph.js';
import type { ItemRecord } from './records.js';
import type {
  Calibration,
  Confusion,
  PairedF1,
  Proportion,
  RatesWithCi,
  ReviewerCalibration,
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

export interface LatencySummary {
  mean: number | null;
  p50: number | null;
  p95: number | null;
}

/** Wall-clock facts that differ between runs; kept out of `results.json` (written to `timing.json`). */
export interface Timing {
  graphs: Record<string, { latencyMs: LatencySummary; perRole: Record<string, LatencySummary> }>;
}
