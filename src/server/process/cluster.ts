/**
 * WORKERS=N: one primary process and N workers on one port (node:cluster; the primary accepts and hands
 * connections round-robin). The primary serves nothing itself. It
 * - merges /metrics: the worker that gets the scrape asks the primary, which collects every worker's
 *   metrics as JSON and merges them with prom-client's `AggregatorRegistry.aggregate` (counters and
 *   histograms summed, so each judgment counts once; gauges by their own aggregator), plus its own
 *   `reward_workers` / `reward_worker_restarts_total`. Counters of a worker that died are kept from its last
 *   snapshot, so merged counters do not go backwards.
 * - replaces a worker that dies (its open connections are reset: clients see a connection error and
 *   retry; the primary logs it and counts it), with a back-off when workers keep dying;
 * - on SIGTERM/SIGINT stops replacing, signals every worker (each drains like a single process: stop
 *   accepting, finish in-flight work within SHUTDOWN_GRACE_MS) and exits 0 once all exited 0.
 */
import cluster, { type Worker } from 'node:cluster';

import { AggregatorRegistry } from 'prom-client';
import { z } from 'zod';

import type { Config } from '../../config.js';
import type { BackendSettings } from '../../settings/routing-file.js';
import { createPrimaryCancelRelay } from '../controls/cancel-relay.js';
import type { ClusterMetrics } from '../observe/metrics.js';

/** Worker → primary: "give me the merged metrics"; primary → worker: "send yours". */
const MetricsRequest = z.strictObject({ type: z.literal('reward:metrics-request'), id: z.number() });
const MetricsAsk = z.strictObject({ type: z.literal('reward:metrics-ask'), id: z.number() });
/** prom-client's `getMetricsAsJSON()`, as far as merging needs it. */
const MetricsJson = z.array(z.looseObject({ name: z.string(), type: z.string() }));
const MetricsSnapshot = z.strictObject({
  type: z.literal('reward:metrics-snapshot'),
  id: z.number(),
  metrics: MetricsJson,
});
const MetricsText = z.strictObject({
  type: z.literal('reward:metrics-text'),
  id: z.number(),
  text: z.string().optional(),
  error: z.string().optional(),
});
type Snapshot = z.infer<typeof MetricsSnapshot>['metrics'];

/** A worker's answer to the primary's ask; past it the worker's last snapshot stands in for it. */
const ASK_TIMEOUT_MS = 2000;
/** The merged answer a worker waits for. */
const MERGE_TIMEOUT_MS = 5000;
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

/** Cumulative series (kept from a dead worker's last snapshot); gauges of a dead worker just go. */
const isCumulative = (m: Snapshot[number]): boolean => m.type === 'counter' || m.type === 'histogram';

