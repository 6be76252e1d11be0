/**
 * What `buildApp` (app.ts) serves with, built from its deps in the order app.ts always built them: the call
 * metering and JUDGE_TOKEN_BUDGET, the admission and its capacity planner, the failure monitor, the tenants'
 * access, the cancel registry, the integrity checks, then the judgment and comparison services, gathered
 * into the routes' `ServerContext`. The hooks are in app-hooks.ts; app.ts registers them and the routes.
 */
import type { FastifyInstance } from 'fastify';

import type { Config } from '../../config.js';
import type { Router } from '../../judge/types.js';
import { BACKEND_DEFAULTS } from '../../settings/defaults.js';
import { createLocalBudget } from '../../state/local.js';
import type { SharedState } from '../../state/types.js';
import { createLocalCanaryLog, type CanaryLog } from '../../state/canary-log.js';
import { acquireLoopLag, type LoopLag } from '../../judge/loop-lag.js';
import { Admission, callObserver, type Refusal } from '../admission/admission.js';
import { createTokenBudget, type TokenBudget } from '../admission/budget.js';
import { createPlanner, type Planner, type PlannerLimits } from '../admission/plan.js';
import { createComparisonService, type ComparisonService } from '../serving/comparing.js';
import { configuredModels, presetChoice, type ServerContext } from './context.js';
import { createFailureMonitor, type FailureMonitor } from '../observe/failure-log.js';
import { createIntegrity } from '../integrity/integrity.js';
import type { Integrity } from '../integrity/integrity-types.js';
import { createGroupMeans } from '../serving/group-means.js';
import { createJudgeService } from '../serving/judge-service.js';
import type { GraphChoice, JudgeService } from '../serving/judge-types.js';
import type { Metrics } from '../observe/metric-types.js';
import { createSharedJudgments } from '../serving/shared-judgments.js';
import { createCancelRegistry, type CancelRegistry } from '../controls/cancel.js';
import type { CancelRelay } from '../controls/cancel-relay.js';
import { createSchemas } from './schemas.js';
import type { TranscriptSink } from '../observe/transcripts.js';
import { createAccess } from '../tenants/access.js';
import type { Keyring } from '../tenants/keyring.js';

