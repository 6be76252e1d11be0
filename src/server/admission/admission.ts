/**
 * Admission control by predicted completion. Work is counted in backend calls: every admitted judgment
 * adds its graph's expected calls to the backlog until it ends, and the backlog drains at the fleet's
 * rate (calls/s). A request is admitted, whole or not at all, while its new work is predicted to finish
 * inside the request deadline (fit.ts); a refused one is told the predicted wait (Retry-After). Admitted
 * judgments are never dropped for capacity: they run (FIFO for a run slot) until they finish, time out at
 * their deadline, or their callers leave.
 *
 * Drain rate: what the default backend's replicas were measured to complete per second at their capacity,
 * else modelled from their engines' capacity or in-flight limits (capacity.ts) — a range while an engine's
 * capacity is still being measured, in which case requests that fit only its upper end are held (hold.ts)
 * — capped by the backend's RPM and raised by what this server measured while backlogged
 * (backlog-drain.ts; every backend's calls). A graph costs its smoothed measured calls per judgment (its
 * static call count until one ran; a rejected input costs nothing and teaches nothing), so a graph's drain
 * rate in judgments/s is the calls/s drain divided by that cost.
 *
 * Memory: the queue of judgments waiting for a run slot is bounded by `maxQueued` (sized from the
 * measured bytes per queued judgment, README "Configuration"), not by a small count.
 */
import { RewardError } from '../../errors.js';
import type { CompiledGraph } from '../../judge/graph.js';
import type { JudgeObserver, ReplicaSnapshot } from '../../judge/types.js';
import type { Metrics } from '../observe/metrics.js';
import { BacklogDrain } from './backlog-drain.js';
import { CapacityEstimator, drainRange, type CapacityEstimate } from './capacity.js';
import {
  ADMIT_WITHIN,
  fit,
  horizons,
  refusalOf,
  type FitInput,
  type FitVerdict,
  type Refusal,
} from './fit.js';
import { HoldQueue, type HoldPlace } from './hold.js';
import type { Flow } from '../../judge/fair-queue.js';
import { cappedLane, FairShares, flowOf, type TenantWork } from './fair-shares.js';
import type { Lane } from './priority.js';
import { RunSlots, type Release } from './run-slots.js';

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

export type { Refusal };

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
  /**
   * The request's tenant (REWARD_KEYS, fair-shares.ts): its completion is predicted at its fair share, its
   * queue memory and high lane are its fraction, its own budget gates it. Default: the shared flow.
   */
  work?: TenantWork | undefined;
}

/** One admitted judgment's share of the backlog; `done` once it ended (any way). */
export interface Ticket {
  done(calls: number | undefined): void;
  /** The lane its run-slot wait is in (priority.ts); normal unless admitted as high. */
  readonly lane?: Lane | undefined;
  /** The tenant flow its run-slot wait and backend calls are in (fair-shares.ts); default shared. */
  readonly flow?: Flow | undefined;
  /** The tenant it was admitted for (its spend, cache scope); undefined without tenants. */
  readonly work?: TenantWork | undefined;
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

export { ADMIT_WITHIN };
/** Assumed latency of one backend call before any call finished, ms. */
export const COLD_CALL_MS = 1000;
const MAX_RETRY_AFTER_S = 3600;

/** The longest critical path among the judgments that will run (a rejected input runs none), in calls. */
function criticalPathOf(graphs: readonly WorkShape[]): number {
  return graphs.reduce((m, g) => (g.rejected === true ? m : Math.max(m, g.criticalPathCalls)), 0);
}

/** A fit verdict (fit.ts) as a decision; `refuse` builds the refusal at the verdict's drain rate. */
function decisionOf(
  verdict: FitVerdict,
  holdUntil: number | undefined,
  refuse: (drain: number) => HoldableDecision,
): HoldableDecision {
  switch (verdict.kind) {
    case 'admit':
      return { ok: true };
    case 'extend':
      return { ok: true, deadline: holdUntil };
    case 'hold':
      return { ok: false, hold: true };
    case 'refuse':
      return refuse(verdict.drain);
  }
}

/**
 * A request held this long for an uncertain capacity (or a tenth of its deadline, when sooner) is decided
 * on the proven capacity alone, ms.
 */
const MAX_UNCERTAIN_HOLD_MS = 5_000;

/**
 * How long a request is held for an uncertain capacity before the lower end decides it, ms: long enough for
 * the calls sent meanwhile to come back and be measured (3 call latencies: the unloaded one, or the recent
 * one when longer), within a quarter of the time it has (`remainingMs`), at least a tenth of it, at most
 * MAX_UNCERTAIN_HOLD_MS.
 */
function uncertainHoldMs(
  remainingMs: number,
  unloadedMs: number | undefined,
  estimate: Pick<CapacityEstimate, 'recentLatencyMs'>,
): number {
  const callMs = Math.max(unloadedMs ?? COLD_CALL_MS, estimate.recentLatencyMs ?? 0);
  return Math.min(MAX_UNCERTAIN_HOLD_MS, Math.max(remainingMs / 10, Math.min(remainingMs / 4, 3 * callMs)));
}

export class Admission {
  readonly maxConcurrent: number;
  readonly maxQueued: number;
  readonly callSlots: number;
  readonly callRateLimit: number;
  /** Run slots; their waiters by lane, then by tenant flow (weighted fair queuing), then FIFO. */
  readonly #slots: RunSlots;
  /** Per-tenant backlogs and high-lane budgets (fair-shares.ts). */
  readonly fair: FairShares;
  readonly gate: (() => RewardError | undefined) | undefined;
  readonly #now: () => number;
  readonly #isBackendSaturated: () => boolean;
  readonly #onChange: ((state: AdmissionState) => void) | undefined;
  /** Expected calls of every admitted judgment that has not ended. */
  #backlogCalls = 0;
  readonly #calls = new BacklogDrain();
  readonly #capacity: CapacityEstimator;
  readonly #holds: HoldQueue;

