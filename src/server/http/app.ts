/**
 * `buildApp(deps)` returns the fastify app with every route; it never listens (tests use `app.inject`,
 * `main.ts` listens). Closing the app starts a graceful shutdown: new requests get 503 RW_SHUTTING_DOWN,
 * in-flight judgments get SHUTDOWN_GRACE_MS to finish, then they are aborted (and answered as failures).
 */
import Fastify, {
  LogController,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type FastifyServerOptions,
} from 'fastify';

import type { Config } from '../../config.js';
import { RewardError } from '../../errors.js';
import type { Router } from '../../judge/types.js';
import { BACKEND_DEFAULTS } from '../../settings/defaults.js';
import { createLocalBudget, createLocalState } from '../../state/local.js';
import type { SharedState } from '../../state/types.js';
import { createLocalCanaryLog, type CanaryLog } from '../../state/canary-log.js';
import { acquireLoopLag, type LoopLag } from '../../judge/loop-lag.js';
import { Admission, callObserver, type Refusal } from '../admission/admission.js';
import { createTokenBudget, type TokenBudget } from '../admission/budget.js';
import { createPlanner, type PlannerLimits } from '../admission/plan.js';
import { registerPlanRoutes } from './routes/plan.js';
import { createComparisonService } from '../serving/comparing.js';
import { configuredModels, presetChoice, type ServerContext } from './context.js';
import { createFailureMonitor } from '../observe/failure-log.js';
import { createIntegrity } from '../integrity/integrity.js';
import { clientErrorResponse, toHttpFailure } from './http-errors.js';
import { createJudgeService } from '../serving/judge-service.js';
import { createMetrics, type Metrics } from '../observe/metrics.js';
import { createSharedJudgments } from '../serving/shared-judgments.js';
import { createCancelRegistry } from '../controls/cancel.js';
import { registerAdapterRoutes } from './routes/adapters.js';
import { registerCancelRoutes } from './routes/cancel.js';
import type { CancelRelay } from '../controls/cancel-relay.js';
import { registerGraphRoutes } from './routes/graphs.js';
import { registerIntegrityRoutes } from './routes/integrity.js';
import { registerOpsRoutes } from './routes/ops.js';
import { registerRankRoutes } from './routes/rank.js';
import { registerRewardRoutes } from './routes/reward.js';
import { createSchemas } from './schemas.js';
import type { TranscriptSink } from '../observe/transcripts.js';
import { createAccess } from '../tenants/access.js';
import { checkScopes } from '../tenants/auth.js';
import type { Keyring } from '../tenants/keyring.js';
import { registerTenantRoutes } from './routes/tenants.js';

export interface AppDeps {
  config: Config;
  router: Router;
  /** Default: a fresh `createMetrics()`. */
  metrics?: Metrics | undefined;
  /** Fastify logger option (default off). Request logging is always off: it is the hot path. */
  logger?: FastifyServerOptions['logger'] | undefined;
  /** Epoch-ms clock for request deadlines (default Date.now). */
  now?: (() => number) | undefined;
  transcripts?: TranscriptSink | undefined;
  /** Shared state (REDIS_URL): cache, single-flight and idempotency across processes. Default: local. */
  state?: SharedState | undefined;
  /** WORKERS>1: the merged /metrics text (asked from the primary). Default: this process's registry. */
  metricsText?: (() => Promise<string>) | undefined;
  /** WORKERS>1: this worker's cluster id, shown in /readyz. */
  workerId?: number | undefined;
  /** WORKERS>1: relays a cancel to every worker through the primary (`cluster.ts`). */
  relayCancel?: CancelRelay | undefined;
  /** REDIS_URL: the canary log shared by every replica (`createRedisCanaryLog`). Default: in-process. */
  canaryLog?: CanaryLog | undefined;
  /** The keys (REWARD_API_KEY, REWARD_KEYS); `main.ts` reloads it on SIGHUP. Default: from the config. */
  keyring?: Keyring | undefined;
  /** Worker processes (WORKERS): without Redis each enforces 1/N of the tenants' budgets and rates. */
  workers?: number | undefined;
}

/** Idempotency records kept (each holds references to its completed judgments). */
const IDEMPOTENCY_MAX_ENTRIES = 65_536;
/**
 * Judgments those records hold beyond the LRU at most: CACHE_SIZE, but never fewer than this (so that
 * CACHE_SIZE=0 still replays retries). Every Python-client POST carries an id, so records follow the
 * request rate; this is what bounds their memory.
 */
const IDEMPOTENCY_MIN_ITEMS = 4096;
/** At most one admission warning per this many ms; the line counts the refusals in between. */
const REFUSAL_LOG_INTERVAL_MS = 10_000;