/** The deps of `buildApp` (`AppDeps` extends it) that the services take. */
export interface ServiceDeps {
  config: Config;
  router: Router;
  /** Epoch-ms clock for request deadlines (default Date.now). */
  now?: (() => number) | undefined;
  transcripts?: TranscriptSink | undefined;
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

export interface AppServices {
  /** What every route needs. */
  ctx: ServerContext;
  /** The capacity plan (GET /v1/plan, routes/plan.ts); fed every call and judgment. */
  planner: Planner;
  /** The event loop's lag monitor, acquired here: app.ts releases it when the app closes. */
  loopLag: LoopLag;
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

/** A preset graph named by a setting (`variable`, e.g. DEFAULT_GRAPH); an unknown name fails start-up. */
export function configuredGraph(variable: string, name: string): GraphChoice {
  try {
    return presetChoice(name);
  } catch (err) {
    throw new Error(`${variable}: unknown graph "${name}"`, { cause: err });
  }
}

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

type CallHook = (event: Parameters<Metrics['observeCall']>[0]) => void;

interface MeteredCalls {
  /** JUDGE_TOKEN_BUDGET, if set. */
  budget: TokenBudget | undefined;
  /** `metrics` whose `observeCall` also runs every hook of `callHooks`. */
  metered: Metrics;
  /** What else sees every backend call: the budget (here) and the capacity plan (pushed by the caller). */
  callHooks: CallHook[];
}

/** JUDGE_TOKEN_BUDGET (budget.ts) and the metrics every backend call is observed through. */
function meterCalls(
  config: Config,
  metrics: Metrics,
  state: SharedState,
  now: () => number,
  app: FastifyInstance,
): MeteredCalls {
  // Every backend call's tokens count; new work is refused once spent.
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
  // Every backend call also feeds the budget and the capacity plan's tokens per call (pushed by the caller).
  const callHooks: CallHook[] = [];
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
  return { budget, metered, callHooks };
}

/** Canaries, audits and drift (integrity.ts) on the default graph; their calls metered like real work. */
function createAppIntegrity(
  deps: ServiceDeps,
  defaultGraph: GraphChoice,
  metrics: Metrics,
  metered: Metrics,
  admission: Admission,
  app: FastifyInstance,
): Integrity {
  const { config } = deps;
  const auditGraph =
    config.integrity.auditGraph === undefined
      ? undefined
      : configuredGraph('AUDIT_GRAPH', config.integrity.auditGraph).graph;
  const integrity = createIntegrity({
    ...config.integrity,
    graph: defaultGraph.graph,
    auditGraph,
    deadlineMs: config.requestDeadlineMs,
    limits: config.candidateLimits,
    reasoningFormat: config.reasoningFormat,
    router: deps.router,
    observer: callObserver(metered, admission), // canary and audit tokens count against the budget
    metrics: metrics.integrity,
    log: deps.canaryLog ?? createLocalCanaryLog(),
    transcripts: deps.transcripts,
    warn: (fields, message) => app.log.warn(fields, message),
  });
  metrics.integrity.watchDrift(() => integrity.drift());
  return integrity;
}

/** What the judgment and comparison services are built on, besides the deps. */
interface ServingParts {
  metrics: Metrics;
  metered: Metrics;
  state: SharedState;
  now: () => number;
  admission: Admission;
  planner: Planner;
  failures: FailureMonitor;
  cancels: CancelRegistry;
  integrity: Integrity;
  onRefusal: (refusal: Refusal) => void;
}

/** The judgment service (POST /v1/reward and its adapters) and the comparison service (pairs, ranks). */
function createServing(
  deps: ServiceDeps,
  app: FastifyInstance,
  parts: ServingParts,
): { service: JudgeService; comparisons: ComparisonService } {
  const { config, router } = deps;
  const { metrics, metered, state, admission, planner, failures, cancels, integrity, onRefusal } = parts;
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
    now: parts.now,
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
  return { service, comparisons };
}

/** Warns in the log when judgments fail at more than `FAILURE_WARN_RATE` (failure-monitor.ts). */
function failureWarnings(config: ServiceDeps['config'], app: FastifyInstance) {
  return createFailureMonitor({
    rate: config.failureWarnRate,
    intervalMs: config.failureWarnIntervalMs,
    warn: (fields, message) => app.log.warn(fields, message),
  });
}

/**
 * Every service of the app, in dependency order; `metrics`, `state` and `defaultGraph` are the ones
 * `buildApp` resolved before creating `app` (whose logger the services warn through).
 */
export function createAppServices(
  deps: ServiceDeps,
  app: FastifyInstance,
  metrics: Metrics,
  state: SharedState,
  defaultGraph: GraphChoice,
): AppServices {
  const { config, router } = deps;
  const now = deps.now ?? Date.now;
  const { budget, metered, callHooks } = meterCalls(config, metrics, state, now, app);
  const loopLag = acquireLoopLag();
  const admission = createAdmission(config, router, metrics, now, budget, loopLag);
  const planner = createPlanner(
    admission,
    plannerLimits(config, () => integrity.background()),
  );
  callHooks.push((event) => planner.observeCall(event));
  const failures = failureWarnings(config, app);
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
  const integrity = createAppIntegrity(deps, defaultGraph, metrics, metered, admission, app);
  const { service, comparisons } = createServing(deps, app, {
    metrics,
    metered,
    state,
    now,
    admission,
    planner,
    failures,
    cancels,
    integrity,
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
    groupMeans: createGroupMeans(now),
  };
  return { ctx, planner, loopLag };
}
