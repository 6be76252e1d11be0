/**
 * POST /v1/cancel {"request_ids": [...]} | {"tag": "..."} → {"cancelled_judgments", "cancelled_requests"}:
 * aborts the judgments only the selected requests wait for (`cancel.ts`). Under WORKERS>1 the cancel is
 * relayed through the cluster primary to every worker and the counts are summed; across replicas (several
 * pods) it reaches only the replica it lands on.
 */
import type { FastifyInstance } from 'fastify';

import type { CancelRelay } from '../controls/cancel-relay.js';
import type { CancelSelector } from '../controls/cancel.js';
import type { ServerContext } from '../context.js';
import { CancelBody } from '../controls/fields.js';
import { parseOr400 } from '../schemas.js';

export function registerCancelRoutes(
  app: FastifyInstance,
  ctx: ServerContext,
  relay: CancelRelay | undefined,
): void {
  app.post('/v1/cancel', async (request) => {
    const body = parseOr400(CancelBody, request.body);
    const selector: CancelSelector = 'tag' in body ? { tag: body.tag } : { requestIds: body.request_ids };
    const here = ctx.cancels.cancel(selector);
    let judgments = here.judgments;
    let requests = here.requests;
    let workers = 1;
    if (relay !== undefined) {
      const elsewhere = await relay.relay(selector);
      judgments += elsewhere.judgments;
      requests += elsewhere.requests;
      workers += elsewhere.workers;
    }
    return {
      cancelled_judgments: judgments,
      cancelled_requests: requests,
      ...(relay === undefined ? {} : { workers }),
    };
  });
}
