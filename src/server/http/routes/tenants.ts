/**
 * GET /v1/tenants (scope `admin`): every tenant of the keys (REWARD_API_KEY, REWARD_KEYS) with its scopes,
 * weight and guaranteed fraction, lane cap, rate and token budget, and how much of the server it holds and
 * waits for now (run slots, admitted backlog). Never a key or a hash.
 */
import type { FastifyInstance } from 'fastify';

import type { ServerContext } from '../context.js';

export function registerTenantRoutes(app: FastifyInstance, ctx: ServerContext): void {
  const { access, admission, config } = ctx;
  app.get('/v1/tenants', () => {
    const slots = new Map(admission.runSlotFlows().map((f) => [f.name, f]));
    return {
      fair_queuing: config.fairQueuing,
      cache_scope: config.cacheScope,
      tenants: access.tenants.status().map((t) => {
        const flow = access.tenants.work(t.name).flow;
        const name = flow?.name ?? '';
        return {
          ...t,
          running: slots.get(name)?.held ?? 0,
          queued: slots.get(name)?.waiting ?? 0,
          backlog_calls: Math.round(flow === undefined ? 0 : admission.fair.backlogOf(flow)),
        };
      }),
    };
  });
}
