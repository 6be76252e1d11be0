/**
 * The process entry point: reads config, builds the router and the app, listens, and shuts down
 * gracefully on SIGTERM/SIGINT (stop accepting, let in-flight judgments finish within SHUTDOWN_GRACE_MS,
 * flush transcripts, close backends, exit 0). With WORKERS>1 this process becomes the cluster primary
 * (`cluster.ts`) and each worker runs the server below on the shared port.
 */
import cluster from 'node:cluster';
import { hostname, availableParallelism } from 'node:os';

import { loadConfig, type Config } from '../config.js';
import { createOfflineBackend } from '../judge/backends/offline.js';
import { createOpenAICompatibleBackend, INLINE_TRACE_ADVICE } from '../judge/backends/openai.js';
import {
  DEFAULT_SAMPLING_NOTE,
  isOpenAIReasoningModel,
  type RequestDialectSwitch,
} from '../judge/backends/request-dialect.js';
import type { ResponseFormatSwitch } from '../judge/backends/response-format.js';
import { createRouter } from '../judge/routing.js';
import { createLocalState } from '../state/local.js';
import { createRedisState, redactRedisUrl } from '../state/redis.js';
import { createRedisCanaryLog } from '../state/canary-log.js';
import type { SharedState } from '../state/types.js';
import { buildApp } from './http/app.js';
import { createWorkerCancelRelay } from './controls/cancel-relay.js';
import { joinCluster, runPrimary, workerShare } from './process/cluster.js';
import { createClusterMetrics, createMetrics } from './observe/metrics.js';
import { startupFields } from './process/startup.js';
import { createFileTranscriptSink, type TranscriptSink } from './observe/transcripts.js';
import { reportReload } from './tenants/access.js';
import { createKeyring } from './tenants/keyring.js';

const OFFLINE_BANNER = [
  '',
  '='.repeat(78),
  '  OFFLINE BACKEND: rewards come from a deterministic term-overlap heuristic.',
  '  This is NOT a real judge. It exists so the whole flow runs without an LLM.',
  '  For real judging set JUDGE_BASE_URL and JUDGE_MODEL (and JUDGE_API_KEY).',
  '  Every response says "backend": "offline".',
  '='.repeat(78),
  '',
].join('\n');

/** Extra time past the grace period for aborted judgments to answer before the process gives up. */
const HARD_EXIT_MARGIN_MS = 10_000;

/**
 * One line at start per backend whose model is one of OpenAI's reasoning models: they take only the
 * default sampling, so what stands in for temperature diversity is said (request-dialect.ts).
 */
function noteDefaultSampling(config: Config, log: { info: (fields: object, msg: string) => void }): void {
  const models: Array<[string, string]> = [];
  if (config.judge.default !== 'offline') models.push(['default', config.judge.default.model]);
  for (const [name, b] of Object.entries(config.judge.file?.backends ?? {})) models.push([name, b.model]);
  for (const [backend, model] of models) {
    if (isOpenAIReasoningModel(model)) log.info({ backend, model }, DEFAULT_SAMPLING_NOTE);
  }
}

/** The log line of one switch of a replica's response format. */
function formatSwitchMessage(event: ResponseFormatSwitch): string {
  return event.to === 'json_object'
    ? 'backend replica refused the json_schema: using json_object (schema in the prompt) until a re-probe'
    : 'backend replica accepts json_schema again: back to json_schema';
}

/** The log line of one switch of a backend's request dialect. */
function dialectSwitchMessage(event: RequestDialectSwitch): string {
  return event.to.defaultSamplingOnly && !event.from.defaultSamplingOnly
    ? `backend refuses non-default sampling: ${DEFAULT_SAMPLING_NOTE}`
    : `backend takes ${event.to.tokensParam} for the completion budget: switched`;
}
/** How long start-up waits for Redis before serving degraded (on local state). */
const REDIS_CONNECT_WAIT_MS = 2_000;
/** How often each process checks the keys file (REWARD_KEYS) for a change. */
const KEYS_POLL_MS = 2_000;

const LEVELS = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60, silent: Infinity };

/** The primary serves no HTTP and has no fastify: its few lines in the same JSON shape as pino's. */
function primaryLog(config: Config): (level: 'info' | 'warn' | 'error', fields: object, msg: string) => void {
  const threshold = LEVELS[config.logLevel];
  const host = hostname();
  return (level, fields, msg) => {
    if (LEVELS[level] < threshold) return;
    const line = {
      level: LEVELS[level],
      time: Date.now(),
      pid: process.pid,
      hostname: host,
      role: 'primary',
    };
    process.stdout.write(`${JSON.stringify({ ...line, ...fields, msg })}\n`);
  };
}

