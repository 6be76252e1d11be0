/**
 * WORKERS=N: one primary process and N workers on one port (node:cluster; the primary accepts and hands
 * connections round-robin). The primary serves nothing itself. It
 * - merges /metrics (`cluster-metrics.ts`: every worker's counted once, a dead worker's counters kept) and
 *   relays POST /v1/cancel to every worker (`controls/cancel-relay.ts`);
 * - replaces a worker that dies (its open connections are reset: clients see a connection error and
 *   retry; the primary logs it and counts it), with a back-off when workers keep dying;
 * - on SIGTERM/SIGINT stops replacing, signals every worker (each drains like a single process: stop
 *   accepting, finish in-flight work within SHUTDOWN_GRACE_MS) and exits 0 once all exited 0.
 */
import cluster, { type Worker } from 'node:cluster';

import type { Config } from '../../config.js';
import type { BackendSettings } from '../../settings/routing-file.js';
import { createPrimaryCancelRelay } from '../controls/cancel-relay.js';
import type { ClusterMetrics } from '../observe/metric-types.js';
import { createMetricsMerger } from './cluster-metrics.js';

export { joinCluster } from './cluster-metrics.js';

/** Restart back-off: after this many deaths in the window, wait before forking the next worker. */
const CRASH_WINDOW_MS = 30_000;
const CRASH_BURST = 5;
const MAX_RESTART_DELAY_MS = 10_000;

type Log = (level: 'info' | 'warn' | 'error', fields: Record<string, unknown>, msg: string) => void;

export interface PrimaryOptions {
  workers: number;
  /** SHUTDOWN_GRACE_MS: the workers' drain; the primary waits this plus `hardExitMarginMs`. */
  shutdownGraceMs: number;
  hardExitMarginMs: number;
  metrics: ClusterMetrics;
  log: Log;
  /** Called once every worker exited after a shutdown signal, with 0 when all exited 0. */
  exit: (code: number) => void;
}

/**
 * The restart back-off: the delay before forking a replacement for a worker that died at `now`: 0 until
 * `CRASH_BURST` deaths within `CRASH_WINDOW_MS`, then 1 s doubling with each further death in the window, at
 * most `MAX_RESTART_DELAY_MS`.
 */
export function createRestartBackoff(): (now: number) => number {
  const deaths: number[] = [];
  return (t) => {
    deaths.push(t);
    while (deaths.length > 0 && (deaths[0] ?? t) < t - CRASH_WINDOW_MS) deaths.shift();
    if (deaths.length < CRASH_BURST) return 0;
    return Math.min(MAX_RESTART_DELAY_MS, 1000 * 2 ** (deaths.length - CRASH_BURST));
  };
}

/**
 * Runs the primary: forks the workers and supervises them. Returns the shutdown trigger, and
 * `signalWorkers` (SIGHUP: every worker reloads its keys file).
 */
