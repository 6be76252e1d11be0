/** Response shapes of the ranking routes: a ranked group, its pairs, and the meta every answer carries. */
import type { PlayedPair, Schedule } from '../../judge/tournament.js';
import { COMPARATIVE_PROMPT_VERSION } from '../../roles/index.js';
import type { Criterion } from '../../roles/types.js';
import { itemStatus } from '../controls/cancel.js';
import type { ComparedPair } from './comparing.js';
import { statusOf, type Outcome } from './outcomes.js';
import type { CandidateResult } from './rank-outcomes.js';
import type { BestOfN, Ranked } from './rank-service.js';
import { usageOf, type UsageJson } from './results.js';

export const round6 = (x: number | null): number | null => (x === null ? null : Math.round(x * 1e6) / 1e6);

export function pairJson(p: PlayedPair<ComparedPair>, transcripts: boolean) {
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
}

/** A candidate's status and why it was rejected (the reason its one preparation gave), as every route says it. */
function candidateStatus(outcome: Outcome): { status: string; reason?: string } {
  return outcome.kind === 'rejected'
    ? { status: statusOf(outcome), reason: outcome.reason }
    : { status: statusOf(outcome) };
}

export function rankJson(r: Ranked, transcripts: boolean) {
  const { candidates, ranking } = r.result;
  let calls = 0;
  let cached = 0;
  for (const p of r.played) {
    calls += p.result.judgment.usage.calls;
    if (p.result.cached) cached += 1;
  }
  const ci = (c: CandidateResult) => (c.ci === null ? null : [round6(c.ci[0]), round6(c.ci[1])]);
  return {
    scores: candidates.map((c) => round6(c.score)),
    rewards: r.rewards.map(round6),
    ranking,
    ci: candidates.map(ci),
    comparisons: { ...r.standings.comparisons, cached },
    calls,
    position_bias: r.standings.positionBias,
    results: candidates.map((c, k) => ({
      index: c.index,
      ...candidateStatus(c.outcome),
      score: round6(c.score),
      ci: ci(c),
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
}

/** Per candidate of a best-of-n answer without a tournament: rejected (and why) or shown to the judge. */
function preparedJson(rejections: ReadonlyArray<string | undefined>) {
  return rejections.map((reason, index) =>
    reason === undefined ? { index, status: 'ok' } : { index, status: 'rejected_input', reason },
  );
}

/** What every comparative answer carries: the backend, the prompt version, usage, the request id. */
export function rankMeta(backend: string, usage: UsageJson, requestId: string | undefined) {
  return {
    backend,
    prompt_version: COMPARATIVE_PROMPT_VERSION,
    usage,
    ...(requestId === undefined ? {} : { request_id: requestId }),
  };
}

/** A best-of-n answer: the best index and how it was found (no comparison, a pick call, a tournament). */
export function bestOfNJson(
  best: BestOfN,
  body: {
    method: 'tournament' | 'pick';
    criterion: Criterion;
    schedule: Schedule;
    request_id?: string | undefined;
  },
  backend: string,
) {
  const { criterion, request_id: requestId } = body;
  switch (best.kind) {
    case 'single':
      return {
        best_index: best.bestIndex,
        scores: [best.bestIndex === null ? 0 : null],
        method: body.method,
        criterion,
        reason: best.reason,
        results: preparedJson(best.rejections),
        calls: 0,
        ...rankMeta(backend, usageOf([]), requestId),
      };
    case 'pick': {
      const j = best.picked.judgment;
      return {
        best_index: j.best,
        scores: null,
        method: 'pick',
        criterion,
        status: j.status,
        confidence: j.confidence,
        cached: best.picked.cached,
        calls: j.usage.calls,
        pick_id: best.picked.pickId,
        results: preparedJson(best.picked.rejections),
        ...(j.reason === undefined ? {} : { reason: j.reason }),
        ...(j.error === undefined ? {} : { error: j.error.message, error_code: j.error.code }),
        ...rankMeta(backend, usageOf([best.picked]), requestId),
      };
    }
    case 'tournament': {
      const full = rankJson(best.ranked, false);
      return {
        best_index: best.bestIndex,
        scores: full.scores,
        method: 'tournament',
        criterion,
        schedule: body.schedule,
        ranking: full.ranking,
        ci: full.ci,
        results: full.results.map((r) => ({
          index: r.index,
          status: r.status,
          ...(r.reason === undefined ? {} : { reason: r.reason }),
        })),
        ...(best.reason === undefined ? {} : { reason: best.reason }),
        comparisons: full.comparisons,
        calls: full.calls,
        position_bias: full.position_bias,
        ...rankMeta(backend, usageOf(best.ranked.played.map((p) => p.result)), requestId),
      };
    }
  }
}
