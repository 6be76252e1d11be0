/**
 * The calibration report's numbers: members alone, their pairwise error correlation, Condorcet
 * predictions beside each observed vote committee, and cost per correct judgment, all over every item; the
 * budgeted committee and the strictness suggestions chosen on a selection part of the items and scored on
 * the disjoint held-out part (holdout.ts). Pure.
 */
import type { DatasetItem } from '../dataset.js';
import { isFailure } from '../records.js';
import { countInto, emptyConfusion, ratio, total, type Confusion } from '../stats/confusion.js';
import {
  betaBinomialPrediction,
  independentPrediction,
  jointPrediction,
  MAX_ENUMERATED_VOTERS,
  VOTE_RULES,
  type Prediction,
  type VoteRule,
  type VotedItem,
  type Voter,
} from './condorcet.js';
import { committeeGraph, compilableCommittees, type CommitteeGraph } from './emit.js';
import {
  clusteredRates,
  HOLDOUT_FRACTION,
  scorePlanHeldOut,
  splitByCluster,
  subsetRuns,
  subsetTable,
  type ItemSplit,
  type PlanHeldOut,
  type Rates,
  type SplitSummary,
} from './holdout.js';
import { planCommittee, type Plan, type PlanCandidate } from './plan.js';
import { suggestStrictness, type Suggestion } from './suggest.js';
import {
  calibrateMember,
  errorCorrelations,
  type ErrorCorrelation,
  type GraphRun,
  type MemberCalibration,
  type VoteTable,
} from './members.js';

export type PredictionModel = 'independent' | 'joint' | 'beta_binomial';
export const PREDICTION_MODELS: readonly PredictionModel[] = ['independent', 'joint', 'beta_binomial'];

export interface Observed extends Rates {
  /** Items the graph decided (failures excluded: a failure is not a verdict). */
  n: number;
  failures: number;
}

export interface RulePrediction {
  rule: VoteRule;
  independent: Prediction;
  joint: Prediction | null;
  /** Null when ρ is undefined in a class whose mean error is not 0 (`rhoNote`). */
  betaBinomial: Prediction | null;
}

export interface CommitteeResult {
  graph: string;
  /** The graph's own decision rule. */
  rule: VoteRule;
  voters: string[];
  /** Items on which every voter gave a stance (the joint distribution's sample). */
  items: number;
  prevalence: number | null;
  /**
   * Mean pairwise error φ among the voters, per class (the beta-binomial's ρ); null when φ is undefined for
   * every pair in that class (a member made no error, or every error, there): then `rhoNote` says so and the
   * beta-binomial prediction is not made (treating ρ as 0 would be the most optimistic prediction) unless the
   * class's mean error is 0, where ρ does not matter.
   */
  rho: { positive: number | null; negative: number | null };
  rhoNote: string | null;
  meanError: { positive: number; negative: number };
  /** Every rule over the same voters; the graph's own rule is the one to compare with `observed`. */
  predictions: RulePrediction[];
  observed: Observed;
  /** Per model: is its predicted accuracy (own rule) inside the observed accuracy CI; above it = over-promise. */
  check: Record<
    PredictionModel,
    { accuracy: number | null; inside: boolean | null; overPromises: boolean | null }
  >;
}

export interface CostRow {
  graph: string;
  judgments: number;
  decided: number;
  correct: number;
  correctAccepts: number;
  falsePositives: number;
  falseNegatives: number;
  calls: number;
  tokens: number;
  callsPerCorrect: number | null;
  tokensPerCorrect: number | null;
  tokensPerCorrectAccept: number | null;
  /** Money at `usdPerMillionTokens` (null when no price was given). */
  usd: number | null;
  usdPerCorrect: number | null;
  /** Review impact: FP·costFp + FN·costFn (+ money), total and per decided item; null without costs. */
  impactUsd: number | null;
  impactPerItemUsd: number | null;
}

