/**
 * The in-flight limit of one replica, by default (`inflight_control: engine`): keep the engine's batch
 * full and its own queue near empty, so that the queue of work waiting for the engine is ours — where the
 * priority lanes, cancels and deadlines reach it — and not the engine's (issue 29).
 *
 * **Engine law** (the engine publishes its load: engine-metrics.ts). On every fresh reading of its batch R
 * and its queue W, with headroom h = max(1, ⌈HEADROOM × R⌉) (a few calls queued in the engine so a finished
 * sequence is replaced at once):
 * - W ≥ max(QUEUE_MIN, 2h) at this reading and the previous one, the batch did not take the queue in
 *   between (R grew by at most h), and — where the engine reports it (vLLM's queue-time histogram) — the
 *   requests that left its queue meanwhile waited at least QUEUE_EVIDENCE of a recent call: the engine
 *   queues, and R is its capacity now (its `--max-num-seqs`, or fewer while its
 *   KV cache is full; the engine's capacity C is the largest such R over CAPACITY_WINDOW_MS). A queue seen
 *   once is a transient — requests that arrived mid-step, or while the engine's front end was busy; they
 *   join the next step — and changes nothing. The limit drops to our share of R + h: (R + h) × min(1, I / (R + W)),
 *   I our calls in flight (other clients of the engine, or other `WORKERS`, hold the rest). Never raised by
 *   this rule, so a reading that lags behind our last change cannot push it down twice.
 * - W = 0 (W ≤ h in slow start), calls wait in this server for a slot, the engine holds about all of ours
 *   (R + W ≥ I − h: a batch with room while our calls are still on the wire is no room for more), the KV
 *   cache is below KV_HIGH, and the reading was requested after our last change took effect: the engine
 *   takes everything we send. The limit doubles (slow start, until the engine first queues), then grows
 *   by h per reading.
 * - Otherwise (0 < W ≤ h, an idle replica, a full KV cache) it holds.
 * The limit starts at INITIAL and never leaves [1, ceiling] (`JUDGE_MAX_INFLIGHT`). The snapshot also gives
 * the rate the engine has shown (`shown`: Little's law over recent attempts and the readings around their
 * sending: shown-rate.ts), which the capacity estimate takes before it has measured completions at capacity.
 *
 * **A gauge that contradicts us is not believed** (issue 38 item 10). Other clients can only add to the
 * engine's load, so R + W ≥ I (our calls in flight) must hold, give or take the calls still on the wire:
 * a reading with R + W + max(h, ⌈GAUGE_SLACK × I⌉) < I, at GAUGE_STRIKES readings in a row while we hold at
 * least GAUGE_MIN_OURS calls, is a gauge that lies (another process's exporter, a router or Service in front
 * of several engines, a stale gauge). The replica is then steered as one without metrics (the gradient
 * law, its capacity what completions show) until GAUGE_STRIKES readings in a row agree (R + W ≥ I − h
 * with calls of ours in flight). A reading while this process's event loop lagged (between its request and
 * its arrival) proves nothing: our count then holds replies not read yet. The snapshot says so (`gauge`), and so do /readyz and
 * `reward_backend_replica_engine_metrics_trusted`.
 *
 * **Gradient law** (no engine metrics, or none fresh: an OpenAI-style API, llama.cpp without `--metrics`).
 * The signal is each attempt's time from sending the request to the response headers — not the body, not
 * our parsing — divided by the lowest such time seen for its kind of call (its role: a verdict is shorter
 * than an analysis), and only for attempts during which this process's event loop never lagged more than
 * max(LAG_FLOOR_MS, LAG_SHARE × that baseline) (loop-lag.ts): a reply read late because we were busy says
 * nothing about the engine. Over windows of ≥ WINDOW_SAMPLES such attempts and ≥ WINDOW_MS, with r the
 * median ratio: r > TOLERANCE → limit × max(0.5, TOLERANCE / r); else, while calls wait for a slot,
 * limit + √limit (gradient2's queue allowance). Attempts that timed out count with their full duration;
 * other errors are not latency. Without metrics it starts at the ceiling: nothing says the server is
 * smaller than the operator's ceiling until its latency does.
 */
import type { EngineReading, EngineScraper, ScrapeState } from './engine-metrics.js';
import { createShownRate, type ShownRate } from './shown-rate.js';

