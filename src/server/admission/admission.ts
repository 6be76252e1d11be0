/**
 * Admission control by predicted completion. Work is counted in backend calls: every admitted judgment
 * adds its graph's expected calls to the backlog until it ends, and the backlog drains at the measured
 * rate (calls/s). A request is admitted, whole or not at all, while its new work is predicted to finish
 * inside the request deadline; a refused one is told the predicted wait (Retry-After). Admitted judgments
 * are never dropped for capacity: they run (FIFO for a run slot) until they finish, time out at their
 * deadline, or their callers leave.
 *
 * Drain rate: the larger of a model and a measurement. Model: backend call slots / call latency
 * (smoothed over unloaded calls, those that finished while not backlogged; COLD_CALL_MS before any
 * such call),
 * capped by the backend's RPM. Measurement: calls completed per second over the last DRAIN_WINDOW_MS
 * during which the server stayed backlogged (judgments waiting for a run slot, or a backend saturated),
 * once it stayed so for MIN_BUSY_MS (an idle server measures its demand, not its capacity); the last one
 * stands in for LAST_DRAIN_TTL_MS. It raises the estimate above the model (more capacity than the
 * default backend's slots, e.g. routed backends); it never lowers it, being depressed by transients. A graph costs its smoothed measured calls per
 * judgment (its static call count until one finished), so a graph's drain rate in judgments/s is the
 * calls/s drain divided by that cost.
 *
 * Memory: the queue of judgments waiting for a run slot is bounded by `maxQueued` (sized from the
 * measured bytes per queued judgment, README "Configuration"), not by a small count.
 */
import { RewardError, toError } from '../../errors.js';
import type { CompiledGraph } from '../../judge/graph.js';
import type { JudgeObserver, ReplicaSnapshot } from '../../judge/types.js';
import type { Metrics } from '../observe/metrics.js';
import { CapacityEstimator, type CapacityEstimate } from './capacity.js';
import { HoldQueue, type HoldDecision, type HoldPlace } from './hold.js';
import { HighLaneBudget, LaneQueue, type Lane } from './priority.js';

/**
 * What admission needs to know about one unit of work: a judgment's graph, or a comparison's shape (its
 * calls per unit, and a stable key under which its measured cost is tracked).
 */
export type WorkShape = Pick<CompiledGraph, 'hash' | 'llmCallsPerJudgment' | 'criticalPathCalls'> & {
  /**
   * Decided without an LLM call (a degenerate candidate, `rejected_input`): it costs no backend calls and
   * its zero calls are not a measurement of its graph's cost (issue 32: they pulled the smoothed calls
   * per judgment down, so real work was charged (1 − r) of its cost).
   */
  readonly rejected?: boolean | undefined;
};

type Release = () => void;

interface Waiter {
  resolve(release: Release): void;
}

/** What admission publishes after every change (feeds the gauges). */
export interface AdmissionState {
  running: number;
  waiting: number;
  /** Seconds the admitted backlog needs at the current drain rate. */
  predictedWaitS: number;
  /** Estimated drain rate, backend calls per second. */
  drainCallsPerS: number;
  /** Requests held before admission (hold.ts). */
  held: number;
}

/** Why a request was refused, with what a log line and the client need. */
export interface Refusal {
  /** `priority`: a high-priority request beyond HIGH_PRIORITY_SHARE (priority.ts). */
  reason: 'deadline' | 'memory' | 'priority';
  /** Seconds until the backlog admitted so far has drained (what Retry-After says). */
  waitS: number;
  /** Seconds the backlog plus this request's new work would need. */
  completionS: number;
  /** Seconds the request had (the admission horizon: a fraction of its deadline). */
  horizonS: number;
  drainCallsPerS: number;
  /** Calls/s that would finish backlog plus this request inside the horizon. */
  neededCallsPerS: number;
  /** Judgments waiting for a run slot (memory bound). */
  waiting: number;
}

