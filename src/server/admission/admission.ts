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
import { RewardError } from '../../errors.js';
import type { CompiledGraph } from '../../judge/graph.js';
import type { JudgeObserver } from '../../judge/types.js';
import type { Flow } from '../../judge/fair-queue.js';
import type { Metrics } from '../observe/metrics.js';
import { cappedLane, FairShares, flowOf, type TenantWork } from './fair-shares.js';
import type { Lane } from './priority.js';
import { RunSlots, type Release } from './run-slots.js';

/**
 * What admission needs to know about one unit of work: a judgment's graph, or a comparison's shape (its
 * calls per unit, and a stable key under which its measured cost is tracked).
 */
export type WorkShape = Pick<CompiledGraph, 'hash' | 'llmCallsPerJudgment' | 'criticalPathCalls'>;

/** What admission publishes after every change (feeds the gauges). */
export interface AdmissionState {
  running: number;
  waiting: number;
  /** Seconds the admitted backlog needs at the current drain rate. */
  predictedWaitS: number;
  /** Estimated drain rate, backend calls per second. */
  drainCallsPerS: number;
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

export type AdmissionDecision = { ok: true } | { ok: false; refusal: Refusal };

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
  /** Backend calls in flight at once (the default backend's max_inflight): the modelled capacity. */
  callSlots: number;
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
  #callLatencyMs: number | undefined;
  readonly #callsPerJudgment = new Map<string, number>();
  // Ring of SLOT_MS slots over DRAIN_WINDOW_MS: calls finished in each.
  readonly #slotCalls = new Float64Array(SLOTS);
  readonly #slotIndex = new Float64Array(SLOTS).fill(-1);
  /** Since when the server has been seen backlogged at every observation; undefined when not. */
  #busySince: number | undefined;
  /** The last time the server was seen backlogged, and the end of the backlog before the current one. */
  #lastDrain: { callsPerS: number; at: number } | undefined;