export function runPrimary(options: PrimaryOptions): {
  shutdown(signal: string): void;
  signalWorkers(signal: NodeJS.Signals): void;
} {
  const { metrics, log } = options;
  const exitCodes: number[] = [];
  const restartDelay = createRestartBackoff();
  let stopping = false;

  const alive = (): Worker[] =>
    Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined && !w.isDead());
  const counted = (): void => metrics.workers.set(alive().length);
  const merger = createMetricsMerger({ alive, registry: metrics.registry });
  const relayCancel = createPrimaryCancelRelay(alive);

  /** Workers that listened at least once; a worker that dies before any did means start-up failed. */
  const listened = new Set<number>();
  const fork = (): void => {
    const worker = cluster.fork();
    // POST /v1/cancel relayed to every worker (`cancel-relay.ts`), then merged /metrics.
    worker.on(
      'message',
      (message: unknown) => relayCancel(worker, message) || merger.onMessage(worker, message),
    );
    worker.once('listening', () => listened.add(worker.id));
    counted();
  };

  cluster.on('exit', (worker, code, signal) => {
    counted();
    merger.onExit(worker.id);
    const fields = { worker: worker.id, worker_pid: worker.process.pid, code, signal };
    if (stopping) {
      exitCodes.push(code);
      log('info', fields, 'worker stopped');
      if (alive().length === 0) options.exit(exitCodes.every((c) => c === 0) ? 0 : 1);
      return;
    }
    if (listened.size === 0) {
      // Not one worker got as far as listening (port taken, bad routing file…): restarting would loop.
      log('error', fields, 'a worker exited before any worker listened: start-up failed, stopping');
      stopping = true;
      for (const w of alive()) w.process.kill('SIGTERM');
      options.exit(1);
      return;
    }
    const reason = signal !== null ? 'signal' : code === 0 ? 'exit' : 'crash';
    metrics.restarts.labels(reason).inc();
    const delay = restartDelay(Date.now());
    log(
      'error',
      { ...fields, restart_in_ms: delay },
      'worker died: its open requests failed with a connection reset (clients retry); starting a replacement',
    );
    setTimeout(() => {
      if (!stopping) fork();
    }, delay).unref();
  });

  for (let i = 0; i < options.workers; i++) fork();

  return {
    signalWorkers(signal) {
      if (stopping) return;
      log('info', { signal, workers: alive().length }, 'relaying the signal to every worker');
      for (const w of alive()) w.process.kill(signal);
    },
    shutdown(signal) {
      if (stopping) {
        log('warn', { signal }, 'already shutting down');
        return;
      }
      stopping = true;
      drain(alive, signal, options);
    },
  };
}

/**
 * Shutdown: signals every live worker (each drains like a single process) and exits 0 once all exited 0 (the
 * exit handler of `runPrimary` sees to that); kills them and exits 1 past the grace and margin.
 */
function drain(alive: () => Worker[], signal: string, options: PrimaryOptions): void {
  const workers = alive();
  options.log(
    'info',
    { signal, workers: workers.length, grace_ms: options.shutdownGraceMs },
    'shutting down: every worker finishes its in-flight requests',
  );
  if (workers.length === 0) {
    options.exit(0);
    return;
  }
  for (const w of workers) w.process.kill('SIGTERM');
  const hard = setTimeout(() => {
    options.log('error', {}, 'workers did not stop in time; killing them');
    for (const w of alive()) w.process.kill('SIGKILL');
    options.exit(1);
  }, options.shutdownGraceMs + options.hardExitMarginMs);
  hard.unref();
}

/**
 * A worker's share of the per-server backend limits, so that N workers together keep the configured
 * totals: JUDGE_MAX_INFLIGHT (and each routing-file backend's `max_inflight`) is split N ways (rounded
 * up); RPM/TPM too, unless the buckets are shared through Redis (then every worker draws from the same
 * bucket). MAX_CONCURRENT_JUDGMENTS, MAX_QUEUE and CACHE_SIZE stay per worker.
 */
export function workerShare(config: Config, workers: number): Config {
  if (workers <= 1) return config;
  const sharedBuckets = config.redis !== undefined;
  const share = (b: BackendSettings): BackendSettings => ({
    ...b,
    max_inflight: Math.max(1, Math.ceil(b.max_inflight / workers)),
    rpm: b.rpm === undefined || sharedBuckets ? b.rpm : b.rpm / workers,
    tpm: b.tpm === undefined || sharedBuckets ? b.tpm : b.tpm / workers,
  });
  const file = config.judge.file;
  const budget = config.tokenBudget;
  return {
    ...config,
    // Without Redis each worker counts its own spend: it gets its share of the budget.
    tokenBudget:
      budget === undefined || sharedBuckets
        ? budget
        : { ...budget, tokens: Math.max(1, Math.floor(budget.tokens / workers)) },
    judge: {
      default: config.judge.default === 'offline' ? 'offline' : share(config.judge.default),
      file:
        file === undefined
          ? undefined
          : {
              ...file,
              backends: Object.fromEntries(Object.entries(file.backends).map(([k, b]) => [k, share(b)])),
            },
    },
  };
}