/** Runs the primary: forks the workers and supervises them. Returns the shutdown trigger. */
export function runPrimary(options: PrimaryOptions): { shutdown(signal: string): void } {
  const { metrics, log } = options;
  const last = new Map<number, Snapshot>();
  let retired: Snapshot[] = [];
  const asks = new Map<number, { pending: Set<number>; got: Snapshot[]; done: () => void }>();
  const deaths: number[] = [];
  const exitCodes: number[] = [];
  let askSeq = 0;
  let stopping = false;

  const alive = (): Worker[] =>
    Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined && !w.isDead());
  const counted = (): void => metrics.workers.set(alive().length);

  /** Workers that listened at least once; a worker that dies before any did means start-up failed. */
  const listened = new Set<number>();
  const fork = (): void => {
    const worker = cluster.fork();
    worker.on('message', (message: unknown) => onMessage(worker, message));
    worker.once('listening', () => listened.add(worker.id));
    counted();
  };

  /** Every live worker's metrics JSON (the last snapshot for one that does not answer in time). */
  const collect = async (): Promise<Snapshot[]> => {
    const id = ++askSeq;
    const workers = alive();
    const got: Snapshot[] = [];
    const pending = new Set(workers.map((w) => w.id));
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, ASK_TIMEOUT_MS);
      function done(): void {
        clearTimeout(timer);
        asks.delete(id);
        resolve();
      }
      asks.set(id, { pending, got, done });
      for (const w of workers) w.send({ type: 'reward:metrics-ask', id });
      if (pending.size === 0) done();
    });
    for (const wid of pending) {
      const stale = last.get(wid);
      if (stale !== undefined) got.push(stale.filter(isCumulative));
    }
    return got;
  };

  const relayCancel = createPrimaryCancelRelay(alive);

  const merged = async (): Promise<string> => {
    const snapshots = await collect();
    const own = await metrics.registry.getMetricsAsJSON();
    return AggregatorRegistry.aggregate([...snapshots, ...retired, own]).metrics();
  };

  function onMessage(worker: Worker, message: unknown): void {
    // POST /v1/cancel relayed to every worker (`cancel-relay.ts`).
    if (relayCancel(worker, message)) return;
    const request = MetricsRequest.safeParse(message);
    if (request.success) {
      merged().then(
        (text) => worker.send({ type: 'reward:metrics-text', id: request.data.id, text }),
        (err: unknown) =>
          worker.send({ type: 'reward:metrics-text', id: request.data.id, error: String(err) }),
      );
      return;
    }
    const snapshot = MetricsSnapshot.safeParse(message);
    if (snapshot.success) {
      last.set(worker.id, snapshot.data.metrics);
      const ask = asks.get(snapshot.data.id);
      if (ask !== undefined && ask.pending.delete(worker.id)) {
        ask.got.push(snapshot.data.metrics);
        if (ask.pending.size === 0) ask.done();
      }
    }
  }

  const restartDelay = (): number => {
    const t = Date.now();
    deaths.push(t);
    while (deaths.length > 0 && (deaths[0] ?? t) < t - CRASH_WINDOW_MS) deaths.shift();
    if (deaths.length < CRASH_BURST) return 0;
    return Math.min(MAX_RESTART_DELAY_MS, 1000 * 2 ** (deaths.length - CRASH_BURST));
  };

  cluster.on('exit', (worker, code, signal) => {
    counted();
    const snapshot = last.get(worker.id);
    last.delete(worker.id);
    for (const ask of asks.values()) if (ask.pending.delete(worker.id) && ask.pending.size === 0) ask.done();
    if (snapshot !== undefined) {
      // Merge into one retired snapshot so the list does not grow with every restart.
      const kept = snapshot.filter(isCumulative);
      void AggregatorRegistry.aggregate([...retired, kept])
        .getMetricsAsJSON()
        .then((json) => {
          retired = [MetricsJson.parse(json)];
        });
    }
    if (stopping) {
      exitCodes.push(code);
      log('info', { worker: worker.id, worker_pid: worker.process.pid, code, signal }, 'worker stopped');
      if (alive().length === 0) options.exit(exitCodes.every((c) => c === 0) ? 0 : 1);
      return;
    }
    if (listened.size === 0) {
      // Not one worker got as far as listening (port taken, bad routing file…): restarting would loop.
      log(
        'error',
        { worker: worker.id, worker_pid: worker.process.pid, code, signal },
        'a worker exited before any worker listened: start-up failed, stopping',
      );
      stopping = true;
      for (const w of alive()) w.process.kill('SIGTERM');
      options.exit(1);
      return;
    }
    const reason = signal !== null ? 'signal' : code === 0 ? 'exit' : 'crash';
    metrics.restarts.labels(reason).inc();
    const delay = restartDelay();
    log(
      'error',
      { worker: worker.id, worker_pid: worker.process.pid, code, signal, restart_in_ms: delay },
      'worker died: its open requests failed with a connection reset (clients retry); starting a replacement',
    );
    setTimeout(() => {
      if (!stopping) fork();
    }, delay).unref();
  });

  for (let i = 0; i < options.workers; i++) fork();

  return {
    shutdown(signal) {
      if (stopping) {
        log('warn', { signal }, 'already shutting down');
        return;
      }
      stopping = true;
      const workers = alive();
      log(
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
        log('error', {}, 'workers did not stop in time; killing them');
        for (const w of alive()) w.process.kill('SIGKILL');
        options.exit(1);
      }, options.shutdownGraceMs + options.hardExitMarginMs);
      hard.unref();
    },
  };
}

/**
 * The worker side: answers the primary's asks with this worker's metrics, and returns the function the
 * /metrics route calls for the merged text.
 */
export function joinCluster(registry: { getMetricsAsJSON(): Promise<unknown[]> }): () => Promise<string> {
  const waiting = new Map<number, { resolve: (text: string) => void; reject: (err: Error) => void }>();
  let seq = 0;
  process.on('message', (message: unknown) => {
    const ask = MetricsAsk.safeParse(message);
    if (ask.success) {
      void registry.getMetricsAsJSON().then((metrics) => {
        process.send?.({ type: 'reward:metrics-snapshot', id: ask.data.id, metrics });
      });
      return;
    }
    const text = MetricsText.safeParse(message);
    if (text.success) {
      const w = waiting.get(text.data.id);
      if (w === undefined) return;
      waiting.delete(text.data.id);
      if (text.data.text !== undefined) w.resolve(text.data.text);
      else w.reject(new Error(`merged metrics failed: ${text.data.error ?? 'unknown'}`));
    }
  });
  return () =>
    new Promise<string>((resolve, reject) => {
      const id = ++seq;
      const timer = setTimeout(() => {
        waiting.delete(id);
        reject(new Error('the primary did not answer with merged metrics in time'));
      }, MERGE_TIMEOUT_MS);
      waiting.set(id, {
        resolve: (t) => {
          clearTimeout(timer);
          resolve(t);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      process.send?.({ type: 'reward:metrics-request', id });
    });
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