export interface CalibrationResults {
  v: 1;
  backend: string;
  promptVersion: string;
  datasetSha256: string;
  items: number;
  level: number;
  hardNegatives: number;
  members: MemberCalibration[];
  correlations: ErrorCorrelation[];
  committees: CommitteeResult[];
  costs: CostRow[];
  costInputs: { costFp: number | null; costFn: number | null; usdPerMillionTokens: number | null };
  /** The graph with the lowest review impact per item (null without costs). */
  cheapest: string | null;
  /**
   * With `--plan` or `--suggest`: the split of the items by ground-truth cluster into the part the plan and
   * the suggestions are chosen on and the held-out part they are scored on (null when neither was asked).
   */
  split: SplitSummary | null;
  /** `--plan`: the budgeted majority committee chosen on the selection items (null when not asked). */
  plan: PlanResult | null;
  /** `--suggest`: the strictness variant that moves each biased member toward balance (selection items). */
  suggestions: Suggestion[] | null;
  /** Set by the run: where the plan's graph was written and the command that evaluates it. */
  committeeGraph?: EmittedGraph | null | undefined;
}

/** The plan, its committees replayed on the held-out items, and the best committee as a runnable graph. */
export interface PlanResult extends Plan {
  heldOut: PlanHeldOut;
  graph: CommitteeGraph | null;
}

export interface EmittedGraph {
  file: string;
  /** The held-out items as a dataset file the command reads. */
  dataset: string;
  command: string;
}

export interface CalibrateOptions {
  table: VoteTable;
  runs: readonly GraphRun[];
  backend: string;
  promptVersion: string;
  datasetSha256: string;
  seed: number;
  resamples: number;
  level?: number | undefined;
  costFp?: number | undefined;
  costFn?: number | undefined;
  usdPerMillionTokens?: number | undefined;
  /** `--plan --budget X [--plan-size K]`: budget per judgment (USD with a price, else tokens). */
  plan?: { budget: number; size: number } | undefined;
  suggest?: boolean | undefined;
  /**
   * The items `--plan` and `--suggest` choose on and are scored on (splitByCluster, computed once by the
   * caller, who also writes the held-out items); default: half the clusters held out with `seed`.
   */
  split?: ItemSplit | undefined;
}

function meanOf(values: readonly (number | null)[]): number {
  return meanOrNull(values) ?? 0;
}

function meanOrNull(values: readonly (number | null)[]): number | null {
  const ok = values.filter((v): v is number => v !== null);
  return ok.length === 0 ? null : ok.reduce((s, x) => s + x, 0) / ok.length;
}

/** The confusion matrix of a run's decided items (a null verdict is no prediction). */
function decidedConfusion(run: GraphRun, items: readonly DatasetItem[]): Confusion {
  const cm = emptyConfusion();
  run.records.forEach((record, i) => {
    const item = items[i];
    if (item !== undefined && record.verdict !== null)
      countInto(cm, item.label, record.verdict === 'match' ? 1 : 0);
  });
  return cm;
}

/** The committee's observed rates, exact over the ground-truth clusters (`clusterOf`), as the ablation's. */
function observe(
  run: GraphRun,
  items: readonly DatasetItem[],
  clusterOf: readonly number[],
  level: number,
): Observed {
  const { tp, tn, fp, fn } = decidedConfusion(run, items);
  const failures = run.records.filter(
    (record, i) => items[i] !== undefined && record.verdict === null && isFailure(record),
  ).length;
  const perCluster = new Map<number, Confusion>();
  run.records.forEach((record, i) => {
    const item = items[i];
    if (item === undefined || record.verdict === null) return;
    const key = clusterOf[i] ?? -1 - i;
    const cm = perCluster.get(key) ?? emptyConfusion();
    perCluster.set(key, cm);
    countInto(cm, item.label, record.verdict === 'match' ? 1 : 0);
  });
  return { n: tp + tn + fp + fn, failures, ...clusteredRates(perCluster.values(), level) };
}

