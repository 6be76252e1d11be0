/** POST /v1/plan: the capacity plan of a step on this server as it stands (plan.ts). */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';

import { resolveGraph, type ServerContext } from '../context.js';
import { flowOf } from '../../admission/fair-shares.js';
import { tenantOf } from '../../tenants/auth.js';
import type { Planner } from '../../admission/plan.js';
import { GraphField, parseOr400 } from '../schemas.js';

export const PlanBody = z.strictObject({
  rollouts: z.number().int().min(1).max(10_000_000),
  group_size: z.number().int().min(1).max(1_000_000),
  graph: GraphField.optional(),
  timeout_s: z.number().positive().max(86_400).optional(),
});

export function registerPlanRoutes(app: FastifyInstance, ctx: ServerContext, planner: Planner): void {
  app.post('/v1/plan', (request) => {
    const body = parseOr400(PlanBody, request.body);
    const choice = resolveGraph(ctx, body.graph);
    // Planned for the caller: at its tenant's fair share, within its own budget and the server's.
    const tenant = tenantOf(request);
    const work = ctx.access.tenants.work(tenant.name);
    const left = [ctx.budget?.remaining(), ctx.access.tenants.budget(tenant.name)?.remaining()];
    const known = left.filter((x) => x !== undefined);
    const plan = planner.plan(
      {
        rollouts: body.rollouts,
        groupSize: body.group_size,
        graph: choice.graph,
        timeoutS: body.timeout_s,
        tenant: work,
      },
      known.length === 0 ? undefined : Math.min(...known),
    );
    const share = ctx.admission.fair.shareOf(flowOf(work));
    return {
      ...plan,
      tenant: { name: tenant.name, weight: tenant.weight, share: Math.round(share * 1000) / 1000 },
    };
  });
}
