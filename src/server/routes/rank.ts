/**
 * Comparative judging over HTTP:
 * - POST /v1/rank        a group ranked by a pairwise tournament → Bradley–Terry (or Elo) scores, CIs, ranking,
 *                        graded or top-k rewards;
 * - POST /v1/best-of-n   the best candidate by a tournament, or by one "pick the best" call (the paper's BoN);
 * - POST /get_reward/rank  OpenRLHF group adapter (its /get_reward body; rollouts grouped by prompt and label);
 * - POST /slime/rank       slime `--group-rm` adapter (`{samples: [{prompt, response, label}]}`).
 */
import type { FastifyInstance } from 'fastify';

import { RewardError } from '../../errors.js';
import { checkCandidate } from '../../judge/degenerate.js';
import type { ScoreMethod } from '../../judge/bradley-terry.js';
import {
  plannedPairs,
  standings,
  tournamentRewards,
  type PlayedPair,
  type RewardMode,
  type Schedule,
  type Standings,
} from '../../judge/tournament.js';
import { COMPARATIVE_PROMPT_VERSION } from '../../roles/index.js';
import type { Criterion } from '../../roles/types.js';
import type { ComparedPair, TournamentGroup } from '../comparing.js';
import { itemStatus } from '../cancel.js';
import type { ServerContext } from '../context.js';
import { requestControls, type Controls } from '../controls.js';
import { comparisonModelOf } from '../stamps.js';
import { usageOf, type UsageJson } from '../results.js';
import { parseOr400 } from '../schemas.js';
import { stripChatTokens } from '../../text/chat-tokens.js';
import { candidateFromQuery, labelParts, questionFromMessages } from './adapters.js';

/** A group as a route hands it over. */
interface RankGroup extends TournamentGroup {
  method: ScoreMethod;
  rewardMode: RewardMode;
  topK: number;
}

interface Ranked {
  group: RankGroup;
  played: Array<PlayedPair<ComparedPair>>;
  standings: Standings;
  rewards: Array<number | null>;
}

/** LLM calls a schedule plans for G candidates (both orders, `judges` per order). */
export function plannedCalls(schedule: Schedule, g: number, judges: number): number {
  return plannedPairs(schedule, g) * 2 * judges;
}

const round6 = (x: number | null): number | null => (x === null ? null : Math.round(x * 1e6) / 1e6);