/** Rate-limits the refusal log line: the first refusal logs, then one line per interval with a count. */
function refusalLogger(
  log: (refusal: Refusal, refused: number) => void,
  now: () => number,
): (refusal: Refusal) => void {
  let last = -Infinity;
  let refused = 0;
  return (refusal) => {
    refused += 1;
    if (now() - last < REFUSAL_LOG_INTERVAL_MS) return;
    last = now();
    log(refusal, refused);
    refused = 0;
  };
}

/** The one rate-limited warning for refused judgments and comparisons alike (they share the admission). */
function admissionRefusalLog(log: FastifyInstance['log'], now: () => number): (refusal: Refusal) => void {
  return refusalLogger((refusal, refused) => {
    const missing = refusal.neededCallsPerS / refusal.drainCallsPerS;
    log.warn(
      {
        reason: refusal.reason,
        refused_requests: refused,
        predicted_wait_s: Math.round(refusal.waitS),
        deadline_horizon_s: Math.round(refusal.horizonS),
        drain_calls_per_s: Math.round(refusal.drainCallsPerS),
        needed_calls_per_s: Number.isFinite(refusal.neededCallsPerS)
          ? Math.round(refusal.neededCallsPerS)
          : null,
        queued_judgments: refusal.waiting,
      },
      refusal.reason === 'memory'
        ? `admission: refusing work, ${refusal.waiting} judgments already queued (MAX_QUEUED_JUDGMENTS)`
        : refusal.reason === 'priority'
          ? 'admission: refusing high-priority work beyond HIGH_PRIORITY_SHARE of the drain rate'
          : `admission: backlog exceeds the deadline (${refusal.completionS.toFixed(0)} s of work, ` +
            `${refusal.horizonS.toFixed(0)} s allowed); judge capacity is missing: ` +
            `${Number.isFinite(missing) ? missing.toFixed(2) : '∞'}× the measured ` +
            `${refusal.drainCallsPerS.toFixed(0)} calls/s would be needed`,
    );
  }, now);
}

function retryAfter(details: unknown): number | undefined {
  if (details === null || typeof details !== 'object') return undefined;
  const value: unknown = Reflect.get(details, 'retry_after_s');
  return typeof value === 'number' ? value : undefined;
}

/**
 * The one way a failure is answered: `{ code, message, details? }`, its status, and Retry-After; counted by
 * its code in `errors`.
 */
function sendFailure(
  errors: Metrics['requestErrors'],
  err: unknown,
  request: FastifyRequest,
  reply: FastifyReply,
): void {
  const failure = toHttpFailure(err);
  errors.labels(request.routeOptions.url ?? 'unmatched', failure.body.code).inc();
  if (failure.body.code === 'RW_CLIENT_ABORTED') {
    // Nobody is listening: one info line, no stack, nothing sent.
    request.log.info(
      { method: request.method, url: request.url.slice(0, 200) },
      'client aborted mid-request',
    );
    return;
  }
  if (failure.internal) request.log.error({ err }, 'internal error');
  const seconds = retryAfter(failure.body.details);
  if (seconds !== undefined) reply.header('retry-after', String(seconds));
  void reply.code(failure.statusCode).send(failure.body);
}

/** The planner's limits: deadline, request cap, the default backend's TPM, canaries beside real work. */
function plannerLimits(config: Config, canaries: PlannerLimits['canaries']): PlannerLimits {
  return {
    requestDeadlineMs: config.requestDeadlineMs,
    maxCandidates: config.maxCandidates,
    tpm: config.judge.default === 'offline' ? undefined : config.judge.default.tpm,
    canaries,
  };
}

/**
 * The server's admission (admission.ts), its gauges set on every change; the fleet's capacity is read from
 * what the default backend's replicas do (admission/capacity.ts), the event loop's lag from `loopLag`.
 */
