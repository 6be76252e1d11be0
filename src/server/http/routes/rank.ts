/**
 * Comparative judging over HTTP:
 * - POST /v1/rank        a group ranked by a pairwise tournament → Bradley–Terry (or Elo) scores, CIs, ranking,
 *                        graded or top-k rewards;
 * - POST /v1/best-of-n   the best candidate by a tournament, or by one "pick the best" call (the paper's BoN);
 * - POST /get_reward/rank  OpenRLHF group adapter (its /get_reward body; rollouts grouped by prompt and label);
 * - POST /slime/rank       slime `--group-rm` adapter (`{samples: [{prompt, response, label}]}`).
 * The logic is in `../rank-service.ts`; these map HTTP to it and back.
 */
import type { FastifyInstance } from 'fastify';

import type { ServerContext } from '../context.js';
import { requestControls } from '../request-controls.js';
import { laneOf, PRIORITY_HEADER } from '../../admission/priority.js';
import { bestOfNJson, rankJson, rankMeta, round6 } from '../../serving/rank-results.js';
import { failureLogs, rejectionLogs, statusOf, trainerReward, trainerScore } from '../../serving/outcomes.js';
import { createRankService, criterionOf, type RankGroup } from '../../serving/rank-service.js';
import { usageOf } from '../../serving/results.js';
import { COMPARATIVE_PROMPT_VERSION } from '../../../roles/index.js';
import { parseOr400 } from '../schemas.js';
import { comparisonModelOf } from '../../controls/stamps.js';
import {
  labelParts,
  questionFromMessages,
  questionOfQuery,
  rolloutOfQuery,
  withPromptTrace,
} from './adapters.js';

export function registerRankRoutes(app: FastifyInstance, ctx: ServerContext): void {
  const { schemas, router } = ctx;
  const failureReward = ctx.config.failureReward;
  const ranking = createRankService(ctx);
  /** The judge model of some played comparisons: the models their votes name, else the configured one. */
  const modelOf = (
    played: ReadonlyArray<{ result: { judgment: { votes: ReadonlyArray<{ model?: string }> } } }>,
  ) =>
    comparisonModelOf(
      played.flatMap((p) => p.result.judgment.votes),
      router,
    );

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
    const ranked = await ranking.rankOne('/v1/rank', group, {
      ...requestControls(ctx, request, reply, '/v1/rank', body),
      requestId: body.request_id,
      priority: body.priority,
    });
    return {
      ...rankJson(ranked, body.include_transcripts ?? false),
      ...rankMeta(router.name, usageOf(ranked.played.map((p) => p.result)), body.request_id),
      judge_model: modelOf(ranked.played),
    };
  });

  app.post('/v1/best-of-n', async (request, reply) => {
    const body = parseOr400(schemas.BestOfN, request.body);
    const best = await ranking.bestOfN(
      '/v1/best-of-n',
      {
        candidates: body.candidates,
        shared: {
          question: body.question,
          groundTruth: body.ground_truth ?? null,
          criterion: criterionOf(body),
        },
        method: body.method,
        schedule: body.schedule,
        judges: body.judges,
      },
      {
        ...requestControls(ctx, request, reply, '/v1/best-of-n', body),
        requestId: body.request_id,
        priority: body.priority,
      },
    );
    return {
      ...bestOfNJson(best, { ...body, criterion: criterionOf(body) }, router.name),
      judge_model: modelOf(best.kind === 'tournament' ? best.ranked.played : []),
    };
  });

  app.post('/get_reward/rank', async (request, reply) => {
    const query = parseOr400(schemas.GroupQuery, request.query, 'query string');
    const body = parseOr400(schemas.OpenRlhf, request.body);
    if (body.query.length === 0) return { rewards: [], scores: [], extra_logs: {} };
    const items = body.query.map((q, i) => {
      const prompt = body.prompts?.[i];
      const { groundTruth, question } = labelParts(body.labels[i] ?? '', schemas, ['labels', i]);
      return {
        // The last user turn, as /get_reward and /slime/rank ask (it also decides the grouping).
        question: questionOfQuery(question, q, prompt),
        groundTruth,
        candidate: rolloutOfQuery(q, prompt, i, ctx.config.reasoningFormat),
      };
    });
    const { ranked, out } = await ranking.rankRollouts('/get_reward/rank', items, query, {
      ...requestControls(ctx, request, reply, '/get_reward/rank', {}),
      priority: laneOf(undefined, request.headers[PRIORITY_HEADER]),
    });
    const outcomes = out.map((o) => o.outcome);
    return {
      rewards: outcomes.map((o) => round6(trainerReward(o, failureReward))),
      scores: outcomes.map((o) => round6(trainerScore(o, failureReward))),
      // OpenRLHF logs the mean of each list: same keys for every item, numbers only.
      extra_logs: {
        ...failureLogs(outcomes),
        comparisons_failed: out.map((o) => o.failed),
        wins: out.map((o) => o.wins),
        position_bias_rate: out.map((o) => o.positionBiasRate),
        group_size: out.map((o) => o.groupSize),
        // Why a rollout was a real 0 without calls: the keys /get_reward logs.
        ...rejectionLogs(outcomes),
      },
      prompt_version: COMPARATIVE_PROMPT_VERSION,
      judge_model: modelOf(ranked.flatMap((r) => r.played)),
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
        candidate: withPromptTrace(sample.response, sample.prompt, ctx.config.reasoningFormat),
      };
    });
    const { ranked, out } = await ranking.rankRollouts('/slime/rank', items, query, {
      ...requestControls(ctx, request, reply, '/slime/rank', {}),
      priority: laneOf(undefined, request.headers[PRIORITY_HEADER]),
    });
    return {
      rewards: out.map((o) => round6(trainerReward(o.outcome, failureReward))),
      results: out.map((o) => ({
        reward: round6(trainerReward(o.outcome, failureReward)),
        score: round6(o.score),
        status: statusOf(o.outcome),
        rank: o.rank,
        wins: o.wins,
        losses: o.losses,
        ties: o.ties,
        failed: o.failed,
        judge_failed: o.outcome.kind === 'failed',
        // A rollout that is not an idea: a real 0 without calls (the reason why).
        rejected_input: o.outcome.kind === 'rejected',
        ...(o.outcome.kind === 'rejected' ? { reason: o.outcome.reason } : {}),
      })),
      position_bias: ranked.map((r) => r.standings.positionBias),
      backend: router.name,
      prompt_version: COMPARATIVE_PROMPT_VERSION,
      judge_model: modelOf(ranked.flatMap((r) => r.played)),
    };
  });
}