export function registerRankRoutes(app: FastifyInstance, ctx: ServerContext): void {
  const { schemas, comparisons, metrics, config, router } = ctx;

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

  const rankGroups = async (
    route: string,
    groups: readonly RankGroup[],
    scope: {
      deadline: number;
      signal: AbortSignal;
      cancel?: AbortSignal | undefined;
      requestId?: string | undefined;
    },
  ): Promise<Ranked[]> => {
    checkBudget(groups);
    const played = await comparisons.tournaments(groups, scope);
    return groups.map((group, k) => {
      const p = played[k] ?? [];
      const s = standings(group.candidates.length, p, { method: group.method });
      if (s.positionBias.rate !== null) {
        metrics.rankPositionBiasRate.labels(route, group.shared.criterion).observe(s.positionBias.rate);
      }
      return { group, played: p, standings: s, rewards: tournamentRewards(s, group.rewardMode, group.topK) };
    });
  };

  const pairJson = (p: PlayedPair<ComparedPair>, transcripts: boolean) => {
    const j = p.result.judgment;
    const winner = (pref: 'a' | 'b' | 'tie' | null): number | 'tie' | null =>
      pref === 'a' ? p.i : pref === 'b' ? p.j : pref;
    return {
      i: p.i,
      j: p.j,
      round: p.round,
      winner: winner(j.preference),
      status: itemStatus(j),
      position_bias: j.positionBias,
      // Each order's answer: i shown first, j shown first.
      orders: { i_first: winner(j.orders.ab), j_first: winner(j.orders.ba) },
      cached: p.result.cached,
      calls: j.usage.calls,
      comparison_id: p.result.comparisonId,
      ...(j.reason === undefined ? {} : { reason: j.reason }),
      ...(j.error === undefined ? {} : { error: j.error.message, error_code: j.error.code }),
      ...(transcripts ? { votes: j.votes } : {}),
    };
  };

  const rankJson = (r: Ranked, transcripts: boolean) => {
    const s = r.standings;
    let calls = 0;
    let cached = 0;
    for (const p of r.played) {
      calls += p.result.judgment.usage.calls;
      if (p.result.cached) cached += 1;
    }
    return {
      scores: s.candidates.map((c) => round6(c.score)),
      rewards: r.rewards.map(round6),
      ranking: s.ranking,
      ci: s.candidates.map((c) => (c.ci === null ? null : [round6(c.ci[0]), round6(c.ci[1])])),
      comparisons: { ...s.comparisons, cached },
      calls,
      position_bias: s.positionBias,
      results: s.candidates.map((c, k) => ({
        index: c.index,
        score: round6(c.score),
        ci: c.ci === null ? null : [round6(c.ci[0]), round6(c.ci[1])],
        rank: c.rank,
        reward: round6(r.rewards[k] ?? null),
        wins: c.wins,
        losses: c.losses,
        ties: c.ties,
        failed: c.failed,
      })),
      pairs: r.played.map((p) => pairJson(p, transcripts)),
      schedule: r.group.schedule,
      criterion: r.group.shared.criterion,
      method: r.group.method,
      reward_mode: r.group.rewardMode,
      ...(r.group.rewardMode === 'top_k' ? { top_k: r.group.topK } : {}),
      judges: r.group.judges,
    };
  };

  const meta = (
    usage: UsageJson,
    requestId: string | undefined,
    votes: ReadonlyArray<{ model?: string }> = [],
  ) => ({
    backend: router.name,
    prompt_version: COMPARATIVE_PROMPT_VERSION,
    judge_model: comparisonModelOf(votes, router),
    usage,
    ...(requestId === undefined ? {} : { request_id: requestId }),
  });

  /** The criterion a body asks for: without one, `match` (the schema requires a ground truth then). */
  const criterionOf = (body: { criterion?: Criterion | undefined }): Criterion => body.criterion ?? 'match';

  app.post('/v1/rank', async (request, reply) => {
    const body = parseOr400(schemas.Rank, request.body);
    const group: RankGroup = {
      candidates: body.candidates,
      shared: {
        question: body.question,
        groundTruth: body.ground_truth ?? null,
        criterion: criterionOf(body),
      },
      schedule: body.schedule,
      judges: body.judges,
      method: body.method,
      rewardMode: body.reward_mode,
      topK: body.top_k ?? 1,
    };
    const [ranked] = await rankGroups('/v1/rank', [group], {
      ...requestControls(ctx, request, reply, '/v1/rank', body),
      requestId: body.request_id,
    });
    if (ranked === undefined) throw new Error('rank produced no group');
    return {
      ...rankJson(ranked, body.include_transcripts ?? false),
      ...meta(
        usageOf(ranked.played.map((p) => p.result)),
        body.request_id,
        ranked.played.flatMap((p) => p.result.judgment.votes),
      ),
    };
  });

  app.post('/v1/best-of-n', async (request, reply) => {
    const body = parseOr400(schemas.BestOfN, request.body);
    const shared = {
      question: body.question,
      groundTruth: body.ground_truth ?? null,
      criterion: body.criterion,
    };
    const scope = {
      ...requestControls(ctx, request, reply, '/v1/best-of-n', body),
      requestId: body.request_id,
    };
    if (body.candidates.length === 1) {
      // Nothing to compare: the only candidate is the best one, unless it is not an idea at all.
      const only = body.candidates[0] ?? '';
      const real = checkCandidate(only, config.candidateLimits).ok;
      return {
        best_index: real ? 0 : null,
        scores: [null],
        method: body.method,
        criterion: body.criterion,
        reason: real ? 'single candidate' : 'the only candidate is degenerate',
        calls: 0,
        ...meta(usageOf([]), body.request_id),
      };
    }
    if (body.method === 'pick') {
      const picked = await comparisons.pick({ ...shared, candidates: body.candidates }, scope);
      const j = picked.judgment;
      return {
        best_index: j.best,
        scores: null,
        method: 'pick',
        criterion: body.criterion,
        status: j.status,
        confidence: j.confidence,
        cached: picked.cached,
        calls: j.usage.calls,
        pick_id: picked.pickId,
        ...(j.reason === undefined ? {} : { reason: j.reason }),
        ...(j.error === undefined ? {} : { error: j.error.message, error_code: j.error.code }),
        ...meta(usageOf([picked]), body.request_id),
      };
    }
    const group: RankGroup = {
      candidates: body.candidates,
      shared,
      schedule: body.schedule,
      judges: body.judges,
      method: 'bradley_terry',
      rewardMode: 'graded',
      topK: 1,
    };
    const [ranked] = await rankGroups('/v1/best-of-n', [group], scope);
    if (ranked === undefined) throw new Error('best-of-n produced no group');
    const s = ranked.standings;
    const top = s.ranking[0];
    const full = rankJson(ranked, false);
    return {
      // Deterministic: highest score, then most wins, then lowest index; null when nobody has a score.
      best_index: top !== undefined && s.candidates[top]?.score != null ? top : null,
      scores: full.scores,
      method: 'tournament',
      criterion: body.criterion,
      schedule: body.schedule,
      ranking: full.ranking,
      ci: full.ci,
      comparisons: full.comparisons,
      calls: full.calls,
      position_bias: full.position_bias,
      ...meta(usageOf(ranked.played.map((p) => p.result)), body.request_id),
    };
  });

  /** Groups items by (question, ground truth) in order of first appearance; each group needs ≥ 2 items. */
  const toGroups = (
    items: ReadonlyArray<{ question: string; groundTruth: string; candidate: string }>,
    query: {
      schedule: Schedule;
      criterion: Criterion;
      reward_mode: RewardMode;
      top_k?: number | undefined;
      judges: number;
    },
  ): { groups: RankGroup[]; where: Array<{ group: number; index: number }> } => {
    const byKey = new Map<string, number>();
    const groups: RankGroup[] = [];
    const where = items.map((item) => {
      const key = `${item.question.length}:${item.question}|${item.groundTruth}`;
      let k = byKey.get(key);
      if (k === undefined) {
        k = groups.length;
        byKey.set(key, k);
        groups.push({
          candidates: [],
          shared: { question: item.question, groundTruth: item.groundTruth, criterion: query.criterion },
          schedule: query.schedule,
          judges: query.judges,
          method: 'bradley_terry',
          rewardMode: query.reward_mode,
          topK: query.top_k ?? 1,
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
  };

  /** Per input item: its group's reward and score, and what trainers log. */
  const perItem = (ranked: readonly Ranked[], where: ReadonlyArray<{ group: number; index: number }>) =>
    where.map(({ group, index }) => {
      const r = ranked[group];
      const c = r?.standings.candidates[index];
      return {
        reward: r?.rewards[index] ?? null,
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

  const failedItems = (items: ReadonlyArray<{ reward: number | null }>): RewardError => {
    const failed = items.flatMap((it, index) => (it.reward === null ? [index] : []));
    return new RewardError(
      'RW_JUDGE_FAILED',
      `${failed.length} of ${items.length} rollouts have no successful comparison (no reward to give; set ` +
        'FAILURE_REWARD to answer a fixed reward instead)',
      { details: { failed: failed.slice(0, 50), retry_after_s: 1 } },
    );
  };

  /**
   * A group adapter's rollouts grouped, ranked and answered per rollout; without FAILURE_REWARD a rollout
   * with no successful comparison fails the request, with it `fallback` stands in for its reward.
   */
  const rankRollouts = async (
    route: string,
    items: Parameters<typeof toGroups>[0],
    query: Parameters<typeof toGroups>[1],
    controls: Controls,
  ) => {
    const { groups, where } = toGroups(items, query);
    const ranked = await rankGroups(route, groups, controls);
    const out = perItem(ranked, where);
    if (config.failureReward === undefined && out.some((o) => o.reward === null)) throw failedItems(out);
    return { ranked, out, fallback: config.failureReward ?? 0 };
  };

  app.post('/get_reward/rank', async (request, reply) => {
    const query = parseOr400(schemas.GroupQuery, request.query, 'query string');
    const body = parseOr400(schemas.OpenRlhf, request.body);
    if (body.query.length === 0) return { rewards: [], scores: [], extra_logs: {} };
    const items = body.query.map((q, i) => {
      const prompt = body.prompts?.[i];
      const { groundTruth, question } = labelParts(body.labels[i] ?? '', schemas, ['labels', i]);
      return {
        question: question ?? (prompt === undefined ? '' : stripChatTokens(prompt)),
        groundTruth,
        candidate: candidateFromQuery(q, prompt),
      };
    });
    const { ranked, out, fallback } = await rankRollouts(
      '/get_reward/rank',
      items,
      query,
      requestControls(ctx, request, reply, '/get_reward/rank', {}),
    );
    return {
      rewards: out.map((o) => round6(o.reward) ?? fallback),
      scores: out.map((o) => round6(o.score) ?? fallback),
      // OpenRLHF logs the mean of each list: same keys for every item, numbers only.
      extra_logs: {
        judge_failed: out.map((o) => (o.reward === null ? 1 : 0)),
        comparisons_failed: out.map((o) => o.failed),
        wins: out.map((o) => o.wins),
        position_bias_rate: out.map((o) => o.positionBiasRate),
        group_size: out.map((o) => o.groupSize),
      },
      prompt_version: COMPARATIVE_PROMPT_VERSION,
      judge_model: comparisonModelOf(
        ranked.flatMap((r) => r.played.flatMap((p) => p.result.judgment.votes)),
        router,
      ),
    };
  });

  app.post('/slime/rank', async (request, reply) => {
    const query = parseOr400(schemas.GroupQuery, request.query, 'query string');
    const body = parseOr400(schemas.SlimeGroup, request.body);
    const items = body.samples.map((sample, i) => {
      const { groundTruth, question } = labelParts(sample.label, schemas, ['samples', i, 'label']);
      return {
        question: question ?? questionFromMessages(sample.prompt),
        groundTruth,
        candidate: stripChatTokens(sample.response),
      };
    });
    const { ranked, out, fallback } = await rankRollouts(
      '/slime/rank',
      items,
      query,
      requestControls(ctx, request, reply, '/slime/rank', {}),
    );
    return {
      rewards: out.map((o) => round6(o.reward) ?? fallback),
      results: out.map((o) => ({
        reward: round6(o.reward) ?? fallback,
        score: round6(o.score),
        rank: o.rank,
        wins: o.wins,
        losses: o.losses,
        ties: o.ties,
        failed: o.failed,
        judge_failed: o.reward === null,
      })),
      position_bias: ranked.map((r) => r.standings.positionBias),
      backend: router.name,
      prompt_version: COMPARATIVE_PROMPT_VERSION,
      judge_model: comparisonModelOf(
        ranked.flatMap((r) => r.played.flatMap((p) => p.result.judgment.votes)),
        router,
      ),
    };
  });
}
