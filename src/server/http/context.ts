/** What every route needs, built once by `buildApp`. */
import type { FastifyReply, FastifyRequest } from 'fastify';

import type { Config } from '../../config.js';
import { RewardError } from '../../errors.js';
import { assertInlineAllowed, checkInlineGraph, type InlineGraphPolicy } from '../../judge/graph-limits.js';
import { compileSpec, getPreset, PRESETS } from '../../judge/presets.js';
import type { Router } from '../../judge/types.js';
import type { SharedState } from '../../state/types.js';
import type { Admission } from '../admission/admission.js';
import type { CancelRegistry } from '../controls/cancel.js';
import type { GroupKeyParts, GroupMeans } from '../serving/group-means.js';
import type { TokenBudget } from '../admission/budget.js';
import type { ComparisonService } from '../serving/comparing.js';
import type { Integrity } from '../integrity/integrity-types.js';
import type { GraphChoice, JudgeService } from '../serving/judge-types.js';
import type { Metrics } from '../observe/metric-types.js';
import type { Schemas } from './schemas.js';
import type { Access } from '../tenants/access.js';
import { tenantOf } from '../tenants/auth.js';

export interface ServerContext {
  config: Config;
  router: Router;
  metrics: Metrics;
  admission: Admission;
  service: JudgeService;
  comparisons: ComparisonService;
  schemas: Schemas;
  defaultGraph: GraphChoice;
  /** What an inline graph spec in a body may do (ALLOW_INLINE_GRAPHS, INLINE_*). */
  inlineGraphs: InlineGraphPolicy;
  /** Set when shutdown starts: new requests get 503 RW_SHUTTING_DOWN, /readyz turns 503. */
  lifecycle: { closing: boolean };
  now(): number;
  /** Local, or Redis-backed (REDIS_URL); its status is in /readyz. */
  state: SharedState;
  /** The /metrics text: this process's registry, or the merged one under WORKERS>1. */
  metricsText(): Promise<string>;
  workerId: number | undefined;
  /** Live requests by request_id and tag, for POST /v1/cancel (`cancel.ts`). */
  cancels: CancelRegistry;
  /** Canaries, quarantine, audits and drift (`GET /v1/integrity`). */
  integrity: Integrity;
  /** JUDGE_TOKEN_BUDGET; undefined without a budget. */
  budget?: TokenBudget | undefined;
  /** The tenants (REWARD_API_KEY, REWARD_KEYS): keys, scopes, budgets, rates, fair-queue flows. */
  access: Access;
  /**
   * Judged rewards per rollout group from every route (`/v1/reward`, `/v1/reward/batch`, `/verify`): a failed
   * rollout's group value (`/v1/reward/group-mean`, `/verify`'s masked number).
   */
  groupMeans: GroupMeans;
}

/**
 * The group a request's items belong to: its tenant's rollouts of one prompt under one committee. Every
 * route that records or reads a group's judged mean (`/v1/reward`, `/v1/reward/batch`,
 * `/v1/reward/group-mean`, `/verify`) keys it here, so that they all meet in the same group.
 */
export function groupOf(
  request: FastifyRequest,
  choice: GraphChoice,
  input: { question: string; groundTruth: string },
): GroupKeyParts {
  return { tenant: tenantOf(request).name, graphHash: choice.graph.hash, ...input };
}

/** Metrics label of an inline spec: never a user-chosen string. */
export const CUSTOM_GRAPH_LABEL = 'custom';

/**
 * A preset by name (404 RW_UNKNOWN_GRAPH otherwise) or an inline spec (403 RW_GRAPH_NOT_ALLOWED unless the
 * operator allows inline graphs and it is within their limits; 400 RW_INVALID_GRAPH when invalid).
 * Undefined → the configured default.
 */
export function resolveGraph(
  ctx: Pick<ServerContext, 'defaultGraph' | 'inlineGraphs'>,
  field: string | Record<string, unknown> | undefined,
): GraphChoice {
  if (field === undefined) return ctx.defaultGraph;
  if (typeof field === 'string') return presetChoice(field);
  assertInlineAllowed(ctx.inlineGraphs);
  let graph;
  try {
    graph = compileSpec(field);
  } catch (err) {
    if (err instanceof RewardError) throw err;
    throw new RewardError(
      'RW_INVALID_GRAPH',
      `invalid graph spec: ${err instanceof Error ? err.message : 'unknown'}`,
    );
  }
  checkInlineGraph(graph, ctx.inlineGraphs);
  return { graph, label: CUSTOM_GRAPH_LABEL };
}

/** The model names an inline graph may pick: the environment's and the routing file's. */
export function configuredModels(config: Config): Set<string> {
  const models = new Set<string>();
  if (config.judge.default !== 'offline') models.add(config.judge.default.model);
  const file = config.judge.file;
  if (file !== undefined) {
    for (const backend of Object.values(file.backends)) models.add(backend.model);
    for (const route of [...Object.values(file.roles), ...Object.values(file.nodes)])
      if (route.model !== undefined) models.add(route.model);
  }
  return models;
}

export function presetChoice(name: string): GraphChoice {
  const graph = getPreset(name);
  if (graph === undefined) {
    throw new RewardError('RW_UNKNOWN_GRAPH', `unknown graph "${name.slice(0, 64)}"`, {
      details: { available: [...PRESETS.keys()] },
    });
  }
  return { graph, label: graph.name };
}

/**
 * The request's deadline and a signal that aborts when the client goes away before the reply is sent
 * (its share of the judgments is then released; flights shared with other requests keep running).
 */
export function requestScope(
  ctx: ServerContext,
  reply: FastifyReply,
): { signal: AbortSignal; deadline: number } {
  const controller = new AbortController();
  const res = reply.raw;
  res.once('close', () => {
    if (!res.writableFinished) controller.abort(new DOMException('client disconnected', 'AbortError'));
  });
  return { signal: controller.signal, deadline: ctx.now() + ctx.config.requestDeadlineMs };
}

const MAX_ID_CHARS = 200;

/**
 * The idempotency id of a request, scoped by tenant and route: the body's own id (`request_id`,
 * `rollout_id`, the NeMo-Gym rollout index) when it has one, else the `Idempotency-Key` header; undefined
 * without either. The tenant's name is part of it (and so of the shared record in Redis): a request id
 * replays only to the tenant that sent it.
 */
export function idempotencyKey(
  route: string,
  request: FastifyRequest,
  bodyId: string | number | undefined,
): string | undefined {
  const tenant = tenantOf(request).name;
  if (bodyId !== undefined) return `${tenant}\u0000${route}\u0000${String(bodyId)}`;
  const header = request.headers['idempotency-key'];
  if (typeof header !== 'string' || header === '' || header.length > MAX_ID_CHARS) return undefined;
  return `${tenant}\u0000${route}\u0000${header}`;
}
