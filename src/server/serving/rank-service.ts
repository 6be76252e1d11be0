/**
 * The serving-side ranking service behind /v1/rank, /v1/best-of-n and the group adapters (/get_reward/rank,
 * /slime/rank): the call budget, tournaments (through `comparing.ts`: coalescing, admission, deadline),
 * standings and rewards, the position-bias metric, rollouts grouped by (question, ground truth), and the
 * failure policy of the group adapters (FAILURE_REWARD). Routes map HTTP to it and back (`rank-results.ts`).
 */
import { normalized } from '../../text/normalize.js';
import type { Config } from '../../config.js';
import { RewardError } from '../../errors.js';
import type { ScoreMethod } from '../../judge/bradley-terry.js';
import type { RejectionReason } from '../../judge/degenerate.js';
import {
  plannedPairs,
  standings,
  type PlayedPair,
  type RewardMode,
  type Schedule,
  type Standings,
} from '../../judge/tournament.js';
import type { Criterion } from '../../roles/types.js';
import type {
  ComparedPair,
  ComparisonService,
  PickedBest,
  RequestScope,
  TournamentGroup,
} from './comparing.js';
import type { Metrics } from '../observe/metric-types.js';
import { rewardOf, trainerFailure, type Outcome } from './outcomes.js';
import { rankOutcomes, type RankedOutcomes } from './rank-outcomes.js';

/** A group as a route hands it over: what to compare and how to score and reward it. */
export interface RankGroup extends TournamentGroup {
  method: ScoreMethod;
  rewardMode: RewardMode;
  topK: number;
}

/**
 * A ranked group: its played pairs, standings, each candidate's outcome (`rank-outcomes.ts`) and reward
 * (`outcomes.ts`: rejected 0, failed or cancelled null).
 */
export interface Ranked {
  group: RankGroup;
  played: Array<PlayedPair<ComparedPair>>;
  standings: Standings;
  result: RankedOutcomes;
  rewards: Array<number | null>;
}

/** What a best-of-n request asks for (the body, past validation). */
export interface BestOfNRequest {
  candidates: readonly string[];
  shared: TournamentGroup['shared'];
  method: 'tournament' | 'pick';
  schedule: Schedule;
  judges: number;
}

/**
 * How best-of-n answered: nothing to compare, one "pick the best" call, or a tournament. `bestIndex` is never
 * a rejected candidate, and null when every candidate is rejected or the comparisons are incomplete.
 */
export type BestOfN =
  | { kind: 'single'; bestIndex: 0 | null; reason: string; rejections: Array<RejectionReason | undefined> }
  | { kind: 'pick'; picked: PickedBest }
  | { kind: 'tournament'; ranked: Ranked; bestIndex: number | null; reason?: string | undefined };

/** One rollout of a group adapter, as the route read it from the trainer's body. */
export interface Rollout {
  question: string;
  groundTruth: string;
  candidate: string;
}

/** The group adapters' query string (`?schedule=…&criterion=…`). */
export interface RolloutOptions {
  schedule: Schedule;
  criterion: Criterion;
  reward_mode: RewardMode;
  top_k?: number | undefined;
  judges: number;
}

/** Per rollout: its group's outcome, reward and score, and what trainers log. */
export interface RankedRollout {
  outcome: Outcome;
  reward: number | null;
  score: number | null;
  rank: number | null;
  wins: number;
  losses: number;
  ties: number;
  failed: number;
  positionBiasRate: number;
  groupSize: number;
}

export interface RankedRollouts {
  ranked: Ranked[];
  /** One per input rollout, in order. */
  out: RankedRollout[];
}