  constructor(options: AdmissionOptions) {
    this.maxConcurrent = options.maxConcurrent;
    this.maxQueued = options.maxQueued;
    this.callSlots = options.callSlots;
    this.callRateLimit = options.callRateLimit ?? Infinity;
    this.#now = options.now ?? Date.now;
    this.#isBackendSaturated = options.isBackendSaturated ?? (() => false);
    this.#onChange = options.onChange;
    this.#slots = new RunSlots(options.maxConcurrent, () => this.#changed());
    this.fair = new FairShares(options.highShare ?? 0.1, this.#now);
    this.gate = options.gate;
    this.#capacity = new CapacityEstimator({
      replicas: options.replicas ?? (() => []),
      lagMs: options.lagMs,
      now: this.#now,
    });
    this.#holds = new HoldQueue((calls) => {
      this.#backlogCalls = Math.max(0, this.#backlogCalls + calls);
      if (calls < 0) this.#changed();
    });
  }

  get running(): number {
    return this.#slots.running;
  }

  get waiting(): number {
    return this.#slots.waiting;
  }

  /** Expected backend calls of the admitted judgments that have not ended. */
  get backlogCalls(): number {
    return this.#backlogCalls;
  }

  /** Expected calls per judgment of `graph`: measured (smoothed), else its static count; 0 when rejected. */
  costOf(graph: WorkShape): number {
    if (graph.rejected === true) return 0;
    return this.#calls.callsPerJudgment(graph.hash) ?? graph.llmCallsPerJudgment;
  }

  /** Smoothed unloaded call latency, ms; undefined before any call finished unloaded (plan.ts). */
  callLatencyMs(): number | undefined {
    return this.#calls.unloadedLatencyMs;
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

  #drain(): { low: number; high: number; certain: boolean; estimate: CapacityEstimate } {
    const estimate = this.#capacity.estimate(this.#calls.unloadedLatencyMs ?? COLD_CALL_MS, this.callSlots);
    return { ...drainRange(estimate, this.#calls.rate(this.#now()), this.callRateLimit), estimate };
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
   * Whether the new judgments (one entry per judgment) fit: their run-slot wait within the memory bound, and
   * their completion after the backlog inside ADMIT_WITHIN of `remainingMs` (or `options.holdUntil`: the
   * decision then carries the new deadline) — fit.ts; an uncertain capacity decides at its upper end.
   */
  decide(
    graphs: readonly WorkShape[],
    remainingMs: number,
    lane: Lane = 'normal',
    options: DecideOptions = {},
  ): AdmissionDecision {
    const d = this.#decide(graphs, remainingMs, lane, options, 'upper');
    return d.ok || d.refusal === undefined ? { ok: true, deadline: d.ok ? d.deadline : undefined } : d;
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
    uncertain: FitInput['uncertain'],
  ): HoldableDecision {
    const n = graphs.length;
    if (n === 0) return { ok: true };
    const now = this.#now();
    this.#observe(now);
    const { estimate, ...range } = this.#drain();
    const { low, high } = range;
    const { horizonS, holdHorizonS } = horizons(now, remainingMs, options.holdUntil);
    const { work } = options;
    const flow = flowOf(work);
    const calls = this.#callsOf(graphs);
    const input: FitInput = {
      ...range,
      backlogCalls: aheadOf(this.fair, this.#backlogCalls, this.#holds.size, flow, calls),
      calls,
      criticalPathCalls: criticalPathOf(graphs),
      // Under load a batch is slower than one call alone: the tail runs at the latency calls have now.
      callS: Math.max(this.#calls.unloadedLatencyMs ?? COLD_CALL_MS, estimate.recentLatencyMs ?? 0) / 1000,
      probeCalls: estimate.probeCalls,
      horizonS,
      holdHorizonS,
      uncertain,
    };
    const refusal = (reason: Refusal['reason'], drain: number, waitS?: number): HoldableDecision => {
      const r = refusalOf(input, reason, drain, this.#slots.waiting);
      return { ok: false, refusal: waitS === undefined ? r : { ...r, waitS } };
    };
    const over = Math.max(0, n - Math.max(0, this.maxConcurrent - this.#slots.running));
    // A tenant's part of the queue memory is its fraction of it (fair-shares.ts).
    const fraction = work?.fraction ?? 1;
    if (this.#slots.waiting + over > this.maxQueued) return refusal('memory', low);
    if (this.#slots.waitingOf(flow.name) + over > this.maxQueued * fraction) return refusal('memory', low);
    // High work goes ahead of the backlog, within its tenant's part of its own budget (HIGH_PRIORITY_SHARE=0:
    // no lane) of the optimistic rate while the capacity is measured: high work is small, and a human's curl
    // waits for no calibration.
    if (cappedLane(lane, work) === 'high' && this.fair.highShare > 0) {
      const budget = this.fair.highLane(flow, fraction);
      return budget.fits(calls, high, horizonS)
        ? { ok: true }
        : refusal('priority', high, budget.waitS(calls, high, horizonS));
    }
    return decisionOf(fit(input), options.holdUntil, (drain) => refusal('deadline', drain));
  }

  #callsOf(graphs: readonly WorkShape[]): number {
    return graphs.reduce((sum, g) => sum + this.costOf(g), 0);
  }

  /**
   * Holds a request that `decide` answered with `hold`: it is decided again, in arrival order, whenever
   * the estimate or the backlog changes (and every HOLD_TICK_MS). `deadline` is its own (absolute);
   * `options.holdUntil` as for `decide`. After `uncertainHoldMs` it is decided on the proven rate alone:
   * admitted if it fits there, else refused.
   */
  hold(
    graphs: readonly WorkShape[],
    deadline: number,
    signal: AbortSignal,
    lane: Lane = 'normal',
    options: DecideOptions = {},
  ): HoldPlace {
    const since = this.#now();
    const patience = uncertainHoldMs(deadline - since, this.#calls.unloadedLatencyMs, this.#drain().estimate);
    return this.#holds.hold(
      this.#callsOf(graphs),
      () => {
        const now = this.#now();
        const mode = now - since < patience ? 'hold' : 'lower';
        const d = this.#decide(graphs, deadline - now, lane, options, mode);
        if (d.ok) return { kind: 'admit', deadline: d.deadline ?? deadline };
        return d.refusal === undefined ? { kind: 'wait' } : { kind: 'refuse', refusal: d.refusal };
      },
      signal,
      Math.max(deadline, options.holdUntil ?? 0),
    );
  }

  /** Retry-After for a refusal: the predicted wait, whole seconds, 1 s – 1 h. */
  static retryAfterSeconds(refusal: Refusal): number {
    return Math.min(MAX_RETRY_AFTER_S, Math.max(1, Math.ceil(refusal.waitS)));
  }

  /**
   * Adds one admitted judgment of `graph` to the backlog (of `work`'s tenant); call `done` exactly once when
   * it ended.
   */
  admit(graph: WorkShape, lane: Lane = 'normal', work?: TenantWork): Ticket {
    const cost = this.costOf(graph);
    const flow = flowOf(work);
    this.#backlogCalls += cost;
    this.fair.add(flow, cost);
    const laneOf: Lane = cappedLane(lane, work) === 'high' && this.fair.highShare > 0 ? 'high' : 'normal';
    if (laneOf === 'high') this.fair.highLane(flow, work?.fraction ?? 1).take(cost, this.#drain().high);
    let finished = false;
    return {
      lane: laneOf,
      flow,
      work,
      done: (calls) => {
        if (finished) return;
        finished = true;
        this.#backlogCalls = Math.max(0, this.#backlogCalls - cost);
        this.fair.remove(flow, cost);
        if (calls !== undefined && graph.rejected !== true) this.#calls.recordCost(graph.hash, calls);
        this.#changed();
      },
    };
  }

  /** One backend call finished (any outcome): feeds the drain rate and, when unloaded, the call latency. */
  recordCall(latencyMs: number): void {
    const now = this.#now();
    this.#calls.record(now, latencyMs, this.#observe(now));
    this.#capacity.observe();
    this.#holds.process();
  }

  /** Samples the backlogged state (every call, admission and slot change); true when backlogged. */
  #observe(now: number): boolean {
    const busy = this.#slots.waiting > 0 || this.#isBackendSaturated();
    this.#calls.observe(now, busy);
    return busy;
  }

  /** Tenant flows holding or waiting for run slots (GET /v1/tenants). */
  runSlotFlows(): ReturnType<RunSlots['flows']> {
    return this.#slots.flows();
  }

  /**
   * Takes a run slot (run-slots.ts): in `lane` and `flow`, fairly, when all are busy; at once while `flow`
   * holds fewer than `fraction` of them (its guarantee).
   */
  acquire(signal: AbortSignal, lane: Lane = 'normal', flow?: Flow, fraction = 0): Promise<Release> {
    return this.#slots.acquire(signal, lane, flow, Math.floor(this.maxConcurrent * fraction));
  }

  /**
   * One admitted unit of work under its `ticket`: waits for a run slot, runs `work` in it, then `after`
   * outside it (metrics, transcripts). The ticket ends once both did, any way, with the calls `work` made.
   */
  run<T extends { usage: { calls: number } }, R>(
    ticket: Ticket,
    signal: AbortSignal,
    work: () => Promise<T>,
    after: (result: T) => R | Promise<R>,
  ): Promise<R> {
    return runTicket(this, ticket, signal, work, after);
  }

  #changed(): void {
    this.#observe(this.#now());
    this.#capacity.observe();
    this.#holds.process();
    if (this.#onChange === undefined) return;
    this.#onChange({
      running: this.#slots.running,
      waiting: this.#slots.waiting,
      predictedWaitS: this.predictedWaitS(),
      drainCallsPerS: this.drainCallsPerS(),
      held: this.#holds.size,
    });
  }
}

/** `Admission.run`: the run slot (in the ticket's lane and flow, with its guarantee), the work, `after`. */
async function runTicket<T extends { usage: { calls: number } }, R>(
  admission: Admission,
  ticket: Ticket,
  signal: AbortSignal,
  work: () => Promise<T>,
  after: (result: T) => R | Promise<R>,
): Promise<R> {
  let calls: number | undefined;
  try {
    const release = await admission.acquire(signal, ticket.lane, ticket.flow, ticket.work?.fraction);
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

/**
 * The backlog ahead of `calls` new calls of `flow`: under fair queuing, the calls that drain until they are
 * done minus themselves (fair-shares.ts), plus held requests' reservations (`backlogCalls` beyond the
 * flows'); none while the tenant has nothing of its own admitted and nothing is held (so it is never
 * refused forever). One flow: the whole backlog.
 */
function aheadOf(fair: FairShares, backlogCalls: number, held: number, flow: Flow, calls: number): number {
  if (fair.backlogOf(flow) <= 0 && held === 0) return 0;
  const reserved = Math.max(0, backlogCalls - fair.totalCalls);
  return fair.completionCalls(flow, calls) - calls + reserved;
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
  if (!checkWhole(admission, shapes, noun, hint, options.work)) return {};
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
  if (!checkWhole(admission, shapes, noun, hint, options.work)) return { kind: 'admitted' };
  const decision = admission.decideOrHold(shapes, deadline - Date.now(), lane, options);
  if (decision.ok) return { kind: 'admitted', deadline: decision.deadline };
  if (decision.refusal !== undefined) throw overloadError(decision.refusal, shapes.length, noun, reporting);
  return { kind: 'held', place: admission.hold(shapes, deadline, signal, lane, options) };
}

/**
 * The checks before a decision: too large for the server ever (400), the token budgets' gates (the
 * server's, then the tenant's); false = nothing new.
 */
function checkWhole(
  admission: Admission,
  shapes: readonly WorkShape[],
  noun: 'judgments' | 'comparisons',
  hint: string,
  work: TenantWork | undefined,
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
  const gated = admission.gate?.() ?? work?.gate?.();
  if (gated !== undefined) throw gated;
  return true;
}
