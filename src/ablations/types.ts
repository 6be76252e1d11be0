/**
 * The shapes of an ablation's results (`results.json`, `timing.json`) and of a graph taking part in it.
 * Types only: the computation is in `ablate/analysis.ts`, the rendering in `ablate/report.ts` and `plots.ts`.
 */
import type { ReasoningFormat } from '../judge/candidate.js';
import type { CompiledGraph } from '../judge/graph.js';
import type { Router } from '../judge/types.js';
import type { ProgressStream } from './progress.js';
import type { ItemRecord } from './records.js';
import type { Calibration, ReviewerCalibration } from './stats/calibration.js';
import type { EstimateMethod } from './stats/clustered.js';
import type { Confusion } from './stats/confusion.js';
import type { Proportion } from './stats/proportion.js';
import type { PairedRates, RatesWithCi } from './stats/rates.js';

/** What every resumable run over a backend takes (ablate, evaluate, calibrate). */
export interface RunOptions {
  router: Router;
  outDir: string;
  /** Units (judgments, ratings, comparisons) in flight at once (default 8). */
  concurrency?: number | undefined;
  /** Per-unit deadline in ms (default per run: DEFAULT_DEADLINE_MS, DEFAULT_EVALUATE_DEADLINE_MS). */
  deadlineMs?: number | undefined;
  /** Bootstrap seed (default 1). */
  seed?: number | undefined;
  resamples?: number | undefined;
  limits?: { minChars: number; maxChars: number } | undefined;
  /** REASONING_FORMAT, as serving has it (default `auto`; `ablate` and `probe` pass it on). */
  reasoningFormat?: ReasoningFormat | undefined;
  /** Stop taking new units when aborted; results already appended are kept for the next run. */
  signal?: AbortSignal | undefined;
  /** Polled before each new unit: true stops taking units (a spend cap); units in flight finish and are kept. */
  stop?: (() => boolean) | undefined;
  /** Progress bar target (stderr in the CLI); omitted → no progress output. */
  progress?: ProgressStream | undefined;
}

/** What a resumable run (ablate, evaluate) returns. */
export interface ResumableRun<R> {
  /** False when the run was interrupted: rerun the same command to resume. */
  completed: boolean;
  results: R | null;
  /** Units run in this session, and units reused from the records file. */
  ran: number;
  reused: number;
  /** Records-file lines that did not parse (ignored). */
  badLines: number[];
  files: string[];
}

/** Which budget a vote baseline matches: the graph's measured mean LLM calls, or its mean tokens. */
export type MatchedOn = 'calls' | 'tokens';

export interface BaselineOf {
  graph: string;
  matchedOn: MatchedOn;
  /** Token-matched only: the vote judges' measured tokens per call N was computed with. */
  tokensPerCall?: number | undefined;
}

/** A graph as it takes part in an ablation. */
export interface GraphEntry {
  /** Name shown in reports: the name asked for on the command line (e.g. `default`). */
  label: string;
  graph: CompiledGraph;
  /** Other names asked for that resolved to the same graph hash (run once). */
  aliases: string[];
  /** The graphs this one is the budget-matched vote baseline of, and on what it was matched. */
  baselineFor: BaselineOf[];
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
  /**
   * Reasoning tokens per judgment (part of completion tokens), and whether some were estimated from a trace
   * (a server that reports none). Absent in results written before it existed.
   */
  reasoningTokensPerJudgment?: number | undefined;
  reasoningTokensEstimated?: boolean | undefined;
  perRole: Record<
    string,
    {
      callsPerJudgment: number;
      promptTokensPerJudgment: number;
      completionTokensPerJudgment: number;
      reasoningTokensPerJudgment?: number | undefined;
    }
  >;
}

/** Holm-adjusted p-values of one comparison within its report's family (same test, every comparison). */
export interface HolmAdjusted {
  f1: number | null;
  precision: number | null;
  recall: number | null;
  /** McNemar exact and clustered (tests of accuracy). */
  mcnemarExact: number | null;
  mcnemarClustered: number | null;
}

export interface PairedComparison {
  /** The other graph: F1(this) − F1(other) etc., on the items both decided. */
  against: string;
  rates: PairedRates;
  holm: HolmAdjusted;
}