function committee(
  run: GraphRun,
  table: VoteTable,
  members: readonly MemberCalibration[],
  correlations: readonly ErrorCorrelation[],
  level: number,
): CommitteeResult | null {
  const decision = run.graph.spec.decision;
  if (decision.rule === 'evaluator' || run.graph.spec.rounds !== 1 || run.graph.cascade !== undefined) {
    return null;
  }
  const rule = decision.rule;
  const ids = decision.nodes ?? run.graph.voters;
  if (ids.length < 2 || ids.length > MAX_ENUMERATED_VOTERS) return null;
  const keys = ids.map((id) => `${run.label}/${id}`);
  const rows = keys.map((k) => table.members.findIndex((m) => m.key === k));
  const calibrations = keys.map((k) => members.find((m) => m.member.key === k));
  if (rows.some((r) => r < 0)) return null;
  const weights = ids.map((id) => run.graph.weights.get(id) ?? 1);
  const voted: VotedItem[] = [];
  table.items.forEach((item, i) => {
    const votes: (0 | 1)[] = [];
    const confidences: number[] = [];
    for (const r of rows) {
      const v = table.votes[r]?.[i];
      if (v === null || v === undefined) return;
      votes.push(v);
      confidences.push(table.confidence[r]?.[i] ?? 1);
    }
    voted.push({ label: item.label, votes, confidences });
  });
  const positives = voted.filter((v) => v.label === 1).length;
  const prevalence = voted.length === 0 ? null : positives / voted.length;
  const voters: Voter[] = [];
  for (const [i, c] of calibrations.entries()) {
    if (c?.tpr.rate == null || c.tnr.rate === null) return null;
    voters.push({ tpr: c.tpr.rate, tnr: c.tnr.rate, weight: weights[i], confidence: c.meanConfidence });
  }
  const pairs = correlations.filter((p) => keys.includes(p.a) && keys.includes(p.b));
  const rho = {
    positive: meanOrNull(pairs.map((p) => p.phiPositive)),
    negative: meanOrNull(pairs.map((p) => p.phiNegative)),
  };
  const meanError = {
    positive: meanOf(calibrations.map((c) => c?.fnr.rate ?? null)),
    negative: meanOf(calibrations.map((c) => c?.fpr.rate ?? null)),
  };
  const undefinedIn = (['positive', 'negative'] as const).filter((k) => rho[k] === null);
  // ρ is irrelevant where the members never err: the beta-binomial then puts all mass on 0 errors.
  const blocking = undefinedIn.filter((k) => meanError[k] > 0);
  const rhoNote =
    undefinedIn.length === 0
      ? null
      : `φ undefined for every voter pair on ${undefinedIn.map((k) => `${k}s`).join(' and ')}` +
        (blocking.length > 0
          ? ': no beta-binomial prediction (ρ = 0 would be the most optimistic one)'
          : ' (no member errs there: ρ does not matter)');
  const pi = prevalence ?? 0.5;
  const predictions = VOTE_RULES.map((rule) => ({
    rule,
    independent: independentPrediction(rule, voters, pi),
    joint: jointPrediction(rule, voted, weights, pi),
    betaBinomial:
      blocking.length > 0
        ? null
        : betaBinomialPrediction(
            rule,
            ids.length,
            { error: meanError.positive, rho: rho.positive ?? 0 },
            { error: meanError.negative, rho: rho.negative ?? 0 },
            pi,
          ),
  }));
  const observed = observe(run, table.items, table.clusterOf, level);
  const own = predictions.find((p) => p.rule === rule);
  const judge = (p: Prediction | null | undefined) => {
    const lo = observed.accuracy.lo;
    const hi = observed.accuracy.hi;
    if (p == null || lo === null || hi === null)
      return { accuracy: p?.accuracy ?? null, inside: null, overPromises: null };
    return {
      accuracy: p.accuracy,
      inside: p.accuracy >= lo && p.accuracy <= hi,
      overPromises: p.accuracy > hi,
    };
  };
  return {
    graph: run.label,
    rule,
    voters: keys,
    items: voted.length,
    prevalence,
    rho,
    rhoNote,
    meanError,
    predictions,
    observed,
    check: {
      independent: judge(own?.independent),
      joint: judge(own?.joint),
      beta_binomial: judge(own?.betaBinomial),
    },
  };
}