export interface RankService {
  /** Ranks the groups (all concurrently, admitted together); refuses a schedule over MAX_RANK_CALLS. */
  rank(route: string, groups: readonly RankGroup[], scope: RequestScope): Promise<Ranked[]>;
  /** `rank` for a single group. */
  rankOne(route: string, group: RankGroup, scope: RequestScope): Promise<Ranked>;
  /** The best candidate by a tournament or a pick call; a single candidate needs no comparison. */
  bestOfN(route: string, request: BestOfNRequest, scope: RequestScope): Promise<BestOfN>;
  /**
   * A group adapter's rollouts grouped by (question, ground truth), ranked and answered per rollout; without
   * FAILURE_REWARD a failed rollout (its group's comparisons incomplete) fails the request (503
   * RW_JUDGE_FAILED); a cancelled one is answered (reward null).
   */
  rankRollouts(
    route: string,
    items: readonly Rollout[],
    options: RolloutOptions,
    scope: RequestScope,
  ): Promise<RankedRollouts>;
}

export interface RankServiceOptions {
  comparisons: ComparisonService;
  metrics: Metrics;
  config: Pick<Config, 'maxRankCalls' | 'failureReward'>;
}

/** LLM calls a schedule plans for G candidates (both orders, `judges` per order). */
export function plannedCalls(schedule: Schedule, g: number, judges: number): number {
  return plannedPairs(schedule, g) * 2 * judges;
}

/** The criterion a body asks for: without one, `match` (the schemas require a ground truth then). */
export function criterionOf(body: { criterion?: Criterion | undefined }): Criterion {
  return body.criterion ?? 'match';
}

/** Groups items by (question, ground truth), normalised, in order of first appearance; each group needs ≥ 2 items. */
export function toGroups(
  items: readonly Rollout[],
  options: RolloutOptions,
): { groups: RankGroup[]; where: Array<{ group: number; index: number }> } {
  const byKey = new Map<string, number>();
  const groups: RankGroup[] = [];
  const where = items.map((item) => {
    // Grouped on the texts as the pairs key them (normalised: NFC), so NFC and NFD spellings of one prompt
    // are one group (issue 38 item 6).
    const question = normalized(item.question);
    const key = `${question.length}:${question}|${normalized(item.groundTruth)}`;
    let k = byKey.get(key);
    if (k === undefined) {
      k = groups.length;
      byKey.set(key, k);
      groups.push({
        candidates: [],
        shared: { question: item.question, groundTruth: item.groundTruth, criterion: options.criterion },
        schedule: options.schedule,
        judges: options.judges,
        method: 'bradley_terry',
        rewardMode: options.reward_mode,
        topK: options.top_k ?? 1,
      });
    }
    const group = groups[k];
    if (group === undefined) throw new Error('group index out of range');
    const candidates = [...group.candidates, item.candidate];
    group.candidates = candidates;
    return { group: k, index: candidates.length - 1 };
  });
  const lone = groups.findIndex((g) => g.candidates.length < 2);
  if (lone >= 0) {
    throw new RewardError(
      'RW_BAD_REQUEST',
      `group ${lone} (one prompt and label) has a single rollout: ranking needs at least 2 per group ` +
        '(n_samples_per_prompt ≥ 2)',
      { details: { group: lone } },
    );
  }
  return { groups, where };
}

function perItem(
  ranked: readonly Ranked[],
  where: ReadonlyArray<{ group: number; index: number }>,
): RankedRollout[] {
  return where.map(({ group, index }) => {
    const r = ranked[group];
    const c = r?.result.candidates[index];
    const outcome: Outcome = c?.outcome ?? {
      kind: 'failed',
      status: 'judge_error',
      code: 'RW_INTERNAL',
      message: 'internal error',
    };
    return {
      outcome,
      reward: rewardOf(outcome),
      score: c?.score ?? null,
      rank: c?.rank ?? null,
      wins: c?.wins ?? 0,
      losses: c?.losses ?? 0,
      ties: c?.ties ?? 0,
      failed: c?.failed ?? 0,
      positionBiasRate: r?.standings.positionBias.rate ?? 0,
      groupSize: r?.group.candidates.length ?? 0,
    };
  });
}

