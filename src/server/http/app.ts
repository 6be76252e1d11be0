/**
 * `buildApp(deps)` returns the fastify app with every route; it never listens (tests use `app.inject`,
 * `main.ts` listens). Closing the app starts a graceful shutdown: new requests get 503 RW_SHUTTING_DOWN,
 * in-flight judgments get SHUTDOWN_GRACE_MS to finish, then they are aborted (and answered as failures).
 * What it builds is in app-services.ts, the hooks it registers before the routes in app-hooks.ts; the
 * order of hooks and routes is set here.
 */
import Fastify, { LogController, type FastifyInstance, type FastifyServerOptions } from 'fastify';

import { createLocalState } from '../../state/local.js';
import type { SharedState } from '../../state/types.js';
import { registerPlanRoutes } from './routes/plan.js';
import { registerAppHooks, sendFailure } from './app-hooks.js';
import { configuredGraph, createAppServices, type ServiceDeps } from './app-services.js';
import { clientErrorResponse } from './http-errors.js';
import { createMetrics } from '../observe/metrics.js';
import type { Metrics } from '../observe/metric-types.js';
import { registerAdapterRoutes } from './routes/adapters.js';
import { registerCancelRoutes } from './routes/cancel.js';
import { registerGraphRoutes } from './routes/graphs.js';
import { registerIntegrityRoutes } from './routes/integrity.js';
import { registerOpsRoutes } from './routes/ops.js';
import { registerRankRoutes } from './routes/rank.js';
import { registerRewardRoutes } from './routes/reward.js';
import { checkScopes } from '../tenants/auth.js';
import { registerTenantRoutes } from './routes/tenants.js';

/** What `buildApp` takes: the config and router, and the deps of its services (`ServiceDeps`). */
export interface AppDeps extends ServiceDeps {
  /** Default: a fresh `createMetrics()`. */
  metrics?: Metrics | undefined;
  /** Fastify logger option (default off). Request logging is always off: it is the hot path. */
  logger?: FastifyServerOptions['logger'] | undefined;
  /** Shared state (REDIS_URL): cache, single-flight and idempotency across processes. Default: local. */
  state?: SharedState | undefined;
}

/** A quarter of REQUEST_TIMEOUT_MS, within [50 ms, 1 s]: a partial body is cut ≤ 1 s after its timeout. */
function checkingIntervalMs(requestTimeoutMs: number): number {
  if (requestTimeoutMs === 0) return 30_000;
  return Math.min(1000, Math.max(50, Math.round(requestTimeoutMs / 4)));
}

export function buildApp(deps: AppDeps): FastifyInstance {
  const { config, router } = deps;
  const metrics = deps.metrics ?? createMetrics({ recentWindow: config.recentWindow });
  metrics.watchBackends(() => router.backends());
  metrics.requestDeadline.set(config.requestDeadlineMs / 1000);
  const state = deps.state ?? createLocalState();
  const defaultGraph = configuredGraph('DEFAULT_GRAPH', config.defaultGraph);

  const app = Fastify({
    logger: deps.logger ?? false,
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: config.bodyLimitBytes,
    // A slow or stalled client cannot hold a partial body (and its buffer) for longer than this.
    requestTimeout: config.requestTimeoutMs,
    // Node reads these when the server is created (setting them later has no effect on Node 20) and
    // checks them on an interval (default 30 s): check often enough to honour the timeout.
    http: {
      requestTimeout: config.requestTimeoutMs,
      headersTimeout: config.requestTimeoutMs === 0 ? 60_000 : Math.min(60_000, config.requestTimeoutMs),
      connectionsCheckingInterval: checkingIntervalMs(config.requestTimeoutMs),
    },
    return503OnClosing: false,
    // Errors Fastify answers before routing (bad URL, over-long parameter: 414) go out in our shape too.
    frameworkErrors: (err, request, reply) => sendFailure(metrics.requestErrors, err, request, reply),
    // Requests Node's HTTP parser rejects (431 oversized headers, 408 request timeout, 400 malformed).
    clientErrorHandler: (err, socket) => {
      const response = clientErrorResponse(err);
      if (response === undefined || socket.destroyed) return;
      if (socket.writable) socket.end(response);
      else socket.destroy(err);
    },
  });

  const { ctx, planner, loopLag } = createAppServices(deps, app, metrics, state, defaultGraph);
  registerAppHooks(app, ctx);

  const scoped = checkScopes(app);
  registerRewardRoutes(app, ctx);
  registerAdapterRoutes(app, ctx);
  registerRankRoutes(app, ctx);
  registerGraphRoutes(app, ctx);
  registerOpsRoutes(app, ctx);
  registerCancelRoutes(app, ctx, deps.relayCancel);
  registerIntegrityRoutes(app, ctx);
  app.addHook('onClose', async () => ctx.integrity.close());
  app.addHook('onClose', (_instance, done) => {
    loopLag.release();
    done();
  });
  registerPlanRoutes(app, ctx, planner);
  registerTenantRoutes(app, ctx);
  scoped.end();
  return app;
}