/** Starting limit while engine metrics are expected (probing) or read. */
export const INITIAL = 16;
/**
 * Calls kept queued in the engine beyond its batch, as a share of the batch (at least 1): enough to
 * replace the sequences that finish in one engine step (a request that arrives mid-step waits for the next
 * one), so the batch stays full; small enough that a high-priority call waits behind few.
 */
export const HEADROOM = 0.1;
/** The engine's capacity is the largest batch it ran while queueing over this window, ms. */
export const CAPACITY_WINDOW_MS = 3_000;
/** A queue is evidence of capacity from this depth (and 2 × the headroom) on. */
export const QUEUE_MIN = 3;
/** …and when the requests leaving it waited at least this share of a recent call (vLLM's histogram). */
export const QUEUE_EVIDENCE = 0.2;
/** KV-cache use at which the limit stops growing: the engine would preempt or queue. */
export const KV_HIGH = 0.95;
/** Gradient: a median latency ratio above this is queueing (a batching engine slows less than 2×). */
export const TOLERANCE = 2;
/** Gradient: event-loop lag that taints an attempt: max(LAG_FLOOR_MS, LAG_SHARE × baseline). */
export const LAG_FLOOR_MS = 20;
export const LAG_SHARE = 0.1;
/** Gradient: attempts and time per decision window. */
export const WINDOW_SAMPLES = 8;
export const WINDOW_MS = 100;
/** Gradient: the per-kind baseline is the lowest latency of the current and the previous period. */
export const BASELINE_PERIOD_MS = 300_000;
/** Readings in a row that contradict (or, once distrusted, agree with) our own in-flight count. */
export const GAUGE_STRIKES = 3;
/** A reading contradicts us only while we hold at least this many calls on the replica. */
export const GAUGE_MIN_OURS = 4;
/** Share of our in-flight calls that may still be on the wire (not yet counted by the engine). */
export const GAUGE_SLACK = 0.5;
/** How long the largest batch the engine was seen running counts as proven capacity, ms. */
export const PROVEN_TTL_MS = 60_000;
/** EWMA weight of one attempt's latency in the replica's recent latency. */
const RTT_ALPHA = 0.2;
/** One finished attempt as the control law sees it (epoch ms). */
export interface ControlSample {
  sentAt: number;
  /** When the response headers arrived; undefined when none did (timeouts, connection errors). */
  headersAt: number | undefined;
  endedAt: number;
  /** `ok`: a reply the engine computed; `timeout`: the attempt's own timer cut it; `other`: anything else. */
  result: 'ok' | 'timeout' | 'other';
  /** Kind of call (e.g. its role): latencies are compared within a kind. */
  kind: string;
}

/** What the limiter tells the control about its own queue. */
export interface ControlLoad {
  inflight: number;
  /** Calls waiting in this server for one of the replica's slots. */
  waiting: number;
}

export type ControlLaw = 'engine' | 'gradient';

/** The control's state, for metrics and the capacity estimate (src/server/admission/capacity.ts). */
export interface ControlSnapshot {
  law: ControlLaw;
  /** The replica's engine publishes metrics, whether or not a reading is fresh (not while still probed). */
  metrics: boolean;
  /** The engine's last fresh reading; undefined without one. */
  engine: Pick<EngineReading, 'kind' | 'running' | 'waiting' | 'kvUsage' | 'queueTime'> | undefined;
  /**
   * The replica's capacity in concurrent calls: `known` once the engine was seen queueing (its batch then),
   * or the limit reached the ceiling with the engine taking it all, or (gradient) the limit itself;
   * otherwise the largest batch seen in the last PROVEN_TTL_MS (at least 1), a lower bound.
   */
  capacity: { calls: number; known: boolean };
  /** The largest batch the engine was seen running in the last PROVEN_TTL_MS (gradient: the limit). */
  proven: number;
  /** The replica is at its capacity now: the engine runs its capacity, or (gradient) calls wait for our slots. */
  saturated: boolean;
  /** Smoothed latency of its recent successful attempts, ms (sent → reply read); undefined before one. */
  recentLatencyMs: number | undefined;
  /** The rate the engine has shown it completes calls at (engine law: shown-rate.ts). */
  shown?: ShownRate | undefined;
  /**
   * Whether the engine's gauges are believed: `distrusted` while they contradict our own in-flight count
   * (the replica is then steered and estimated as one without metrics); undefined without metrics.
   */
  gauge?: 'trusted' | 'distrusted' | undefined;
}