/** Best-of-n from a ranked group: its first judged candidate, or null (and why). */
function bestOf(ranked: Ranked): { bestIndex: number | null; reason?: string | undefined } {
  const top = ranked.result.ranking[0];
  const c = top === undefined ? undefined : ranked.result.candidates[top];
  if (c?.outcome.kind === 'judged') return { bestIndex: top ?? null };
  if (ranked.result.incomplete?.kind === 'cancelled') return { bestIndex: null, reason: 'cancelled' };
  if (ranked.result.incomplete !== undefined) return { bestIndex: null, reason: 'comparisons incomplete' };
  return { bestIndex: null, reason: 'every candidate is degenerate' };
}

export function createRankService(options: RankServiceOptions): RankService {
  const { comparisons, metrics, config } = options;

  /** Refuses a schedule over the operator's call budget before anything runs. */
  const checkBudget = (groups: readonly RankGroup[]): void => {
    let planned = 0;
    for (const g of groups) planned += plannedCalls(g.schedule, g.candidates.length, g.judges);
    if (planned > config.maxRankCalls) {
      throw new RewardError(
        'RW_TOO_MANY_COMPARISONS',
        `the schedule plans ${planned} LLM calls, over MAX_RANK_CALLS = ${config.maxRankCalls}: ` +
          'use schedule "circular" or "swiss", fewer candidates or fewer judges',
        { details: { planned_calls: planned, limit: config.maxRankCalls } },
      );
    }
  };

  const rank: RankService['rank'] = async (route, groups, scope) => {
    checkBudget(groups);
    const played = await comparisons.tournaments(groups, scope);
    return groups.map((group, k) => {
      const t = played[k] ?? { played: [], rejections: [] };
      const rejected = new Set(t.rejections.flatMap((r, k) => (r === undefined ? [] : [k])));
      const s = standings(group.candidates.length, t.played, { method: group.method, rejected });
      if (s.positionBias.rate !== null) {
        metrics.rankPositionBiasRate.labels(route, group.shared.criterion).observe(s.positionBias.rate);
      }
      const result = rankOutcomes(s, t.played, t.rejections, group.rewardMode, group.topK);
      const rewards = result.candidates.map((c) => rewardOf(c.outcome));
      return { group, played: t.played, standings: s, result, rewards };
    });
  };

  const rankOne: RankService['rankOne'] = async (route, group, scope) => {
    const [ranked] = await rank(route, [group], scope);
    if (ranked === undefined) throw new Error('rank produced no group');
    return ranked;
  };

  const bestOfN: RankService['bestOfN'] = async (route, request, scope) => {
    if (request.candidates.length === 1) {
      // Nothing to compare: the only candidate is the best one, unless it is not an idea at all (the same
      // one preparation as every compared candidate, and counted like one).
      const { rejections } = comparisons.prepare(request.shared, request.candidates);
      const real = rejections[0] === undefined;
      return {
        kind: 'single',
        bestIndex: real ? 0 : null,
        reason: real ? 'single candidate' : 'the only candidate is degenerate',
        rejections,
      };
    }
    if (request.method === 'pick') {
      const picked = await comparisons.pick({ ...request.shared, candidates: request.candidates }, scope);
      return { kind: 'pick', picked };
    }
    const ranked = await rankOne(
      route,
      {
        candidates: request.candidates,
        shared: request.shared,
        schedule: request.schedule,
        judges: request.judges,
        method: 'bradley_terry',
        rewardMode: 'graded',
        topK: 1,
      },
      scope,
    );
    // Deterministic: highest score, then most wins, then lowest index, among the judged candidates only.
    return { kind: 'tournament', ranked, ...bestOf(ranked) };
  };

  const rankRollouts: RankService['rankRollouts'] = async (route, items, query, scope) => {
    const { groups, where } = toGroups(items, query);
    const ranked = await rank(route, groups, scope);
    const out = perItem(ranked, where);
    const outcomes = out.map((o) => o.outcome);
    const refusal = trainerFailure(outcomes, config.failureReward, 'rollouts');
    if (refusal !== undefined) throw refusal;
    return { ranked, out };
  };

  return { rank, rankOne, bestOfN, rankRollouts };
}