function primary(config: Config, workers: number): void {
  const log = primaryLog(config);
  log(
    'info',
    { workers, redis: config.redis === undefined ? null : redactRedisUrl(config.redis.url) },
    'starting workers',
  );
  if (config.redis === undefined) {
    log(
      'warn',
      {},
      'WORKERS>1 without REDIS_URL: each worker has its own cache and single-flight; backend limits are split between workers',
    );
  }
  const supervisor = runPrimary({
    workers,
    shutdownGraceMs: config.shutdownGraceMs,
    hardExitMarginMs: HARD_EXIT_MARGIN_MS,
    metrics: createClusterMetrics(),
    log,
    exit: (code) => process.exit(code),
  });
  process.on('SIGTERM', () => supervisor.shutdown('SIGTERM'));
  process.on('SIGINT', () => supervisor.shutdown('SIGINT'));
  // REWARD_KEYS: a SIGHUP to the primary reloads the keys file in every worker (each also polls it).
  if (config.keys !== undefined) process.on('SIGHUP', () => supervisor.signalWorkers('SIGHUP'));
}

/** Where the backends' lines go once the app's logger exists (the backends are built before it). */
interface LogSink {
  error?: (err: unknown) => void;
  warn?: (fields: Record<string, unknown>, message: string) => void;
}

type Metrics = ReturnType<typeof createMetrics>;
type Server = ReturnType<typeof buildApp>;
type Router = ReturnType<typeof createRouter>;
type RedisState = ReturnType<typeof createRedisState>;

/** Shared state: in Redis when REDIS_URL is set (waiting briefly for it), else in this process. */
async function connectState(
  config: Config,
  metrics: Metrics,
  stateLog: { changed?: (degraded: boolean) => void },
): Promise<{ redis: RedisState | undefined; state: SharedState; redisUp: boolean | undefined }> {
  const redis =
    config.redis === undefined
      ? undefined
      : createRedisState({
          ...config.redis,
          observer: {
            onDegraded: (degraded) => {
              metrics.stateObserver.onDegraded?.(degraded);
              stateLog.changed?.(degraded);
            },
            onError: (op, err) => metrics.stateObserver.onError?.(op, err),
          },
        });
  const state: SharedState = redis ?? createLocalState();
  const redisUp = redis === undefined ? undefined : await redis.connected(REDIS_CONNECT_WAIT_MS);
  return { redis, state, redisUp };
}

/** The judge router over the configured backends, their rate buckets in `state`. */
function buildRouter(config: Config, state: SharedState, logSink: LogSink): Router {
  return createRouter({
    ...config.judge,
    offline: createOfflineBackend,
    createBackend: (settings, name) =>
      createOpenAICompatibleBackend(settings, {
        name,
        // RPM/TPM buckets: in-process, or shared through Redis with every worker and replica.
        buckets: state.buckets,
        // One line per switch of one replica's response format, or of a backend's request dialect, with
        // its evidence (docs/backends.md).
        onResponseFormatSwitch: (event) => logSink.warn?.({ ...event }, formatSwitchMessage(event)),
        onRequestDialectSwitch: (event) => logSink.warn?.({ ...event }, dialectSwitchMessage(event)),
        onInlineReasoning: (event) => logSink.warn?.({ ...event }, INLINE_TRACE_ADVICE),
      }),
  });
}

/** The canary record shared by every replica (REDIS_URL): one Redis stream of canary outcomes. */
function canaryLogOf(config: Config, metrics: Metrics): ReturnType<typeof createRedisCanaryLog> | undefined {
  if (config.redis === undefined) return undefined;
  return createRedisCanaryLog({
    url: config.redis.url,
    prefix: config.redis.prefix,
    timeoutMs: config.redis.timeoutMs,
    onError: () => metrics.sharedStateErrors.labels('canaries').inc(),
  });
}

/** Logs where shared state lives (and each outage and recovery after) and the offline banner. */
function announce(
  server: Server,
  config: Config,
  shared: { redis: RedisState | undefined; redisUp: boolean | undefined },
  stateLog: { changed?: (degraded: boolean) => void },
  router: Router,
): void {
  if (shared.redis !== undefined) {
    const url = redactRedisUrl(config.redis?.url ?? '');
    if (shared.redisUp === true) server.log.info({ redis: url }, 'shared state in Redis');
    else server.log.warn({ redis: url }, 'Redis unreachable: serving on local state until it answers');
    stateLog.changed = (degraded) => {
      if (degraded)
        server.log.warn({ redis: url }, 'Redis unreachable: judging on local state until it answers');
      else server.log.info({ redis: url }, 'Redis reachable again: shared state resumed');
    };
  }

  noteDefaultSampling(config, server.log);
  if (router.name === 'offline') {
    console.error(OFFLINE_BANNER);
    server.log.warn({ backend: 'offline' }, 'serving with the OFFLINE backend: not a real judge');
  }
}