function createAdmission(
  config: Config,
  router: Router,
  metrics: Metrics,
  now: () => number,
  budget: TokenBudget | undefined,
  loopLag: LoopLag,
): Admission {
  const defaultBackend = router.backends()[0];
  const admission = new Admission({
    maxConcurrent: config.maxConcurrentJudgments,
    maxQueued: config.maxQueuedJudgments,
    callSlots:
      config.judge.default === 'offline' ? BACKEND_DEFAULTS.maxInflight : config.judge.default.max_inflight,
    replicas: () => defaultBackend?.replicas?.() ?? [],
    lagMs: (from, to) => loopLag.maxLagMs(from, to),
    callRateLimit:
      config.judge.default === 'offline' || config.judge.default.rpm === undefined
        ? undefined
        : config.judge.default.rpm / 60,
    now,
    isBackendSaturated: () => router.backends().some((b) => b.isSaturated?.() ?? false),
    onChange: (state) => {
      metrics.inflightJudgments.set(state.running);
      metrics.queueDepth.set(state.waiting);
      metrics.predictedWait.set(state.predictedWaitS);
      metrics.drainRate.set(state.drainCallsPerS);
      metrics.heldRequests.set(state.held);
    },
    highShare: config.highPriorityShare,
    gate: budget === undefined ? undefined : () => budget.gate(),
  });
  metrics.watchCapacity(() => admission.capacity().replicas);
  return admission;
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
  let defaultGraph;
  try {
    defaultGraph = presetChoice(config.defaultGraph);
  } catch (err) {
    throw new Error(`DEFAULT_GRAPH: unknown graph "${config.defaultGraph}"`, { cause: err });
  }

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

  const now = deps.now ?? Date.now;
  // JUDGE_TOKEN_BUDGET (budget.ts): every backend call's tokens count; new work is refused once spent.
  const budget =
    config.tokenBudget === undefined
      ? undefined
      : createTokenBudget({
          ...config.tokenBudget,
          store: state.budget ?? createLocalBudget(now),
          shared: state.kind === 'redis',
          now,
          warn: (fields, message) => app.log.warn(fields, message),
          onRemaining: (left) =>
            metrics.budgetRemainingTokens.labels(String(config.tokenBudget?.windowS)).set(left),
        });
  // Every backend call also feeds the budget and the capacity plan's tokens per call (set below).
  const callHooks: Array<(event: Parameters<Metrics['observeCall']>[0]) => void> = [];
  if (budget !== undefined) callHooks.push((event) => budget.record(event));
  if (config.tokenBudget !== undefined)
    metrics.budgetLimitTokens.labels(String(config.tokenBudget.windowS)).set(config.tokenBudget.tokens);
  const metered: Metrics = {
    ...metrics,
    observeCall: (event) => {
      metrics.observeCall(event);
      for (const hook of callHooks) hook(event);
    },
  };
  const loopLag = acquireLoopLag();
  const admission = createAdmission(config, router, metrics, now, budget, loopLag);
  const planner = createPlanner(
    admission,
    plannerLimits(config, () => integrity.background()),
  );
  callHooks.push((event) => planner.observeCall(event));
  const failures = createFailureMonitor({
    rate: config.failureWarnRate,
    intervalMs: config.failureWarnIntervalMs,
    warn: (fields, message) => app.log.warn(fields, message),
  });
  const onRefusal = admissionRefusalLog(app.log, now);
  // REWARD_API_KEY and REWARD_KEYS: who a key is, what it may do, its budget, rate and fair share.
  const access = createAccess({
    config,
    keyring: deps.keyring,
    state,
    metrics: metrics.tenants,
    ways: deps.workers,
    now,
    warn: (fields, message) => app.log.warn(fields, message),
  });
  // POST /v1/cancel: live requests by id and tag; counts the judgments a cancel aborts (cancel.ts).
  const cancels = createCancelRegistry({
    tombstoneMs: config.requestDeadlineMs,
    onCancelledJudgment: (route) => metrics.cancelledJudgments.labels(route).inc(),
  });
  deps.relayCancel?.serve(cancels);
  let auditGraph;
  try {
    auditGraph =
      config.integrity.auditGraph === undefined ? undefined : presetChoice(config.integrity.auditGraph).graph;
  } catch (err) {
    throw new Error(`AUDIT_GRAPH: unknown graph "${config.integrity.auditGraph ?? ''}"`, { cause: err });
  }
  const integrity = createIntegrity({
    ...config.integrity,
    graph: defaultGraph.graph,
    auditGraph,
    deadlineMs: config.requestDeadlineMs,
    limits: config.candidateLimits,
    reasoningFormat: config.reasoningFormat,
    router,
    observer: callObserver(metered, admission), // canary and audit tokens count against the budget
    metrics: metrics.integrity,
    log: deps.canaryLog ?? createLocalCanaryLog(),
    transcripts: deps.transcripts,
    warn: (fields, message) => app.log.warn(fields, message),
  });
  metrics.integrity.watchDrift(() => integrity.drift());
  const service = createJudgeService({
    onAbandoned: () => cancels.abandoned(),
    router,
    // The service counts every computed judgment here; the failure monitor sees the same ones.
    metrics: {
      ...metered,
      observeJudgment: (graph, judgment) => {
        metrics.observeJudgment(graph, judgment);
        failures.record(judgment);
        planner.observeJudgment(judgment);
      },
    },
    admission,
    cacheSize: config.cacheSize,
    candidateLimits: config.candidateLimits,
    reasoningFormat: config.reasoningFormat,
    transcripts: deps.transcripts,
    onInternalError: (err) => app.log.error({ err }, 'judgment failed unexpectedly'),
    onRefusal,
    now,
    idempotency: {
      windowMs: config.idempotencyWindowMs,
      lingerMs: config.idempotencyLingerMs,
      maxEntries: IDEMPOTENCY_MAX_ENTRIES,
      maxItems: Math.max(config.cacheSize, IDEMPOTENCY_MIN_ITEMS),
    },
    // Shared only with a shared judgment store: a record points at judgments other processes can read.
    sharedRecords: state.judgments === undefined ? undefined : state.idempotency,
    shared: createSharedJudgments(state, {
      ttlMs: config.sharedCacheTtlMs,
      onUndecodable: () => metrics.sharedStateErrors.labels('decode').inc(),
    }),
    onComputed: (item, stored) =>
      integrity.onComputed(item.graph.label, item.graph.graph, item.input, stored.id, stored.judgment),
  });
  const comparisons = createComparisonService({
    onAbandoned: () => cancels.abandoned(),
    router,
    metrics: metered,
    admission,
    cacheSize: config.cacheSize,
    candidateLimits: config.candidateLimits,
    reasoningFormat: config.reasoningFormat,
    transcripts: deps.transcripts,
    onInternalError: (err) => app.log.error({ err }, 'comparison failed unexpectedly'),
    onRefusal,
  });
  const ctx: ServerContext = {
    config,
    router,
    metrics,
    admission,
    service,
    comparisons,
    schemas: createSchemas(config.maxCandidates, config.textLimits),
    defaultGraph,
    inlineGraphs: { ...config.inlineGraphs, models: configuredModels(config) },
    lifecycle: { closing: false },
    now,
    state,
    metricsText: deps.metricsText ?? (() => metrics.registry.metrics()),
    workerId: deps.workerId,
    cancels,
    integrity,
    budget,
    access,
  };

  app.addHook('onRequest', async (request, reply) => {
    const route = request.routeOptions.url;
    if (route === '/healthz') return;
    if (ctx.lifecycle.closing) throw new RewardError('RW_SHUTTING_DOWN', 'server is shutting down');
    // 401 / 403 (scopes) / 429 (the tenant's rpm): tenants/auth.ts.
    await access.auth.authorize(request, reply, route === '/metrics' && config.metricsPublic);
  });

  // While draining, answer and hang up: a kept-alive idle socket would hold the server open past close().
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (ctx.lifecycle.closing) reply.header('connection', 'close');
    done(null, payload);
  });

  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url ?? 'unmatched';
    metrics.requests.labels(route, String(reply.statusCode)).inc();
    metrics.requestDuration.labels(route).observe(reply.elapsedTime / 1000);
    access.count(request, route, reply.statusCode);
    done();
  });

  app.setNotFoundHandler((request) => {
    throw new RewardError('RW_NOT_FOUND', `no route ${request.method} ${request.url.slice(0, 200)}`);
  });

  app.setErrorHandler((err, request, reply) => sendFailure(metrics.requestErrors, err, request, reply));

  let graceTimer: NodeJS.Timeout | undefined;
  app.addHook('preClose', (done) => {
    ctx.lifecycle.closing = true;
    graceTimer = setTimeout(() => {
      app.log.warn('shutdown grace period over: aborting judgments still in flight');
      service.abortAll();
      comparisons.abortAll();
    }, config.shutdownGraceMs);
    graceTimer.unref();
    done();
  });
  // Runs once the server has stopped (every connection ended): anything still in flight has no client left.
  app.addHook('onClose', (_instance, done) => {
    clearTimeout(graceTimer);
    budget?.close();
    access.tenants.close();
    service.abortAll();
    comparisons.abortAll();
    done();
  });

  const scoped = checkScopes(app);
  registerRewardRoutes(app, ctx);
  registerAdapterRoutes(app, ctx);
  registerRankRoutes(app, ctx);
  registerGraphRoutes(app, ctx);
  registerOpsRoutes(app, ctx);
  registerCancelRoutes(app, ctx, deps.relayCancel);
  registerIntegrityRoutes(app, ctx);
  app.addHook('onClose', async () => integrity.close());
  app.addHook('onClose', (_instance, done) => {
    loopLag.release();
    done();
  });
  registerPlanRoutes(app, ctx, planner);
  registerTenantRoutes(app, ctx);
  scoped.end();
  return app;
}