/**
 * Admit (`deadline`: the request's deadline extended to its hold window, when it fits only within that);
 * refuse; or — only when the caller can hold it (`DecideOptions.hold`) — hold it while the capacity is
 * uncertain (hold.ts).
 */
export type AdmissionDecision =
  { ok: true; deadline?: number | undefined } | { ok: false; refusal: Refusal; hold?: undefined };

/** `decideOrHold`'s answer: a decision, or hold the request (hold.ts). */
export type HoldableDecision = AdmissionDecision | { ok: false; hold: true; refusal?: undefined };

/** How a request may wait instead of being refused. */
export interface DecideOptions {
  /**
   * Absolute time (epoch ms) until which the client waits for an answer, past the request's deadline
   * (`/get_reward`: OpenRLHF's 180 s timeout, GET_REWARD_HOLD_MS): work that fits only by then is admitted
   * with its deadline moved there rather than refused.
   */
  holdUntil?: number | undefined;
}

/** One admitted judgment's share of the backlog; `done` once it ended (any way). */
export interface Ticket {
  done(calls: number | undefined): void;
  /** The lane its run-slot wait is in (priority.ts); normal unless admitted as high. */
  readonly lane?: Lane | undefined;
}

export interface AdmissionOptions {
  /** Judgments running at once (holding a run slot). */
  maxConcurrent: number;
  /** Judgments admitted and waiting for a run slot: the memory bound. */
  maxQueued: number;
  /**
   * Backend calls in flight at once when no replica is known (the offline backend): the modelled
   * capacity there.
   */
  callSlots: number;
  /** The default backend's replicas: the capacity is estimated from what they do (capacity.ts). */
  replicas?: (() => readonly ReplicaSnapshot[]) | undefined;
  /** Largest event-loop lag between two epoch-ms times (src/judge/loop-lag.ts), for capacity.ts. */
  lagMs?: ((fromMs: number, toMs: number) => number) | undefined;
  /** Calls per second the backend's rate limit allows (JUDGE_RPM / 60); default unlimited. */
  callRateLimit?: number | undefined;
  /** Epoch-ms clock (default Date.now). */
  now?: (() => number) | undefined;
  /** True while some backend has calls queueing for a slot (the backend is the bottleneck). */
  isBackendSaturated?: (() => boolean) | undefined;
  /** Called after every change of the running/waiting counts or of the backlog. */
  onChange?: ((state: AdmissionState) => void) | undefined;
  /** HIGH_PRIORITY_SHARE: the high lane's share of the drain rate (priority.ts). Default 0.1. */
  highShare?: number | undefined;
  /**
   * Checked by `admitWhole` before any new work is admitted: an error refuses the request (the token
   * budget, budget.ts). Default none.
   */
  gate?: (() => RewardError | undefined) | undefined;
}

/** Fraction of the request deadline the predicted completion must fit in (the rest absorbs error). */
export const ADMIT_WITHIN = 0.9;
/** Assumed latency of one backend call before any call finished, ms. */
export const COLD_CALL_MS = 1000;
const SLOT_MS = 250;
const DRAIN_WINDOW_MS = 20_000;
const SLOTS = DRAIN_WINDOW_MS / SLOT_MS;
/** Backlogged time needed before a drain measurement counts. */
const MIN_BUSY_MS = 8000;
/** How long the last drain measurement stands in once the server is no longer backlogged. */
const LAST_DRAIN_TTL_MS = 600_000;
/** Smoothing of call latency and of calls per judgment. */
const EWMA_ALPHA = 0.1;
/** Graph hashes whose call cost is tracked (inline graphs are client-chosen); then the static count. */
const MAX_TRACKED_GRAPHS = 256;
const MAX_RETRY_AFTER_S = 3600;
/** While requests are held, how often they are decided again without another event, ms. */
const HOLD_TICK_MS = 50;
/**
 * A request held this long for an uncertain capacity (or a tenth of its deadline, when sooner) is decided
 * on the proven capacity alone, ms.
 */
const MAX_UNCERTAIN_HOLD_MS = 5_000;

