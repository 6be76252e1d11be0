/**
 * POST /v1/cancel {"request_ids": [...]} | {"tag": "..."} → {"cancelled_judgments", "cancelled_requests"}:
 * aborts the judgments only the selected requests wait for (`cancel.ts`). Under WORKERS>1 the cancel is
 * relayed through the cluster primary to every worker and the counts are summed (`workers`). With REDIS_URL
 * it is also published to every process sharing that Redis (`state/redis-cancels.ts`): their counts are
 * summed too (`processes`), and `shared: false` says Redis was unreachable (the cancel stayed local).
 */
import type { FastifyInstance } from 'fastify';

import type { CancelRelay } from '../../controls/cancel-relay.js';
import type { CancelSelector } from '../../controls/cancel.js';
import type { ServerContext } from '../context.js';
import { CancelBody } from '../../controls/fields.js';
import { parseOr400 } from '../schemas.js';

export function registerCancelRoutes(
  app: FastifyInstance,
  ctx: ServerContext,
  relay: CancelRelay | undefined,
): void {
  // Cancels other processes publish apply here, for the tombstone time they still have.
  const bus = ctx.state.kind === 'redis' ? ctx.state.cancels : undefined;
  bus?.serve((selector, tombstoneMs) => ctx.cancels.cancel(selector, { tombstoneMs }));

  app.post('/v1/cancel', async (request) => {
    const body = parseOr400(CancelBody, request.body);
    const selector: CancelSelector = 'tag' in body ? { tag: body.tag } : { requestIds: body.request_ids };
    const here = ctx.cancels.cancel(selector);
    let judgments = here.judgments;
    let requests = here.requests;
    let workers = 1;
    const [elsewhere, broadcast] = await Promise.all([
      relay?.relay(selector),
      bus?.publish(selector, ctx.config.requestDeadlineMs),
    ]);
    if (elsewhere !== undefined) {
      judgments += elsewhere.judgments;
      requests += elsewhere.requests;
      workers += elsewhere.workers;
    }
    if (broadcast !== undefined) {
      judgments += broadcast.judgments;
      requests += broadcast.requests;
    }
    return {
      cancelled_judgments: judgments,
      cancelled_requests: requests,
      ...(relay === undefined ? {} : { workers }),
      ...(broadcast === undefined ? {} : { processes: 1 + broadcast.processes, shared: broadcast.shared }),
    };
  });
}
