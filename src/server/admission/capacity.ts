/**
 * How many backend calls per second the judge fleet completes — from what its replicas do, not from the
 * in-flight ceiling (issue 29: 256 slots ÷ 1.05 s promised 243 calls/s to an engine that did 7.9).
 *
 * **Measured.** Per replica, calls completed per second while the replica was at its capacity (the engine
 * queued, or — without engine metrics — calls waited for its slots): sampled at most every SAMPLE_MS,
 * counted in SLOT_MS slots over WINDOW_MS, leaving out the pipeline filling after saturation began — at
 * least max(SETTLE_MIN_MS, the replica's recent call latency), and until as many calls completed as it had
 * in flight then (at most its limit now): that latency may be stale, as in a storm of requests whose first
 * calls take several unloaded latencies, and its seconds without completions are no rate — and every interval in
 * which this process's event loop lagged more than LAG_LIMIT_MS (our own stall is not the engine's
 * rate). Valid with ≥ max(MIN_VALID_MS, 2 × the recent call latency) of such time — calls sent together
 * (a storm's first 256) come back together, in waves one latency apart, and a shorter window measures a
 * wave or the trough between two — and ≥ MIN_COMPLETIONS calls; kept MEASURED_TTL_MS after
 * it was last valid. A measurement is the rate — it lowers the estimate as well as it raises it.
 *
 * **Before a measurement**, per replica, from its in-flight control (src/judge/inflight-control.ts):
 * - without engine metrics (`fixed`, `aimd`, the latency gradient): its limit ÷ the unloaded call latency,
 *   taken as certain (the model admission always had; the gradient lowers the limit if latency says so);
 * - with engine metrics: a range. `high` = its capacity (the engine's batch when it queued, else the
 *   ceiling) ÷ the unloaded latency; `low` = the rate the engine has shown (inflight-control.ts `shown`:
 *   Little's law over recent attempts, the engine's load when each was sent over its latency, at the most
 *   load it was given), or — before one at its largest batch — that batch at max(its recent latency, twice
 *   the unloaded one): a recent latency of calls sent into a smaller batch (unloaded probes, a filling
 *   pipeline) promised 57 calls/s of an 8-slot engine that did 42, and 7 of 41 admitted judgments timed out.
 *   Once the engine's capacity is known and its rate over attempts that ran at it throughout (8 of them),
 *   that rate is certain. Uncertain until then: admission admits what fits at `low`, refuses what does not
 *   fit at `high`, and holds the rest (hold.ts) until the measurement comes (an engine that queues is
 *   measured within a call latency plus MIN_VALID_MS).
 * Replicas whose circuit is open, or that are quarantined, count for nothing while others serve.
 * `observe` must be called on the events that move the replicas (calls ending, admission changes).
 */
import type { ReplicaSnapshot } from '../../judge/types.js';

/** Minimum time between two samples of the replicas, ms. */
export const SAMPLE_MS = 50;
const SLOT_MS = 100;
export const WINDOW_MS = 10_000;
const SLOTS = WINDOW_MS / SLOT_MS;
export const SETTLE_MIN_MS = 200;
export const MIN_VALID_MS = 300;
export const MIN_COMPLETIONS = 8;
export const MEASURED_TTL_MS = 60_000;
/** Event-loop lag above which an interval is not counted, ms. */
export const LAG_LIMIT_MS = 50;

/** The fleet's drain rate, calls per second: a range while uncertain. */
export interface CapacityEstimate {
  /** What the replicas have shown they do. */
  low: number;
  /** The most they plausibly do. Equal to `low` when certain. */
  high: number;
  certain: boolean;
  /** `measured` when every serving replica's rate is measured, `engine` while a range, else `model`. */
  source: 'measured' | 'engine' | 'model';
  replicas: ReplicaCapacity[];
  /** The longest recent call latency of the serving replicas, ms (under load); undefined before one. */
  recentLatencyMs: number | undefined;
  /**
   * Backend calls the serving replicas' in-flight limits allow now, twice over (a queue as long again):
   * work that can be admitted while the capacity is uncertain, so the engines fill up and are measured.
   */
  probeCalls: number;
}

export interface ReplicaCapacity {
  backend: string;
  replica: string;
  low: number;
  high: number;
  /** Measured calls/s at capacity; undefined before a measurement. */
  measured: number | undefined;
}

export interface CapacityOptions {
  /** The default backend's replicas (empty for the offline backend). */
  replicas: () => readonly ReplicaSnapshot[];
  /** Largest event-loop lag between two epoch-ms times (src/judge/loop-lag.ts); default none. */
  lagMs?: ((fromMs: number, toMs: number) => number) | undefined;
  now?: (() => number) | undefined;
}