export interface InflightControl {
  readonly limit: number;
  readonly law: ControlLaw;
  observe(sample: ControlSample): void;
  /** The limiter's view (its queue) and what to call when the limit rises (admit waiters). */
  attach(load: () => ControlLoad, onRaise: () => void): void;
  snapshot(): ControlSnapshot;
}

export interface InflightControlOptions {
  ceiling: number;
  /** The replica's engine metrics; undefined = gradient only (`JUDGE_ENGINE_METRICS=off`). */
  scraper?: EngineScraper | undefined;
  /** Largest event-loop lag between two epoch-ms times (loop-lag.ts). */
  lagMs: (fromMs: number, toMs: number) => number;
  now?: (() => number) | undefined;
}

const clamp = (v: number, lo: number, hi: number): number => Math.min(hi, Math.max(lo, v));

function median(values: number[]): number {
  const sorted = values.slice().sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}

/**
 * Whether the requests that left the engine's queue between two readings waited there long (vLLM's queue
 * histogram): at least QUEUE_EVIDENCE of a recent call. A queue of step boundaries is gone within a step.
 * True when the engine does not publish it (or no call finished yet).
 */
function queuedLong(
  a: EngineReading['queueTime'] | undefined,
  b: EngineReading['queueTime'] | undefined,
  recentLatencyMs: number | undefined,
): boolean {
  if (a === undefined || b === undefined || recentLatencyMs === undefined) return true;
  const count = b.count - a.count;
  if (count <= 0) return true;
  return ((b.sumS - a.sumS) * 1000) / count >= QUEUE_EVIDENCE * recentLatencyMs;
}

/**
 * The snapshot of a replica without a fresh engine reading: its engine probed, stale (`engine`), or
 * without metrics (`none`: the gradient's limit of `slots` models it).
 */
function unreadSnapshot(
  state: ScrapeState,
  slots: number,
  load: ControlLoad,
  known: { engineCapacity: number | undefined; proven: number; recentLatencyMs: number | undefined },
): ControlSnapshot {
  const metrics = state === 'engine';
  return {
    law: state === 'probing' ? 'engine' : 'gradient',
    metrics,
    engine: undefined,
    capacity:
      !metrics || known.engineCapacity !== undefined
        ? { calls: known.engineCapacity ?? slots, known: true }
        : { calls: Math.max(1, known.proven), known: false },
    // (While probed, the limit is INITIAL and the replica is modelled by it.)
    proven: metrics ? Math.max(1, known.proven) : slots,
    // An engine whose readings are stale (or not yet in) is not measured: the limit alone says nothing of
    // its capacity.
    saturated: !metrics && load.waiting > 0 && load.inflight >= slots,
    recentLatencyMs: known.recentLatencyMs,
  };
}

/**
 * Updates `trust` with one reading (the engine's batch + queue `counted` while we hold `ours` calls) and
 * returns whether the gauge is believed now: GAUGE_STRIKES contradicting readings in a row distrust it,
 * as many agreeing ones (with calls of ours in flight) trust it again; other readings prove nothing.
 */
function believe(
  trust: { distrusted: boolean; strikes: number },
  counted: number,
  ours: number,
  engineCapacity: number | undefined,
): boolean {
  const h = Math.max(1, Math.ceil(HEADROOM * Math.max(counted, engineCapacity ?? 0)));
  const contradicts = ours >= GAUGE_MIN_OURS && counted + Math.max(h, Math.ceil(GAUGE_SLACK * ours)) < ours;
  const agrees = ours > 0 && counted >= ours - h;
  if (trust.distrusted ? agrees : contradicts) trust.strikes += 1;
  else if (trust.distrusted ? contradicts : agrees) trust.strikes = 0;
  if (trust.strikes >= GAUGE_STRIKES) {
    trust.distrusted = !trust.distrusted;
    trust.strikes = 0;
  }
  return !trust.distrusted;
}

/**
 * Our calls in flight, as a gauge reading is judged against them; 0 (nothing proven) when this process's
 * event loop lagged while the reading was taken: our count then holds replies not read yet.
 */
function oursUnlessLagged(lagMs: number, recentLatencyMs: number | undefined, load: ControlLoad): number {
  return lagMs > Math.max(LAG_FLOOR_MS, LAG_SHARE * (recentLatencyMs ?? 0)) ? 0 : load.inflight;
}