interface Running {
  server: Server;
  config: Config;
  router: Router;
  state: SharedState;
  transcripts: TranscriptSink | undefined;
  keyring: ReturnType<typeof createKeyring>;
  metrics: Metrics;
}

/**
 * SIGTERM/SIGINT: stop accepting, let in-flight judgments finish within SHUTDOWN_GRACE_MS, flush
 * transcripts, close backends and state, exit (1 if that failed or took past the hard-exit margin).
 * SIGHUP and a poll reload REWARD_KEYS; an unhandled rejection is logged.
 */
function handleSignals(r: Running): void {
  const { server, config } = r;
  let stopping = false;
  const shutdown = (signal: NodeJS.Signals): void => {
    if (stopping) {
      server.log.warn({ signal }, 'already shutting down');
      return;
    }
    stopping = true;
    server.log.info(
      { signal, grace_ms: config.shutdownGraceMs },
      'shutting down: finishing in-flight requests',
    );
    const hardExit = setTimeout(() => {
      server.log.error('shutdown did not finish in time; exiting');
      process.exit(1);
    }, config.shutdownGraceMs + HARD_EXIT_MARGIN_MS);
    hardExit.unref();
    void (async () => {
      let code = 0;
      try {
        await server.close();
        await r.transcripts?.close();
        await Promise.all(r.router.backends().map(async (b) => b.close?.()));
        await r.state.close();
      } catch (err) {
        server.log.error({ err }, 'error during shutdown');
        code = 1;
      }
      server.log.info({ code }, 'stopped');
      process.exit(code);
    })();
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  if (config.keys !== undefined) {
    // A file that does not validate keeps the old keys (logged and counted: reward_keys_reloads_total).
    const report = (outcome: ReturnType<typeof r.keyring.reload>): void =>
      reportReload(outcome, r.metrics.tenants, server.log);
    process.on('SIGHUP', () => report(r.keyring.reload()));
    r.keyring.watch(KEYS_POLL_MS, report);
  }
  process.on('unhandledRejection', (reason) => {
    server.log.error({ err: reason }, 'unhandled rejection');
  });
}

/** Reads config, wires the state, router and app, handles signals, listens. */
async function main(): Promise<void> {
  const loaded = loadConfig();
  const workers = loaded.workers === 'auto' ? availableParallelism() : loaded.workers;
  if (workers > 1 && cluster.isPrimary) {
    primary(loaded, workers);
    return;
  }
  const config = workerShare(loaded, workers);
  const logSink: LogSink = {};
  const metrics = createMetrics({ recentWindow: config.recentWindow });
  // Outage / recovery lines, once the server's logger exists (the initial state is logged by announce).
  const stateLog: { changed?: (degraded: boolean) => void } = {};
  const shared = await connectState(config, metrics, stateLog);
  const { state } = shared;
  const router = buildRouter(config, state, logSink);
  const transcripts =
    config.transcriptsPath === undefined
      ? undefined
      : await createFileTranscriptSink(config.transcriptsPath, {
          onError: (err) => {
            metrics.transcriptErrors.inc();
            logSink.error?.(err);
          },
        });
  const keyring = createKeyring({ apiKey: config.apiKey, keys: config.keys });
  const server = buildApp({
    config,
    router,
    metrics,
    keyring,
    workers,
    transcripts,
    state,
    canaryLog: canaryLogOf(config, metrics),
    logger: { level: config.logLevel },
    metricsText: cluster.isWorker ? joinCluster(metrics.registry) : undefined,
    workerId: cluster.worker?.id,
    relayCancel: cluster.isWorker ? createWorkerCancelRelay() : undefined,
  });
  logSink.error = (err) => server.log.error({ err }, 'transcript write failed');
  logSink.warn = (fields, message) => server.log.warn(fields, message);
  announce(server, config, shared, stateLog, router);
  handleSignals({ server, config, router, state, transcripts, keyring, metrics });

  const address = await server.listen({ port: config.port, host: config.host });
  server.log.info({ url: address, ...startupFields(config, router.name) }, 'reward server listening');
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