function costRow(run: GraphRun, items: readonly DatasetItem[], options: CalibrateOptions): CostRow {
  const cm = decidedConfusion(run, items);
  const { tp, tn, fp, fn } = cm;
  const decided = total(cm);
  const correct = tp + tn;
  let calls = 0;
  let tokens = 0;
  for (const record of run.records) {
    calls += record.usage.calls;
    tokens += record.usage.promptTokens + record.usage.completionTokens;
  }
  const price = options.usdPerMillionTokens;
  const usd = price === undefined ? null : (tokens / 1e6) * price;
  const impact =
    options.costFp === undefined && options.costFn === undefined
      ? null
      : fp * (options.costFp ?? 0) + fn * (options.costFn ?? 0) + (usd ?? 0);
  return {
    graph: run.label,
    judgments: run.records.length,
    decided,
    correct,
    correctAccepts: tp,
    falsePositives: fp,
    falseNegatives: fn,
    calls,
    tokens,
    callsPerCorrect: ratio(calls, correct),
    tokensPerCorrect: ratio(tokens, correct),
    tokensPerCorrectAccept: ratio(tokens, tp),
    usd,
    usdPerCorrect: usd === null ? null : ratio(usd, correct),
    impactUsd: impact,
    impactPerItemUsd: impact === null ? null : ratio(impact, decided),
  };
}

/**
 * Seats a planner may fill: members of single-round graphs that vote on their own (no same-round inputs).
 * Tokens per judgment: the record's tokens of the member's role split evenly over that role's messages.
 */
export function planCandidates(
  runs: readonly GraphRun[],
  table: VoteTable,
  usdPerMillionTokens: number | undefined,
): PlanCandidate[] {
  const out: PlanCandidate[] = [];
  for (const run of runs) {
    if (run.graph.spec.rounds !== 1 || run.graph.cascade !== undefined) continue;
    for (const r of run.graph.debate) {
      if (!r.hasStance || r.deps.length > 0) continue;
      const key = `${run.label}/${r.node.id}`;
      if (!table.members.some((m) => m.key === key)) continue;
      let tokens = 0;
      for (const record of run.records) {
        const usage = record.roles[r.role.name];
        const count = record.messages.filter((m) => m.role === r.role.name).length;
        if (usage !== undefined && count > 0) tokens += (usage.promptTokens + usage.completionTokens) / count;
      }
      tokens = run.records.length === 0 ? 0 : tokens / run.records.length;
      out.push({
        key,
        role: r.role.name,
        model: r.node.model ?? null,
        tokens,
        cost: usdPerMillionTokens === undefined ? tokens : (tokens / 1e6) * usdPerMillionTokens,
      });
    }
  }
  return out;
}

function calibrateAll(table: VoteTable, level: number): MemberCalibration[] {
  const members: MemberCalibration[] = [];
  for (let m = 0; m < table.members.length; m++) {
    const c = calibrateMember(table, m, level);
    if (c !== null) members.push(c);
  }
  return members;
}

/** The parts of the items `--plan` and `--suggest` see: chosen on `selection`, scored on `heldOut`. */
interface Parts {
  split: SplitSummary;
  selection: VoteTable;
  selectionRuns: GraphRun[];
  chosenOn: MemberCalibration[];
  heldOut: VoteTable;
}