/** What a graph spent per judgment and the vote baselines matched to it. */
export interface Budget {
  /** Mean LLM calls and tokens over judgments that reached the LLM (rejected inputs make no call). */
  meanCalls: number;
  meanTokens: number;
  /** vote-N with the odd N nearest the mean calls (an exactly even mean takes the larger N). */
  byCalls: { baseline: string; n: number } | null;
  /** vote-N with the odd N nearest the mean tokens ÷ the vote judges' measured tokens per call. */
  byTokens: { baseline: string; n: number; tokensPerCall: number } | null;
}

/** A graph against one of its budget-matched vote baselines. */
export interface BaselineComparison extends PairedComparison {
  graph: string;
  /** What the baseline was matched on for this graph (both when the two budgets give the same N). */
  matchedOn: MatchedOn[];
  /** Both sides' mean calls and tokens per LLM-reaching judgment. */
  graphCalls: number;
  graphTokens: number;
  baselineCalls: number | null;
  baselineTokens: number | null;
}

/**
 * Three views of the same graph when judgments fail: `complete` = over the items it decided (failures left
 * out; graphs are then compared on different items), `common` = over the items every graph of the run
 * decided, `failureAsWrong` = over every item, a failure counted as the wrong answer.
 */
export interface FailureViews {
  complete: RatesWithCi;
  common: RatesWithCi;
  failureAsWrong: RatesWithCi;
}

export interface GraphResult {
  name: string;
  graph: string;
  hash: string;
  description: string | null;
  aliases: string[];
  baselineFor: BaselineOf[];
  auto: boolean;
  llmCallsPerJudgment: number;
  criticalPathCalls: number;
  rounds: number;
  items: number;
  statuses: Record<ItemRecord['status'], number>;
  /** Failures (judge_error, timeout, overloaded) over all items; excluded from every rate below. */
  failure: Proportion;
  failureCodes: Record<string, number>;
  /** Over decided items (ok + rejected_input; a rejected input is a real no_match): `views.complete`. */
  metrics: RatesWithCi;
  views: FailureViews;
  calibration: ReviewerCalibration;
  /** Per dataset kind (positive, hard_negative, easy_negative): reward 1 among the decided items. */
  byKind: Record<string, Proportion>;
  nodes: NodeCalibration[];
  scores: Calibration;
  usage: Usage;
  budget: Budget | null;
  agreement: Agreement[];
  /** Judgments (ok) where some agent held the right stance at some point but the verdict was wrong. */
  oracleGap: Proportion | null;
  dynamics: DebateDynamics | null;
  paired: PairedComparison | null;
  /** For a cascade: judgments its first stage decided (`cascade_stop`) and judgments it escalated. */
  cascade: { stops: number; escalations: number } | null;
}

export interface AblationResults {
  version: 2;
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
  /** How F1 and every difference got its interval (by the number of clusters); proportions are exact. */
  method: EstimateMethod;
  /** E.g. too few clusters for the bootstrap; printed at the top of the report. */
  warnings: string[];
  backend: string;
  promptVersion: string;
  reference: string | null;
  /** Items every graph of the run decided (the `common` view). */
  commonItems: number;
  graphs: GraphResult[];
  /** Each graph against its budget-matched vote baselines (Holm over this family). */
  baselines: BaselineComparison[];
  /** With `--epochs N` (N ≥ 2): each graph's rates per epoch and their spread (intervals are over epoch 1). */
  epochs?: EpochSummary | undefined;
  /** How the run was made: command, commit, times, and every node's resolved backend (CLI runs). */
  manifest?: Record<string, unknown> | undefined;
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

/** A rate over the epochs: each epoch's value, their mean and sample standard deviation. */
export interface EpochRate {
  perEpoch: (number | null)[];
  mean: number | null;
  sd: number | null;
}

export interface EpochSpread {
  f1: EpochRate;
  accuracy: EpochRate;
  precision: EpochRate;
  recall: EpochRate;
  /** Items decided in every epoch, and among them those with the same verdict every time. */
  decidedEveryEpoch: number;
  sameVerdict: number;
  /** Mean over those items of the reward's variance across epochs (0 = the judge never changed its mind). */
  meanItemVariance: number | null;
}

export interface EpochSummary {
  epochs: number;
  graphs: Record<string, EpochSpread>;
}