/** The snapshot of a replica with a fresh engine reading its control believes. */
function readSnapshot(
  reading: EngineReading,
  known: {
    engineCapacity: number | undefined;
    proven: number;
    provenNow: number;
    recentLatencyMs: number | undefined;
  },
  shown: ShownRate,
): ControlSnapshot {
  const { kind, running, waiting, kvUsage, queueTime } = reading;
  const { engineCapacity } = known;
  return {
    law: 'engine',
    metrics: true,
    engine: { kind, running, waiting, kvUsage, queueTime },
    capacity:
      engineCapacity === undefined
        ? { calls: Math.max(1, known.proven), known: false }
        : { calls: engineCapacity, known: true },
    proven: Math.max(1, known.provenNow),
    saturated: engineCapacity !== undefined && running >= engineCapacity,
    recentLatencyMs: known.recentLatencyMs,
    shown,
    gauge: 'trusted',
  };
}

/** The lowest latency per kind over the current and the previous BASELINE_PERIOD_MS. */
function createBaselines(now: () => number) {
  const current = new Map<string, number>();
  let previous = new Map<string, number>();
  let periodStart = now();
  const roll = (): void => {
    if (now() - periodStart < BASELINE_PERIOD_MS) return;
    previous = new Map(current);
    current.clear();
    periodStart = now();
  };
  return {
    get(kind: string): number | undefined {
      roll();
      const a = current.get(kind);
      const b = previous.get(kind);
      return a === undefined ? b : b === undefined ? a : Math.min(a, b);
    },
    add(kind: string, ms: number): void {
      roll();
      // Bounded: kinds are roles (a handful); an unexpected flood of kinds keeps the first 64.
      if (!current.has(kind) && current.size >= 64) return;
      current.set(kind, Math.min(current.get(kind) ?? Infinity, ms));
    },
  };
}