export class Admission {
  readonly maxConcurrent: number;
  readonly maxQueued: number;
  readonly callSlots: number;
  readonly callRateLimit: number;
  #running = 0;
  readonly #waiters = new LaneQueue<Waiter>();
  readonly high: HighLaneBudget;
  readonly gate: (() => RewardError | undefined) | undefined;
  readonly #now: () => number;
  readonly #isBackendSaturated: () => boolean;
  readonly #onChange: ((state: AdmissionState) => void) | undefined;
  /** Expected calls of every admitted judgment that has not ended. */
  #backlogCalls = 0;
  #callLatencyMs: number | undefined;
  readonly #callsPerJudgment = new Map<string, number>();
  // Ring of SLOT_MS slots over DRAIN_WINDOW_MS: calls finished in each.
  readonly #slotCalls = new Float64Array(SLOTS);
  readonly #slotIndex = new Float64Array(SLOTS).fill(-1);
  /** Since when the server has been seen backlogged at every observation; undefined when not. */
  #busySince: number | undefined;
  /** The last time the server was seen backlogged, and the end of the backlog before the current one. */
  #lastDrain: { callsPerS: number; at: number } | undefined;
  readonly #capacity: CapacityEstimator;
  readonly #holds: HoldQueue;
  #holdTimer: NodeJS.Timeout | undefined;
  #processing = false;

