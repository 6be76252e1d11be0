/**
 * POST /v1/reward (one group), /v1/reward/batch (many groups, one admission decision), /v1/judge, and
 * /v1/reward/group-mean (a group's judged mean across every request: what a streamed rollout whose judgment
 * failed scores, src/server/serving/group-means.ts).
 */
import type { FastifyInstance } from 'fastify';

import { groupOf, idempotencyKey, resolveGraph, type ServerContext } from '../context.js';
import { requestControls } from '../request-controls.js';
import { groupResponse, toResult, usageOf } from '../../serving/results.js';
import { parseOr400 } from '../schemas.js';
import { stampsOf } from '../../controls/stamps.js';
import { judgeInFlight, recordJudged } from '../../serving/group-means.js';
import type { JudgeItem } from '../../serving/judge-types.js';

/** `items` (a batch's, in group order) cut into consecutive runs of `sizes[i]` items: one run per group. */
function bySizes<T>(items: readonly T[], sizes: readonly number[]): T[][] {
  let start = 0;
  return sizes.map((size) => {
    const run = items.slice(start, start + size);
    start += size;
    return run;
  });
}

export function registerRewardRoutes(app: FastifyInstance, ctx: ServerContext): void {
  const { schemas, service, router } = ctx;
  const { groupMeans } = ctx;

  app.post('/v1/reward', async (request, reply) => {
    const body = parseOr400(schemas.Group, request.body);
    const choice = resolveGraph(ctx, body.graph);
    const input = { question: body.question, groundTruth: body.ground_truth };
    const items: JudgeItem[] = body.candidates.map((candidate) => ({
      graph: choice,
      input: { ...input, candidate },
    }));
    const scope = requestControls(ctx, request, reply, '/v1/reward', body);
    const parts = groupOf(request, choice, input);
    const judged = await judgeInFlight(
      groupMeans,
      [{ parts, count: items.length }],
      () =>
        service.judge({
          items,
          ...scope,
          requestId: body.request_id,
          idempotencyKey: idempotencyKey('reward', request, body.request_id),
          priority: body.priority,
        }),
      (done) => recordJudged(groupMeans, parts, done),
    );
    return {
      ...groupResponse(judged, choice.graph, router.name, body.include_transcripts ?? false, body.request_id),
      ...stampsOf(
        judged.map((j) => j.judgment),
        choice.graph,
        router,
      ),
    };
  });

  app.post('/v1/reward/batch', async (request, reply) => {
    const body = parseOr400(schemas.Batch, request.body);
    const topGraph = body.graph;
    const groups = body.groups.map((g) => ({ group: g, choice: resolveGraph(ctx, g.graph ?? topGraph) }));
    const items: JudgeItem[] = [];
    for (const { group, choice } of groups) {
      for (const candidate of group.candidates) {
        items.push({
          graph: choice,
          input: { question: group.question, groundTruth: group.ground_truth, candidate },
        });
      }
    }
    const scope = requestControls(ctx, request, reply, '/v1/reward/batch', body);
    const parts = groups.map(({ group, choice }) =>
      groupOf(request, choice, { question: group.question, groundTruth: group.ground_truth }),
    );
    const sizes = groups.map(({ group }) => group.candidates.length);
    const judged = await judgeInFlight(
      groupMeans,
      sizes.map((count, i) => ({ parts: parts[i]!, count })),
      () =>
        service.judge({
          items,
          ...scope,
          requestId: body.request_id,
          idempotencyKey: idempotencyKey('batch', request, body.request_id),
          priority: body.priority,
        }),
      (done) => bySizes(done, sizes).forEach((slice, i) => recordJudged(groupMeans, parts[i]!, slice)),
    );
    const slices = bySizes(judged, sizes);
    const out = groups.map(({ group, choice }, i) => {
      const slice = slices[i]!;
      return {
        ...groupResponse(
          slice,
          choice.graph,
          router.name,
          body.include_transcripts ?? false,
          group.request_id,
        ),
        ...stampsOf(
          slice.map((j) => j.judgment),
          choice.graph,
          router,
        ),
      };
    });
    const models = new Set<string>();
    for (const g of out) for (const m of [g.judge_model].flat()) if (m !== null) models.add(m);
    return {
      judge_model: models.size === 1 ? [...models][0] : models.size === 0 ? null : [...models],
      prompt_version: out[0]?.prompt_version,
      groups: out,
      backend: router.name,
      usage: usageOf(judged),
      ...(body.request_id === undefined ? {} : { request_id: body.request_id }),
      // What the trainer adapters answer for a failed judgment, for clients that adapt a batch themselves.
      ...(ctx.config.failureReward === undefined ? {} : { failure_reward: ctx.config.failureReward }),
    };
  });

  app.post('/v1/reward/group-mean', async (request) => {
    const body = parseOr400(schemas.GroupMeanQuery, request.body);
    const choice = resolveGraph(ctx, body.graph);
    const parts = groupOf(request, choice, { question: body.question, groundTruth: body.ground_truth });
    // `wait_ms`: until the group's judgments in flight are recorded (a failure's value is then the mean of
    // every sibling the server had received, not of those that happened to finish first).
    await groupMeans.settled(parts, body.wait_ms);
    return {
      ...groupMeans.mean(parts),
      graph: { name: choice.graph.name, hash: choice.graph.hash },
    };
  });

  app.post('/v1/judge', async (request, reply) => {
    const body = parseOr400(schemas.Judge, request.body);
    const choice = resolveGraph(ctx, body.graph);
    const scope = requestControls(ctx, request, reply, '/v1/judge', body);
    const judged = await service.judgeOne(
      {
        graph: choice,
        input: { question: body.question, groundTruth: body.ground_truth, candidate: body.candidate },
      },
      {
        ...scope,
        requestId: body.request_id,
        idempotencyKey: idempotencyKey('judge', request, body.request_id),
        priority: body.priority,
      },
    );
    return {
      ...toResult(judged, true),
      graph: { name: choice.graph.name, hash: choice.graph.hash },
      // judge_model, prompt_version (the judgment's own) and graph_hash.
      ...stampsOf([judged.judgment], choice.graph, router),
      backend: router.name,
      usage: usageOf([judged]),
      ...(body.request_id === undefined ? {} : { request_id: body.request_id }),
    };
  });
}