function committeeDescription(plan: Plan, parts: Parts, heldOut: PlanHeldOut): string {
  const acc = heldOut.best?.accuracy;
  const scored =
    acc?.rate == null
      ? 'not scored on held-out items (too few)'
      : `held-out accuracy ${(100 * acc.rate).toFixed(1)} % over ${heldOut.best?.n ?? 0} items`;
  return (
    `majority of ${plan.size} seats chosen by calibrate --plan (budget ${plan.budget} ${plan.unit}/judgment) on ` +
    `${parts.split.selection.items} items, seed ${parts.split.seed}; ${scored}`
  );
}

function budgetedPlan(options: CalibrateOptions, parts: Parts, level: number): PlanResult | null {
  if (options.plan === undefined) return null;
  const plan = planCommittee({
    table: parts.selection,
    members: parts.chosenOn,
    candidates: planCandidates(parts.selectionRuns, parts.selection, options.usdPerMillionTokens),
    size: options.plan.size,
    budget: options.plan.budget,
    unit: options.usdPerMillionTokens === undefined ? 'tokens' : 'usd',
    admissible: compilableCommittees(options.table, options.runs),
  });
  const heldOut = scorePlanHeldOut(plan, parts.heldOut, parts.split, level);
  const graph =
    plan.best === null
      ? null
      : committeeGraph(
          plan.best.members,
          options.table,
          options.runs,
          committeeDescription(plan, parts, heldOut),
        );
  return { ...plan, heldOut, graph };
}

/** `--plan` and `--suggest`: chosen on the selection clusters, scored on the held-out ones. */
function selectAndHoldOut(
  options: CalibrateOptions,
  level: number,
): Pick<CalibrationResults, 'split' | 'plan' | 'suggestions'> {
  if (options.plan === undefined && options.suggest !== true) {
    return { split: null, plan: null, suggestions: null };
  }
  const { table, runs } = options;
  const split = options.split ?? splitByCluster(table.items, options.seed, HOLDOUT_FRACTION);
  const selection = subsetTable(table, split.selection);
  const parts: Parts = {
    split: split.summary,
    selection,
    selectionRuns: subsetRuns(runs, split.selection),
    chosenOn: calibrateAll(selection, level),
    heldOut: subsetTable(table, split.heldOut),
  };
  const heldOutMembers = split.summary.scored ? calibrateAll(parts.heldOut, level) : null;
  return {
    split: split.summary,
    plan: budgetedPlan(options, parts, level),
    suggestions: options.suggest === true ? suggestStrictness(parts.chosenOn, runs, heldOutMembers) : null,
  };
}

export function calibrate(options: CalibrateOptions): CalibrationResults {
  const level = options.level ?? 0.95;
  const { table, runs } = options;
  const members = calibrateAll(table, level);
  const correlations = errorCorrelations(table, { seed: options.seed, resamples: options.resamples, level });
  const committees: CommitteeResult[] = [];
  for (const run of runs) {
    const c = committee(run, table, members, correlations, level);
    if (c !== null) committees.push(c);
  }
  const costs = runs.map((run) => costRow(run, table.items, options));
  let cheapest: string | null = null;
  let best = Number.POSITIVE_INFINITY;
  for (const row of costs) {
    if (row.impactPerItemUsd !== null && row.impactPerItemUsd < best) {
      best = row.impactPerItemUsd;
      cheapest = row.graph;
    }
  }
  return {
    v: 1,
    backend: options.backend,
    promptVersion: options.promptVersion,
    datasetSha256: options.datasetSha256,
    items: table.items.length,
    level,
    hardNegatives: table.items.filter((i) => i.kind === 'hard_negative').length,
    members,
    correlations,
    committees,
    costs,
    costInputs: {
      costFp: options.costFp ?? null,
      costFn: options.costFn ?? null,
      usdPerMillionTokens: options.usdPerMillionTokens ?? null,
    },
    cheapest,
    ...selectAndHoldOut(options, level),
  };
}