  constructor(options: AdmissionOptions) {
    this.maxConcurrent = options.maxConcurrent;
    this.maxQueued = options.maxQueued;
    this.callSlots = options.callSlots;
    this.callRateLimit = options.callRateLimit ?? Infinity;
    this.#now = options.now ?? Date.now;
    this.#isBackendSaturated = options.isBackendSaturated ?? (() => false);
    this.#onChange = options.onChange;
    this.high = new HighLaneBudget(options.highShare ?? 0.1, this.#now);
    this.gate = options.gate;
    this.#capacity = new CapacityEstimator({
      replicas: options.replicas ?? (() => []),
      lagMs: options.lagMs,
      now: this.#now,
    });
    this.#holds = new HoldQueue(
      (calls) => {
        this.#backlogCalls += calls;
      },
      (calls) => {
        this.#backlogCalls = Math.max(0, this.#backlogCalls - calls);
        this.#changed();
      },
    );
  }

  get running(): number {
    return this.#running;
  }

  get waiting(): number {
    return this.#waiters.size;
  }

  /** Expected backend calls of the admitted judgments that have not ended. */
  get backlogCalls(): number {
    return this.#backlogCalls;
  }

  /** Expected calls per judgment of `graph`: measured (smoothed), else its static count; 0 when rejected. */
  costOf(graph: WorkShape): number {
    if (graph.rejected === true) return 0;
    return this.#callsPerJudgment.get(graph.hash) ?? graph.llmCallsPerJudgment;
  }

  /** Smoothed unloaded call latency, ms; undefined before any call finished unloaded (plan.ts). */
  callLatencyMs(): number | undefined {
    return this.#callLatencyMs;
  }

  /**
   * Estimated drain rate in backend calls per second (> 0): the fleet's proven rate (capacity.ts; the
   * lower end while its capacity is still being measured), raised by a backlog measurement.
   */
  drainCallsPerS(): number {
    return this.#drain().low;
  }

  /** The capacity estimate behind the drain rate (plan.ts shows it). */
  capacity(): CapacityEstimate & { low: number; high: number } {
    const d = this.#drain();
    return { ...d.estimate, low: d.low, high: d.high, certain: d.certain };
  }

  /** The drain-rate range, calls/s: the replicas' estimate, capped by the RPM, raised by a measurement. */
  #drain(): { low: number; high: number; certain: boolean; estimate: CapacityEstimate } {
    const now = this.#now();
    const estimate = this.#capacity.estimate(this.#callLatencyMs ?? COLD_CALL_MS, this.callSlots);
    let measured = this.#measuredDrain(now);
    if (
      measured === undefined &&
      this.#lastDrain !== undefined &&
      now - this.#lastDrain.at < LAST_DRAIN_TTL_MS
    )
      measured = this.#lastDrain.callsPerS;
    // The backlog measurement counts every backend's calls (a routing file's too): it only raises.
    const rate = (x: number): number =>
      Math.max(1e-3, Math.min(this.callRateLimit, measured === undefined ? x : Math.max(measured, x)));
    const low = rate(estimate.low);
    const high = Math.max(low, rate(estimate.high));
    return { low, high, certain: estimate.certain || high - low < 1e-9, estimate };
  }

  /** A graph's drain rate in judgments per second. */
  drainJudgmentsPerS(graph: WorkShape): number {
    return this.drainCallsPerS() / Math.max(1, this.costOf(graph));
  }

  /** Seconds the admitted backlog needs at the current drain rate. */
  predictedWaitS(): number {
    return this.#backlogCalls / this.drainCallsPerS();
  }

  /** Requests held while the capacity is measured (hold.ts). */
  get held(): number {
    return this.#holds.size;
  }

  /** True when a one-judgment request of `graph` with a full deadline would be refused (or held) now. */
  saturated(graph: WorkShape, deadlineMs: number): boolean {
    return !this.decideOrHold([graph], deadlineMs).ok;
  }

  /**
   * Whether the new judgments (one entry per judgment) fit: their run-slot wait within the memory bound,
   * and the backlog plus their calls drained inside ADMIT_WITHIN of `remainingMs` — at the proven drain
   * rate to admit, at the optimistic one to refuse; in between (the capacity still being measured) the
   * request is held when `options.hold`, else decided at the optimistic rate. With `options.holdUntil`
   * the horizon extends to it (the decision then carries the new deadline). With nothing admitted or held
   * ahead a request is always admitted (refusing it would refuse it forever); its unfinished items time
   * out.
   */
  decide(
    graphs: readonly WorkShape[],
    remainingMs: number,
    lane: Lane = 'normal',
    options: DecideOptions = {},
  ): AdmissionDecision {
    const d = this.#decide(graphs, remainingMs, lane, options, 'upper');
    if (d.ok) return d;
    return d.refusal === undefined ? { ok: true } : { ok: false, refusal: d.refusal };
  }

  /**
   * `decide`, for a caller that can hold the request (`hold`): an uncertain capacity holds what fits only
   * at its upper end, and a request that arrives while others are held is held behind them.
   */
  decideOrHold(
    graphs: readonly WorkShape[],
    remainingMs: number,
    lane: Lane = 'normal',
    options: DecideOptions = {},
  ): HoldableDecision {
    // First come, first served: behind held requests, a new one is held too.
    if (lane === 'normal' && this.#holds.size > 0 && graphs.length > 0) return { ok: false, hold: true };
    return this.#decide(graphs, remainingMs, lane, options, 'hold');
  }

  #decide(
    graphs: readonly WorkShape[],
    remainingMs: number,
    lane: Lane,
    options: DecideOptions,
    /** While the capacity is uncertain: hold what fits only its upper end, or decide at one end. */
    uncertain: 'hold' | 'upper' | 'lower',
  ): HoldableDecision {
    const n = graphs.length;
    if (n === 0) return { ok: true };
    let calls = 0;
    let critical = 0;
    for (const g of graphs) {
      calls += this.costOf(g);
      if (g.rejected !== true) critical = Math.max(critical, g.criticalPathCalls);
    }
    const now = this.#now();
    this.#observe(now);
    const { low, high, certain, estimate } = this.#drain();
    // The last judgment admitted still needs its critical path after its first call drained, at the
    // latency calls have now (under load a batch is slower than one call alone).
    const callS = Math.max(this.#callLatencyMs ?? COLD_CALL_MS, estimate.recentLatencyMs ?? 0) / 1000;
    const completionAt = (drain: number): number =>
      (this.#backlogCalls + calls) / drain + Math.max(0, critical - 1) * callS;
    const horizonS = (ADMIT_WITHIN * Math.max(0, remainingMs)) / 1000;
    const extended = options.holdUntil !== undefined && options.holdUntil > now + remainingMs;
    const holdHorizonS =
      extended && options.holdUntil !== undefined
        ? (ADMIT_WITHIN * (options.holdUntil - now)) / 1000
        : horizonS;
    const freeSlots = Math.max(0, this.maxConcurrent - this.#running);
    const queuedAfter = this.#waiters.size + Math.max(0, n - freeSlots);
    const refusal = (reason: Refusal['reason'], drain: number): HoldableDecision => ({
      ok: false,
      refusal: {
        reason,
        waitS: this.#backlogCalls / drain,
        completionS: completionAt(drain),
        horizonS: holdHorizonS,
        drainCallsPerS: drain,
        neededCallsPerS: holdHorizonS > 0 ? (this.#backlogCalls + calls) / holdHorizonS : Infinity,
        waiting: this.#waiters.size,
      },
    });
    if (queuedAfter > this.maxQueued) return refusal('memory', low);
    // High work goes ahead of the queued backlog: its own budget decides, not the backlog's completion.
    // HIGH_PRIORITY_SHARE=0 turns the lane off (high requests are normal ones).
    // Its share is of the optimistic rate while the capacity is measured: high work is small, and a lane
    // that refused a human's curl until the fleet was calibrated would be no lane.
    if (lane === 'high' && this.high.share > 0) {
      if (this.high.fits(calls, high, horizonS)) return { ok: true };
      const denied = refusal('priority', high);
      if (!denied.ok && denied.refusal !== undefined)
        denied.refusal.waitS = this.high.waitS(calls, high, horizonS);
      return denied;
    }
    if (this.#backlogCalls <= 0) return { ok: true };
    if (completionAt(low) <= horizonS) return { ok: true };
    // While the capacity is measured, enough work to fill the engines (and their ramp) is admitted: without
    // it they would never fill up, and never be measured.
    if (!certain && uncertain === 'hold' && this.#backlogCalls + calls <= estimate.probeCalls)
      return { ok: true };
    const upper = certain || uncertain === 'lower' ? low : high;
    if (completionAt(upper) > holdHorizonS) return refusal('deadline', upper);
    if (certain || uncertain !== 'hold') {
      // It fits, but only by the hold window (`holdUntil`): admitted with its deadline moved there.
      return completionAt(upper) <= horizonS ? { ok: true } : { ok: true, deadline: options.holdUntil };
    }
    return { ok: false, hold: true };
  }

  /**
   * Holds a request that `decide` answered with `hold`: it is decided again, in arrival order, whenever
   * the estimate or the backlog changes (and every HOLD_TICK_MS). `deadline` is its own (absolute);
   * `options.holdUntil` as for `decide`. After MAX_UNCERTAIN_HOLD_MS (or a tenth of its deadline) it is
   * decided on the proven rate alone: admitted if it fits there, else refused.
   */
  hold(
    graphs: readonly WorkShape[],
    deadline: number,
    signal: AbortSignal,
    lane: Lane = 'normal',
    options: DecideOptions = {},
  ): HoldPlace {
    const since = this.#now();
    const patience = Math.min(MAX_UNCERTAIN_HOLD_MS, (deadline - since) / 10);
    let calls = 0;
    for (const g of graphs) calls += this.costOf(g);
    const decideHeld = (): HoldDecision => {
      const now = this.#now();
      const d = this.#decide(
        graphs,
        deadline - now,
        lane,
        options,
        now - since < patience ? 'hold' : 'lower',
      );
      if (d.ok) return { kind: 'admit', deadline: d.deadline ?? deadline };
      if (d.refusal === undefined) return { kind: 'wait' };
      return { kind: 'refuse', refusal: d.refusal };
    };
    const place = this.#holds.hold(calls, decideHeld, signal, Math.max(deadline, options.holdUntil ?? 0));
    this.#scheduleHolds();
    return place;
  }

  /** Decides the held requests again, and keeps a timer doing so while any is held. */
  #processHolds(): void {
    if (this.#holds.size === 0 || this.#processing) return;
    this.#processing = true;
    try {
      this.#holds.process();
    } finally {
      this.#processing = false;
    }
    this.#scheduleHolds();
  }

  #scheduleHolds(): void {
    if (this.#holds.size === 0 || this.#holdTimer !== undefined) return;
    this.#holdTimer = setTimeout(() => {
      this.#holdTimer = undefined;
      this.#processHolds();
    }, HOLD_TICK_MS);
    this.#holdTimer.unref();
  }

  /** Retry-After for a refusal: the predicted wait, whole seconds, 1 s – 1 h. */
  static retryAfterSeconds(refusal: Refusal): number {
    return Math.min(MAX_RETRY_AFTER_S, Math.max(1, Math.ceil(refusal.waitS)));
  }

  /** Adds one admitted judgment of `graph` to the backlog; call `done` exactly once when it ended. */
  admit(graph: WorkShape, lane: Lane = 'normal'): Ticket {
    const cost = this.costOf(graph);
    this.#backlogCalls += cost;
    const laneOf: Lane = lane === 'high' && this.high.share > 0 ? 'high' : 'normal';
    if (laneOf === 'high') this.high.take(cost, this.#drain().high);
    let finished = false;
    return {
      lane: laneOf,
      done: (calls) => {
        if (finished) return;
        finished = true;
        this.#backlogCalls = Math.max(0, this.#backlogCalls - cost);
        if (calls !== undefined && graph.rejected !== true) this.#recordCost(graph.hash, calls);
        this.#changed();
      },
    };
  }

  /** One backend call finished (any outcome): feeds the drain rate and, when unloaded, the call latency. */
  recordCall(latencyMs: number): void {
    const now = this.#now();
    const busy = this.#observe(now);
    this.#capacity.observe();
    this.#processHolds();
    const slot = Math.floor(now / SLOT_MS);
    const i = slot % SLOTS;
    if (this.#slotIndex[i] !== slot) {
      this.#slotIndex[i] = slot;
      this.#slotCalls[i] = 0;
    }
    this.#slotCalls[i] = (this.#slotCalls[i] ?? 0) + 1;
    // Under saturation a call's latency includes its wait for a backend slot (and the server's own stalls
    // under a storm of requests): not a service time.
    if (!busy && Number.isFinite(latencyMs) && latencyMs >= 0)
      this.#callLatencyMs =
        this.#callLatencyMs === undefined
          ? latencyMs
          : this.#callLatencyMs + EWMA_ALPHA * (latencyMs - this.#callLatencyMs);
  }

  /** Samples the backlogged state (every call, admission and slot change); true when backlogged. */
  #observe(now: number): boolean {
    const busy = this.#waiters.size > 0 || this.#isBackendSaturated();
    if (busy) {
      this.#busySince ??= now;
    } else {
      if (this.#busySince !== undefined) {
        const measured = this.#measuredDrain(now);
        if (measured !== undefined) this.#lastDrain = { callsPerS: measured, at: now };
      }
      this.#busySince = undefined;
    }
    return busy;
  }

  /**
   * Takes a run slot, waiting FIFO when all are busy. Synchronous bookkeeping: the judgment counts as
   * running or waiting as soon as this returns. Rejects with the signal's reason if it aborts while waiting.
   */
  acquire(signal: AbortSignal, lane: Lane = 'normal'): Promise<Release> {
    if (signal.aborted) return Promise.reject(toError(signal.reason));
    if (this.#running < this.maxConcurrent) {
      this.#running += 1;
      this.#changed();
      return Promise.resolve(this.#releaser());
    }
    return new Promise<Release>((resolve, reject) => {
      const waiter: Waiter = {
        resolve: (release) => {
          signal.removeEventListener('abort', onAbort);
          resolve(release);
        },
      };
      const onAbort = (): void => {
        if (this.#waiters.delete(waiter)) this.#changed();
        reject(toError(signal.reason));
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.#waiters.add(waiter, lane);
      this.#changed();
    });
  }

  /**
   * One admitted unit of work under its `ticket`: waits for a run slot, runs `work` in it, then `after`
   * outside it (metrics, transcripts). The ticket ends once both did, any way, with the calls `work` made.
   */
  async run<T extends { usage: { calls: number } }, R>(
    ticket: Ticket,
    signal: AbortSignal,
    work: () => Promise<T>,
    after: (result: T) => R | Promise<R>,
  ): Promise<R> {
    let calls: number | undefined;
    try {
      const release = await this.acquire(signal, ticket.lane);
      let result: T;
      try {
        result = await work();
      } finally {
        release();
      }
      calls = result.usage.calls;
      return await after(result);
    } finally {
      ticket.done(calls);
    }
  }

  /** Calls/s over the part of the window in which the server stayed backlogged, when long enough. */
  #measuredDrain(now: number): number | undefined {
    if (this.#busySince === undefined) return undefined;
    // Whole slots only: from the first full slot after busySince to the slot now filling (excluded).
    const current = Math.floor(now / SLOT_MS);
    const first = Math.max(Math.floor(this.#busySince / SLOT_MS) + 1, current - SLOTS + 1);
    if ((current - first) * SLOT_MS < MIN_BUSY_MS) return undefined;
    let calls = 0;
    for (let slot = first; slot < current; slot++) {
      const i = slot % SLOTS;
      if (this.#slotIndex[i] === slot) calls += this.#slotCalls[i] ?? 0;
    }
    if (calls === 0) return undefined;
    return calls / (((current - first) * SLOT_MS) / 1000);
  }

  #recordCost(hash: string, calls: number): void {
    const prev = this.#callsPerJudgment.get(hash);
    if (prev === undefined && this.#callsPerJudgment.size >= MAX_TRACKED_GRAPHS) return;
    this.#callsPerJudgment.set(hash, prev === undefined ? calls : prev + EWMA_ALPHA * (calls - prev));
  }

  #releaser(): Release {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.#waiters.shift();
      if (next === undefined) {
        this.#running -= 1;
      } else {
        // The slot passes straight to the oldest waiter (high lane first): running stays the same.
        next.resolve(this.#releaser());
      }
      this.#changed();
    };
  }

  #changed(): void {
    this.#observe(this.#now());
    this.#capacity.observe();
    this.#processHolds();
    if (this.#onChange === undefined) return;
    this.#onChange({
      running: this.#running,
      waiting: this.#waiters.size,
      predictedWaitS: this.predictedWaitS(),
      drainCallsPerS: this.drainCallsPerS(),
      held: this.#holds.size,
    });
  }
}

/** What a serving service observes of its backend calls: each feeds the metrics and the drain rate. */
export function callObserver(
  metrics: Pick<Metrics, 'observeCall' | 'observeRetry'>,
  admission: Admission,
): JudgeObserver {
  return {
    onCall: (event) => {
      metrics.observeCall(event);
      admission.recordCall(event.latencyMs);
    },
    onRetry: (event) => metrics.observeRetry(event),
  };
}

/** Where a refusal is reported: `reward_admission_refusals_total` and the app's rate-limited log line. */
export interface RefusalReporting {
  metrics: Pick<Metrics, 'admissionRefusals'>;
  onRefusal?: ((refusal: Refusal) => void) | undefined;
}

/**
 * The one answer to a refused request (judgments and comparisons alike): counts the refusal, feeds the log
 * hook, and returns the `503 RW_OVERLOADED` error whose `retry_after_s` becomes the Retry-After header.
 * `n` new units of `noun` (e.g. `judgments`) were refused.
 */
export function overloadError(
  refusal: Refusal,
  n: number,
  noun: string,
  reporting: RefusalReporting,
): RewardError {
  reporting.metrics.admissionRefusals.labels(refusal.reason).inc();
  reporting.onRefusal?.(refusal);
  const why =
    refusal.reason === 'memory'
      ? `the queue is full (${refusal.waiting} judgments waiting for a run slot)`
      : refusal.reason === 'priority'
        ? `the high-priority lane is at its share of capacity (HIGH_PRIORITY_SHARE); send it as normal or retry`
        : `the backlog needs ${refusal.completionS.toFixed(1)} s with them, the deadline allows ` +
          `${refusal.horizonS.toFixed(1)} s`;
  return new RewardError('RW_OVERLOADED', `server busy: ${n} new ${noun} refused: ${why}`, {
    details: {
      retry_after_s: Admission.retryAfterSeconds(refusal),
      reason: refusal.reason,
      predicted_wait_s: Math.round(refusal.waitS * 10) / 10,
      drain_calls_per_s: Math.round(refusal.drainCallsPerS),
      needed_calls_per_s: Number.isFinite(refusal.neededCallsPerS)
        ? Math.round(refusal.neededCallsPerS)
        : null,
    },
  });
}

/**
 * Whole request or nothing, decided before any of its new units of `noun` (one shape each) starts. A
 * request larger than the whole capacity could never be admitted (a retryable 503 would loop forever): a
 * `400` that ends with `hint`. One that does not fit now is refused (`overloadError`). Never holds (an
 * uncertain capacity decides at its upper end); returns the request's deadline, moved to
 * `options.holdUntil` when it fits only by then.
 */
export function admitWhole(
  admission: Admission,
  shapes: readonly WorkShape[],
  remainingMs: number,
  noun: 'judgments' | 'comparisons',
  hint: string,
  reporting: RefusalReporting,
  lane: Lane = 'normal',
  options: DecideOptions = {},
): { deadline?: number | undefined } {
  if (!checkWhole(admission, shapes, noun, hint)) return {};
  const decision = admission.decide(shapes, remainingMs, lane, options);
  if (!decision.ok) throw overloadError(decision.refusal, shapes.length, noun, reporting);
  return { deadline: decision.deadline };
}

/** `admitWhole` for a caller that can wait: admitted (with its deadline), or held (hold.ts). */
export type AdmitOrHold =
  { kind: 'admitted'; deadline?: number | undefined } | { kind: 'held'; place: HoldPlace };

/**
 * `admitWhole` that may hold the request (`Admission.hold`) instead of deciding on an uncertain capacity.
 * `deadline` is absolute. Refusals throw as in `admitWhole`.
 */
export function admitOrHold(
  admission: Admission,
  shapes: readonly WorkShape[],
  deadline: number,
  signal: AbortSignal,
  noun: 'judgments' | 'comparisons',
  hint: string,
  reporting: RefusalReporting,
  lane: Lane = 'normal',
  options: DecideOptions = {},
): AdmitOrHold {
  if (!checkWhole(admission, shapes, noun, hint)) return { kind: 'admitted' };
  const decision = admission.decideOrHold(shapes, deadline - Date.now(), lane, options);
  if (decision.ok) return { kind: 'admitted', deadline: decision.deadline };
  if (decision.refusal !== undefined) throw overloadError(decision.refusal, shapes.length, noun, reporting);
  return { kind: 'held', place: admission.hold(shapes, deadline, signal, lane, options) };
}

/** The checks before a decision: too large for the server ever (400), the token budget's gate; false = nothing new. */
function checkWhole(
  admission: Admission,
  shapes: readonly WorkShape[],
  noun: 'judgments' | 'comparisons',
  hint: string,
): boolean {
  const n = shapes.length;
  const capacity = admission.maxConcurrent + admission.maxQueued;
  if (n > capacity) {
    throw new RewardError(
      'RW_BAD_REQUEST',
      `request needs ${n} new ${noun} but this server admits at most ${capacity} at once ` +
        `(MAX_CONCURRENT_JUDGMENTS + MAX_QUEUED_JUDGMENTS): ${hint}`,
      { details: { [`new_${noun}`]: n, capacity } },
    );
  }
  if (n === 0) return false;
  const gated = admission.gate?.();
  if (gated !== undefined) throw gated;
  return true;
}
