/**
 * A request's operator controls (issue 21), read once per route: its deadline (the client's `deadline_ms`
 * or `x-reward-deadline-ms`, capped by REQUEST_DEADLINE_MS) and its registration with the cancel registry
 * (`request_id`, `tag` or `x-reward-tag`), on top of the disconnect signal of `requestScope`.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';

import { RewardError } from '../../errors.js';
import { requestScope, type ServerContext } from './context.js';
import { DEADLINE_HEADER, DeadlineMs, MAX_TAG_CHARS, TAG_HEADER } from '../controls/fields.js';
import type { TenantWork } from '../admission/fair-shares.js';
import { tenantOf } from '../tenants/auth.js';

/**
 * What a client deadline keeps in hand, ms: the engine answers `timeout` at the deadline, the request's
 * scope stops waiting `DEADLINE_SLACK_MS` (50 ms) after it, and the answer still has to be serialised and
 * cross the wire before the client's own timer fires.
 */
export const CLIENT_DEADLINE_MARGIN_MS = 150;

export interface Controls {
  /** Absolute deadline, epoch ms: the smaller of the server's and the client's. */
  deadline: number;
  /** Aborts when the client goes away. */
  signal: AbortSignal;
  /** Aborts when POST /v1/cancel selects this request (a cancel of its own tenant). */
  cancel: AbortSignal;
  /** Its tenant's fair-queue flow, lane cap, budget, spend and cache scope (REWARD_KEYS). */
  tenant: TenantWork;
}

function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return typeof value === 'string' ? value : undefined;
}

/** The client's deadline in ms: the body field, else the header; undefined without either. */
export function clientDeadlineMs(request: FastifyRequest, bodyMs: number | undefined): number | undefined {
  if (bodyMs !== undefined) return bodyMs;
  const raw = header(request, DEADLINE_HEADER);
  if (raw === undefined) return undefined;
  const parsed = DeadlineMs.safeParse(/^\d{1,9}$/.test(raw.trim()) ? Number(raw.trim()) : Number.NaN);
  if (!parsed.success) {
    throw new RewardError(
      'RW_BAD_REQUEST',
      `invalid ${DEADLINE_HEADER}: a positive integer number of milliseconds (at most 86400000)`,
      { details: [{ path: `headers.${DEADLINE_HEADER}`, message: 'must be a positive integer (ms)' }] },
    );
  }
  return parsed.data;
}

/** The request's tag: the body field, else the header. */
export function requestTag(request: FastifyRequest, bodyTag: string | undefined): string | undefined {
  if (bodyTag !== undefined) return bodyTag;
  const raw = header(request, TAG_HEADER);
  if (raw === undefined || raw === '') return undefined;
  if (raw.length > MAX_TAG_CHARS) {
    throw new RewardError('RW_BAD_REQUEST', `invalid ${TAG_HEADER}: at most ${MAX_TAG_CHARS} characters`, {
      details: [{ path: `headers.${TAG_HEADER}`, message: `at most ${MAX_TAG_CHARS} characters` }],
    });
  }
  return raw;
}

/**
 * The deadline (absolute, epoch ms) for a request that arrived at `now`: REQUEST_DEADLINE_MS, or the
 * client's own `deadlineMs` less `CLIENT_DEADLINE_MARGIN_MS` (half of it for a deadline under twice the
 * margin) when that is sooner, so that the answer reaches the client before its deadline expires.
 */
export function effectiveDeadline(now: number, serverMs: number, deadlineMs: number | undefined): number {
  if (deadlineMs === undefined || deadlineMs >= serverMs) return now + serverMs;
  const margin = Math.min(CLIENT_DEADLINE_MARGIN_MS, Math.floor(deadlineMs / 2));
  return now + deadlineMs - margin;
}

/**
 * The scope of one request with its controls. `route` labels `reward_cancelled_judgments_total`; the
 * request leaves the cancel registry once its connection closes (answered or not).
 */
export function requestControls(
  ctx: ServerContext,
  request: FastifyRequest,
  reply: FastifyReply,
  route: string,
  body: { deadline_ms?: number | undefined; tag?: string | undefined; request_id?: string | undefined },
): Controls {
  const deadlineMs = clientDeadlineMs(request, body.deadline_ms);
  const tag = requestTag(request, body.tag);
  const scope = requestScope(ctx, reply);
  const tenant = tenantOf(request).name;
  const live = ctx.cancels.enter(route, { requestId: body.request_id, tag, tenant });
  reply.raw.once('close', () => live.leave());
  return {
    signal: scope.signal,
    deadline: effectiveDeadline(ctx.now(), ctx.config.requestDeadlineMs, deadlineMs),
    cancel: live.signal,
    tenant: ctx.access.tenants.work(tenant),
  };
}