  constructor(options: AdmissionOptions) {
    this.maxConcurrent = options.maxConcurrent;
    this.maxQueued = options.maxQueued;
    this.callSlots = options.callSlots;
    this.callRateLimit = options.callRateLimit ?? Infinity;
    this.#now = options.now ?? Date.now;
    this.#isBackendSaturated = options.isBackendSaturated ?? (() => false);
    this.#onChange = options.onChange;
    this.fair = new FairShares(options.highShare ?? 0.1, this.#now);
    this.#slots = new RunSlots(options.maxConcurrent, () => this.#changed());
    this.gate = options.gate;
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

  /** Expected calls per judgment of `graph`: measured (smoothed), else its static count. */
  costOf(graph: WorkShape): number {
    return this.#callsPerJudgment.get(graph.hash) ?? graph.llmCallsPerJudgment;
  }

  /** Smoothed unloaded call latency, ms; undefined before any call finished unloaded (plan.ts). */
  callLatencyMs(): number | undefined {
    return this.#callLatencyMs;
  }

  /** Estimated drain rate in backend calls per second (> 0). */
  drainCallsPerS(): number {
    const now = this.#now();
    const model = Math.min(
      this.callRateLimit,
      (this.callSlots * 1000) / (this.#callLatencyMs ?? COLD_CALL_MS),
    );
    let measured = this.#measuredDrain(now);
    if (
      measured === undefined &&
      this.#lastDrain !== undefined &&
      now - this.#lastDrain.at < LAST_DRAIN_TTL_MS
    )
      measured = this.#lastDrain.callsPerS;
    // A measurement is a lower bound of capacity: it is depressed by transients of the server itself (a
    // storm of requests to parse) and by the pipeline filling at the start of a backlog.
    return measured === undefined ? model : Math.max(measured, model);
  }

  /** A graph's drain rate in judgments per second. */
  drainJudgmentsPerS(graph: WorkShape): number {
    return this.drainCallsPerS() / Math.max(1, this.costOf(graph));
  }

  /** Seconds the admitted backlog needs at the current drain rate. */
  predictedWaitS(): number {
    return this.#backlogCalls / this.drainCallsPerS();
  }

  /** True when a one-judgment request of `graph` with a full deadline would be refused now. */
  saturated(graph: WorkShape, deadlineMs: number): boolean {
    return !this.decide([graph], deadlineMs).ok;
  }

  /**
   * Whether the new judgments (one entry per judgment) fit: their run-slot wait within the memory bound,
   * and the backlog plus their calls drained inside ADMIT_WITHIN of `remainingMs`. With nothing admitted
   * ahead a request is always admitted (refusing it would refuse it forever); its unfinished items time out.
   */
  decide(
    graphs: readonly WorkShape[],
    remainingMs: number,
    lane: Lane = 'normal',
    work?: TenantWork,
  ): AdmissionDecision {
    const n = graphs.length;
    const flow = flowOf(work);
    if (n === 0) return { ok: true };
    let calls = 0;
    let critical = 0;
    for (const g of graphs) {
      calls += this.costOf(g);
      critical = Math.max(critical, g.criticalPathCalls);
    }
    this.#observe(this.#now());
    const drain = this.drainCallsPerS();
    // At the tenant's fair share (fair-shares.ts); one flow: the whole backlog, first come first served.
    const waitS = this.fair.completionCalls(flow, 0) / drain;
    const callS = (this.#callLatencyMs ?? COLD_CALL_MS) / 1000;
    const completionS = Math.max(this.fair.completionCalls(flow, calls) / drain, critical * callS);
    const horizonS = (ADMIT_WITHIN * Math.max(0, remainingMs)) / 1000;
    const freeSlots = Math.max(0, this.maxConcurrent - this.running);
    const queuedAfter = this.waiting + Math.max(0, n - freeSlots);
    const flowQueuedAfter = this.#slots.waitingOf(flow.name) + Math.max(0, n - freeSlots);
    const fraction = work?.fraction ?? 1;
    const refusal = (reason: Refusal['reason']): AdmissionDecision => ({
      ok: false,
      refusal: {
        reason,
        waitS,
        completionS,
        horizonS,
        drainCallsPerS: drain,
        neededCallsPerS: horizonS > 0 ? (completionS * drain) / horizonS : Infinity,
        waiting: this.waiting,
      },
    });
    // A tenant's part of the queue memory is its fraction of it (fair-shares.ts).
    if (queuedAfter > this.maxQueued || flowQueuedAfter > this.maxQueued * fraction) return refusal('memory');
    // High work goes ahead of the queued backlog: its own budget decides, not the backlog's completion.
    // HIGH_PRIORITY_SHARE=0 turns the lane off (high requests are normal ones).
    if (cappedLane(lane, work) === 'high' && this.fair.highShare > 0) {
      const high = this.fair.highLane(flow, fraction);
      if (high.fits(calls, drain, horizonS)) return { ok: true };
      const denied = refusal('priority');
      if (!denied.ok) denied.refusal.waitS = high.waitS(calls, drain, horizonS);
      return denied;
    }
    if (this.fair.backlogOf(flow) > 0 && completionS > horizonS) return refusal('deadline');
    return { ok: true };
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
    if (laneOf === 'high') this.fair.highLane(flow, work?.fraction ?? 1).take(cost, this.drainCallsPerS());
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
        if (calls !== undefined) this.#recordCost(graph.hash, calls);
        this.#changed();
      },
    };
  }

  /** One backend call finished (any outcome): feeds the drain rate and, when unloaded, the call latency. */
  recordCall(latencyMs: number): void {
    const now = this.#now();
    const busy = this.#observe(now);
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
    const busy = this.waiting > 0 || this.#isBackendSaturated();
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
  async run<T extends { usage: { calls: number } }, R>(
    ticket: Ticket,
    signal: AbortSignal,
    work: () => Promise<T>,
    after: (result: T) => R | Promise<R>,
  ): Promise<R> {
    let calls: number | undefined;
    try {
      const release = await this.acquire(signal, ticket.lane, ticket.flow, ticket.work?.fraction);
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

  #changed(): void {
    this.#observe(this.#now());
    if (this.#onChange === undefined) return;
    this.#onChange({
      running: this.running,
      waiting: this.waiting,
      predictedWaitS: this.predictedWaitS(),
      drainCallsPerS: this.drainCallsPerS(),
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
 * `400` that ends with `hint`. One that does not fit now is refused (`overloadError`).
 */
export function admitWhole(
  admission: Admission,
  shapes: readonly WorkShape[],
  remainingMs: number,
  noun: 'judgments' | 'comparisons',
  hint: string,
  reporting: RefusalReporting,
  lane: Lane = 'normal',
  work?: TenantWork,
): void {
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
  if (n === 0) return;
  const gated = admission.gate?.() ?? work?.gate?.();
  if (gated !== undefined) throw gated;
  const decision = admission.decide(shapes, remainingMs, lane, work);
  if (!decision.ok) throw overloadError(decision.refusal, n, noun, reporting);
}
