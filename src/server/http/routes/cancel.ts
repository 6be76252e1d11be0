/**
 * POST /v1/cancel {"request_ids": [...]} | {"tag": "..."} → {"cancelled_judgments", "cancelled_requests"}:
 * aborts the judgments only the selected requests wait for (`cancel.ts`). Under WORKERS>1 the cancel is
 * relayed through the cluster primary to every worker and the counts are summed (`workers`). With REDIS_URL
 * it is also published to every process sharing that Redis (`state/redis-cancels.ts`): their counts are
 * summed too (`processes`), and `shared: false` says Redis was unreachable (the cancel stayed local).
 *
 * A cancel selects its own tenant's requests only (REWARD_KEYS: tags and ids are per tenant), everywhere it
 * travels; a key with the `admin` scope may name another tenant (`tenant`).
 */
import type { FastifyInstance } from 'fastify';

import type { CancelRelay } from '../../controls/cancel-relay.js';
import type { CancelSelector } from '../../controls/cancel.js';
import type { ServerContext } from '../context.js';
import { RewardError } from '../../../errors.js';
import { tenantOf } from '../../tenants/auth.js';
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
    const caller = tenantOf(request);
    if (body.tenant !== undefined && body.tenant !== caller.name && !caller.scopes.has('admin'))
      throw new RewardError('RW_FORBIDDEN', `cancelling another tenant's work needs the scope "admin"`, {
        details: { scope: 'admin', tenant: caller.name },
      });
    const tenant = body.tenant ?? caller.name;
    const selector: CancelSelector =
      'tag' in body ? { tag: body.tag, tenant } : { requestIds: body.request_ids, tenant };
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
      // Named when an admin cancelled another tenant's work.
      ...(body.tenant === undefined ? {} : { tenant }),
      cancelled_judgments: judgments,
      cancelled_requests: requests,
      ...(relay === undefined ? {} : { workers }),
      ...(broadcast === undefined ? {} : { processes: 1 + broadcast.processes, shared: broadcast.shared }),
    };
  });
}
