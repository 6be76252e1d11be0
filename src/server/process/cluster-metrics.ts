/**
 * Merged /metrics under WORKERS=N (`cluster.ts` runs the primary): the worker that gets the scrape asks the
 * primary, which collects every worker's metrics as JSON and merges them with prom-client's
 * `AggregatorRegistry.aggregate` (counters and histograms summed, so each judgment counts once; gauges by their
 * own aggregator), plus its own registry (`reward_workers`, `reward_worker_restarts_total`). Counters of a
 * worker that died are kept from its last snapshot, so merged counters do not go backwards. The primary's
 * side is `createMetricsMerger`, the worker's `joinCluster`; they speak the IPC messages below.
 */
import { AggregatorRegistry } from 'prom-client';
import { z } from 'zod';

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

/** Cumulative series (kept from a dead worker's last snapshot); gauges of a dead worker just go. */
const isCumulative = (m: Snapshot[number]): boolean => m.type === 'counter' || m.type === 'histogram';

/** A worker as the merger sees it (node:cluster's `Worker` is one). */
export interface ClusterMember {
  readonly id: number;
  send(message: unknown): unknown;
}

/** The primary's side of merged /metrics. */
export interface MetricsMerger {
  /** Handles a worker's metrics request or snapshot; false for any other message. */
  onMessage(worker: ClusterMember, message: unknown): boolean;
  /** A worker exited: its counters and histograms are kept (merged into one retired snapshot). */
  onExit(workerId: number): void;
  /** Every live worker's metrics (a silent one's last snapshot after `askTimeoutMs`), the retired and the own. */
  merged(): Promise<string>;
}

/**
 * The primary's merger over the live workers `alive()` and its own `registry`. `askTimeoutMs` (default 2 s)
 * is how long a scrape waits for a worker's snapshot before its last one stands in for it.
 */
export function createMetricsMerger(options: {
  alive: () => readonly ClusterMember[];
  registry: { getMetricsAsJSON(): Promise<unknown[]> };
  askTimeoutMs?: number | undefined;
}): MetricsMerger {
  const { alive, registry } = options;
  const askTimeoutMs = options.askTimeoutMs ?? ASK_TIMEOUT_MS;
  const last = new Map<number, Snapshot>();
  let retired: Snapshot[] = [];
  const asks = new Map<number, { pending: Set<number>; got: Snapshot[]; done: () => void }>();
  let askSeq = 0;

  /** Every live worker's metrics JSON (the last snapshot for one that does not answer in time). */
  const collect = async (): Promise<Snapshot[]> => {
    const id = ++askSeq;
    const workers = alive();
    const got: Snapshot[] = [];
    const pending = new Set(workers.map((w) => w.id));
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, askTimeoutMs);
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

  const merged = async (): Promise<string> => {
    const snapshots = await collect();
    const own = await registry.getMetricsAsJSON();
    return AggregatorRegistry.aggregate([...snapshots, ...retired, own]).metrics();
  };

  return {
    merged,
    onMessage(worker, message) {
      const request = MetricsRequest.safeParse(message);
      if (request.success) {
        merged().then(
          (text) => worker.send({ type: 'reward:metrics-text', id: request.data.id, text }),
          (err: unknown) =>
            worker.send({ type: 'reward:metrics-text', id: request.data.id, error: String(err) }),
        );
        return true;
      }
      const snapshot = MetricsSnapshot.safeParse(message);
      if (!snapshot.success) return false;
      last.set(worker.id, snapshot.data.metrics);
      const ask = asks.get(snapshot.data.id);
      if (ask !== undefined && ask.pending.delete(worker.id)) {
        ask.got.push(snapshot.data.metrics);
        if (ask.pending.size === 0) ask.done();
      }
      return true;
    },
    onExit(workerId) {
      const snapshot = last.get(workerId);
      last.delete(workerId);
      for (const ask of asks.values()) if (ask.pending.delete(workerId) && ask.pending.size === 0) ask.done();
      if (snapshot === undefined) return;
      // Merge into one retired snapshot so the list does not grow with every restart.
      const kept = snapshot.filter(isCumulative);
      void AggregatorRegistry.aggregate([...retired, kept])
        .getMetricsAsJSON()
        .then((json) => {
          retired = [MetricsJson.parse(json)];
        });
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