export function createInflightControl(options: InflightControlOptions): InflightControl {
  const { ceiling, scraper, lagMs } = options;
  const now = options.now ?? Date.now;
  let limit = scraper === undefined ? ceiling : Math.min(ceiling, INITIAL);
  let load: () => ControlLoad = () => ({ inflight: 0, waiting: 0 });
  let onRaise = (): void => {};
  let slowStart = true;
  let lastChangeAt = -Infinity;
  /** The engine's capacity: the largest batch it ran while queueing (recent readings), and the last. */
  let engineCapacity: number | undefined;
  const queueing: Array<{ running: number; at: number }> = [];
  /** The previous reading's batch, queue and queue-time histogram. */
  let previous: Pick<EngineReading, 'running' | 'waiting' | 'queueTime'> | undefined;
  let proven = { calls: 0, at: -Infinity };
  let recentLatencyMs: number | undefined;
  const shown = createShownRate(now);
  const baselines = createBaselines(now);
  let window: number[] = [];
  let windowStart = now();
  const trust = { distrusted: false, strikes: 0 };

  const set = (next: number): void => {
    const clamped = clamp(next, 1, ceiling);
    if (clamped === limit) return;
    const raised = Math.floor(clamped) > Math.floor(limit);
    limit = clamped;
    lastChangeAt = now();
    if (raised) onRaise();
  };

  const binding = (): boolean => {
    const l = load();
    return l.waiting > 0 && l.inflight >= Math.floor(limit);
  };

  const onReading = (reading: EngineReading | undefined): void => {
    if (reading === undefined) {
      // Never answered with engine metrics: the gradient takes over, from the ceiling.
      if (scraper?.state === 'none' && slowStart) set(ceiling);
      return;
    }
    const { running, waiting, kvUsage } = reading;
    const ours = oursUnlessLagged(lagMs(reading.requestedAt, now()), recentLatencyMs, load());
    if (!believe(trust, running + waiting, ours, engineCapacity)) {
      if (slowStart) set(ceiling); // as without metrics: from the ceiling (its capacity never shown)
      return;
    }
    shown.reading(reading);
    if (running >= proven.calls || now() - proven.at > PROVEN_TTL_MS) proven = { calls: running, at: now() };
    // Queueing is the evidence of capacity when it is deep and lasts: the engine queued at two readings in
    // a row, did not take the queue into its batch in between, and the requests it let in had waited. A
    // queue that does not last is what arrived mid-step, or while the engine's front end was busy.
    const h = Math.max(1, Math.ceil(HEADROOM * Math.max(running, engineCapacity ?? 0)));
    const before = previous;
    previous = { running, waiting, queueTime: reading.queueTime };
    const deep = Math.max(QUEUE_MIN, 2 * h);
    const lasting =
      waiting >= deep &&
      before !== undefined &&
      before.waiting >= deep &&
      running <= before.running + h &&
      queuedLong(before.queueTime, reading.queueTime, recentLatencyMs);
    if (lasting) {
      queueing.push({ running: Math.max(running, before.running), at: reading.at });
      while (queueing.length > 0 && (queueing[0]?.at ?? 0) < reading.at - CAPACITY_WINDOW_MS)
        queueing.shift();
      if (queueing.length > 64) queueing.shift();
      engineCapacity = Math.max(...queueing.map((q) => q.running));
      slowStart = false;
      const ours = load().inflight;
      const share = Math.min(1, ours / Math.max(1, running + waiting));
      const target = Math.max(1, (Math.max(running, before.running) + h) * (ours > 0 ? share : 1));
      if (target < limit) set(target);
      return;
    }
    // Slow start grows through a transient queue (W ≤ h); afterwards only an empty queue says the batch
    // has room.
    if (waiting > (slowStart ? h : 0)) return;
    if ((kvUsage ?? 0) >= KV_HIGH || reading.requestedAt <= lastChangeAt || !binding()) return;
    // Our calls must be at the engine: a batch with room while many of ours are still on the wire (or
    // answered and not read yet: a busy machine) is not room for more.
    if (running + waiting < load().inflight - h) return;
    set(slowStart ? 2 * limit : limit + h);
    if (limit >= ceiling && running >= Math.floor(limit) - h) engineCapacity ??= ceiling;
  };
  scraper?.subscribe(onReading);

  const provenNow = (): number => (now() - proven.at > PROVEN_TTL_MS ? 0 : proven.calls);

  const engineLaw = (): boolean =>
    scraper?.state !== 'none' && scraper?.fresh() !== undefined && !trust.distrusted;

  const gradient = (sample: ControlSample): void => {
    const end = sample.headersAt ?? sample.endedAt;
    const rtt = end - sample.sentAt;
    if (sample.result === 'other' || !(rtt >= 0)) return;
    const base = baselines.get(sample.kind);
    const tainted = lagMs(sample.sentAt, end) > Math.max(LAG_FLOOR_MS, LAG_SHARE * (base ?? rtt));
    if (tainted) return;
    if (sample.result === 'ok') baselines.add(sample.kind, rtt);
    // While the engine law steers, the gradient only learns its baselines.
    if (base === undefined || base <= 0 || engineLaw()) return;
    window.push(rtt / base);
    if (window.length < WINDOW_SAMPLES || now() - windowStart < WINDOW_MS) return;
    const ratio = median(window);
    window = [];
    windowStart = now();
    if (ratio > TOLERANCE) set(limit * Math.max(0.5, TOLERANCE / ratio));
    else if (binding()) set(limit + Math.max(1, Math.sqrt(limit)));
  };

  return {
    get limit() {
      return Math.max(1, Math.floor(limit));
    },
    get law() {
      return engineLaw() || scraper?.state === 'probing' ? 'engine' : 'gradient';
    },
    observe(sample) {
      if (sample.result === 'ok') {
        const ms = sample.endedAt - sample.sentAt;
        recentLatencyMs =
          recentLatencyMs === undefined ? ms : recentLatencyMs + RTT_ALPHA * (ms - recentLatencyMs);
        shown.attempt(sample);
      }
      gradient(sample);
    },
    attach(nextLoad, nextOnRaise) {
      load = nextLoad;
      onRaise = nextOnRaise;
    },
    snapshot() {
      const reading = scraper?.fresh();
      const slots = Math.max(1, Math.floor(limit));
      const l = load();
      if (trust.distrusted) {
        const known = { engineCapacity: undefined, proven: slots, recentLatencyMs };
        return { ...unreadSnapshot('none', slots, l, known), gauge: 'distrusted' };
      }
      if (reading === undefined || scraper?.state === 'none') {
        const known = { engineCapacity, proven: provenNow(), recentLatencyMs };
        const snapshot = unreadSnapshot(scraper?.state ?? 'none', slots, l, known);
        return scraper?.state === 'engine' ? { ...snapshot, gauge: 'trusted' } : snapshot;
      }
      const known = { engineCapacity, proven: proven.calls, provenNow: provenNow(), recentLatencyMs };
      return readSnapshot(reading, known, shown.snapshot(engineCapacity));
    },
  };
}
