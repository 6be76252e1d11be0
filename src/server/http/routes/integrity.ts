/**
 * GET /v1/integrity: the canary record per replica and per committee member (counts, accuracy with its exact
 * 95 % interval, TPR/TNR, state ok / watching / quarantined, suspect judgments), the fleet alert, audit
 * agreement and the drift gauges (docs/integrity.md).
 */
import type { FastifyInstance } from 'fastify';

import type { ServerContext } from '../context.js';

export function registerIntegrityRoutes(app: FastifyInstance, ctx: ServerContext): void {
  app.get('/v1/integrity', () => ctx.integrity.report());
}