interface Track {
  at: number;
  completions: number;
  saturated: boolean;
  saturatedSince: number | undefined;
  /** Completions, and calls in flight, when saturation began: the pipeline has filled once they are back. */
  saturatedFrom: { completions: number; inflight: number } | undefined;
  slotIndex: Float64Array;
  slotCalls: Float64Array;
  slotMs: Float64Array;
  measured: { rate: number; at: number } | undefined;
}

const completionsOf = (r: ReplicaSnapshot): number =>
  (r.attempts.get('ok') ?? 0) + (r.attempts.get('unparsable') ?? 0);

export class CapacityEstimator {
  readonly #replicas: () => readonly ReplicaSnapshot[];
  readonly #lagMs: (fromMs: number, toMs: number) => number;
  readonly #now: () => number;
  readonly #tracks = new Map<string, Track>();
  #sampledAt = -Infinity;

  constructor(options: CapacityOptions) {
    this.#replicas = options.replicas;
    this.#lagMs = options.lagMs ?? (() => 0);
    this.#now = options.now ?? Date.now;
  }

  /** Samples the replicas (at most every SAMPLE_MS); call on every event that may change them. */
  observe(): void {
    const now = this.#now();
    if (now - this.#sampledAt < SAMPLE_MS) return;
    this.#sampledAt = now;
    for (const r of this.#replicas()) this.#sample(`${r.backend}\0${r.replica}`, r, now);
  }

  /**
   * The drain rate, calls/s, given the unloaded call latency (admission's, ms; `coldMs` before any). The
   * offline backend (no replicas) is `fallbackSlots` ÷ that latency.
   */
  estimate(unloadedMs: number, fallbackSlots: number): CapacityEstimate {
    this.observe();
    const now = this.#now();
    const all = this.#replicas();
    const up = all.filter((r) => r.state !== 'open');
    const serving = up.filter((r) => r.quarantined !== true);
    // Every circuit open is a transient (the breaker probes within seconds): count them all then.
    const counted = serving.length > 0 ? serving : up.length > 0 ? up : all;
    if (all.length === 0) {
      const rate = (fallbackSlots * 1000) / unloadedMs;
      return {
        low: rate,
        high: rate,
        certain: true,
        source: 'model',
        replicas: [],
        recentLatencyMs: undefined,
        probeCalls: 2 * fallbackSlots,
      };
    }
    let low = 0;
    let high = 0;
    let measuredAll = counted.length > 0;
    let anyRange = false;
    let recentLatencyMs: number | undefined;
    let probeCalls = 0;
    const replicas: ReplicaCapacity[] = [];
    for (const r of counted) {
      probeCalls += 2 * r.limit;
      const recent = r.control?.recentLatencyMs;
      if (recent !== undefined) recentLatencyMs = Math.max(recentLatencyMs ?? 0, recent);
      const track = this.#tracks.get(`${r.backend}\0${r.replica}`);
      const measured =
        track?.measured !== undefined && now - track.measured.at <= MEASURED_TTL_MS
          ? track.measured.rate
          : undefined;
      const range =
        measured === undefined ? modelled(r, unloadedMs) : { low: measured, high: measured, certain: true };
      if (measured === undefined) measuredAll = false;
      if (!range.certain) anyRange = true;
      low += range.low;
      high += range.high;
      replicas.push({ backend: r.backend, replica: r.replica, low: range.low, high: range.high, measured });
    }
    return {
      low,
      high: Math.max(low, high),
      certain: !anyRange,
      source: measuredAll ? 'measured' : anyRange ? 'engine' : 'model',
      replicas,
      recentLatencyMs,
      probeCalls,
    };
  }

  #sample(key: string, r: ReplicaSnapshot, now: number): void {
    const completions = completionsOf(r);
    const saturated = r.control?.saturated ?? (r.waiting > 0 && r.inflight >= r.limit);
    let track = this.#tracks.get(key);
    if (track === undefined) {
      if (this.#tracks.size >= 256) return;
      track = {
        at: now,
        completions,
        saturated,
        saturatedSince: saturated ? now : undefined,
        saturatedFrom: saturated ? { completions, inflight: r.inflight } : undefined,
        slotIndex: new Float64Array(SLOTS).fill(-1),
        slotCalls: new Float64Array(SLOTS),
        slotMs: new Float64Array(SLOTS),
        measured: undefined,
      };
      this.#tracks.set(key, track);
      return;
    }
    const settleMs = Math.max(SETTLE_MIN_MS, r.control?.recentLatencyMs ?? 0);
    const since = track.saturatedSince;
    const from = track.saturatedFrom;
    // The calls in flight when saturation began have come back (FIFO enough): those that complete now
    // were sent at capacity. (At most the limit now: one the gradient cut is refilled sooner.)
    const turned =
      from !== undefined && track.completions - from.completions >= Math.min(from.inflight, r.limit);
    const counts =
      track.saturated &&
      saturated &&
      since !== undefined &&
      track.at >= since + settleMs &&
      turned &&
      this.#lagMs(track.at, now) <= LAG_LIMIT_MS;
    if (counts) {
      const slot = Math.floor(now / SLOT_MS);
      const i = slot % SLOTS;
      if (track.slotIndex[i] !== slot) {
        track.slotIndex[i] = slot;
        track.slotCalls[i] = 0;
        track.slotMs[i] = 0;
      }
      track.slotCalls[i] = (track.slotCalls[i] ?? 0) + Math.max(0, completions - track.completions);
      track.slotMs[i] = (track.slotMs[i] ?? 0) + (now - track.at);
      const window = this.#window(track, slot);
      const validMs = Math.max(MIN_VALID_MS, 2 * (r.control?.recentLatencyMs ?? 0));
      if (window.ms >= validMs && window.calls >= MIN_COMPLETIONS) {
        track.measured = { rate: (window.calls * 1000) / window.ms, at: now };
      }
    }
    track.saturatedSince = saturated ? (since ?? now) : undefined;
    track.saturatedFrom = saturated ? (from ?? { completions, inflight: r.inflight }) : undefined;
    track.saturated = saturated;
    track.completions = completions;
    track.at = now;
  }

  #window(track: Track, current: number): { calls: number; ms: number } {
    let calls = 0;
    let ms = 0;
    for (let i = 0; i < SLOTS; i++) {
      const slot = track.slotIndex[i] ?? -1;
      if (slot > current - SLOTS) {
        calls += track.slotCalls[i] ?? 0;
        ms += track.slotMs[i] ?? 0;
      }
    }
    return { calls, ms };
  }
}

/** A replica's rate before it was measured (see the module comment). */
function modelled(r: ReplicaSnapshot, unloadedMs: number): { low: number; high: number; certain: boolean } {
  const control = r.control;
  if (control === undefined || !control.metrics) {
    // A replica whose metrics are still being probed (milliseconds after start-up) counts at its ceiling,
    // as every replica did before the engine law: its starting limit says nothing of the engine.
    const probing = control?.law === 'engine';
    const rate = ((probing ? r.maxInflight : r.limit) * 1000) / unloadedMs;
    return { low: rate, high: rate, certain: true };
  }
  const capacity = control.capacity.known ? control.capacity.calls : r.maxInflight;
  const shown = control.shown;
  // Its capacity known, and its rate while it ran at capacity (Little's law): that is its rate.
  if (control.capacity.known && shown?.fullCallsPerS !== undefined)
    return { low: shown.fullCallsPerS, high: shown.fullCallsPerS, certain: true };
  const high = (capacity * 1000) / unloadedMs;
  // What it has shown it does; before that, its largest batch at twice the unloaded latency (a batch is
  // slower per step than one sequence, and the recent latency may be of unloaded calls).
  const assumed = (control.proven * 1000) / Math.max(control.recentLatencyMs ?? 0, 2 * unloadedMs);
  const low =
    shown?.callsPerS === undefined
      ? assumed
      : shown.load >= control.proven
        ? shown.callsPerS
        : Math.max(shown.callsPerS, assumed);
  return { low: Math.min(low, high), high, certain: false };
}

/**
 * The drain-rate range admission decides on, calls/s (> 0): the replicas' estimate, capped by the RPM
 * (`rpm`, calls/s), raised by what the server measured while backlogged (`backlog`: every backend's calls,
 * a routing file's too, so it only raises: backlog-drain.ts).
 */
export function drainRange(
  estimate: CapacityEstimate,
  backlog: number | undefined,
  rpm: number,
): { low: number; high: number; certain: boolean } {
  const rate = (x: number): number =>
    Math.max(1e-3, Math.min(rpm, backlog === undefined ? x : Math.max(backlog, x)));
  const low = rate(estimate.low);
  const high = Math.max(low, rate(estimate.high));
  return { low, high, certain: estimate.certain || high - low < 1e-9 };
}
