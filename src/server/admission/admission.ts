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
 *
 * Where: `Admission` here is what its users hold — what it does (decide, hold, admit, run), over what it
 * reads out (admission-readings.ts) — with the request-level helpers below it (`admitWhole`,
 * `admitOrHold`, `overloadError`, `callObserver`). Its state (limits, run slots, backlog, held requests,
 * the drain rate, and the wake-up after every change) is admission-core.ts; the decision (memory, high
 * lane, fit, holding) decide.ts; admitted work's tickets tickets.ts; the shared types admission-types.ts,
 * re-exported here.
 */
import { RewardError } from '../../errors.js';
import type { Flow } from '../../judge/fair-queue.js';
import type { JudgeObserver } from '../../judge/types.js';
import type { Metrics } from '../observe/metric-types.js';
import { AdmissionReadings } from './admission-readings.js';
import type {
  AdmissionDecision,
  DecideOptions,
  HoldableDecision,
  Ticket,
  WorkShape,
} from './admission-types.js';
import { decision, holdRequest } from './decide.js';
import type { TenantWork } from './fair-shares.js';
import { ADMIT_WITHIN, type Refusal } from './fit.js';
import type { HoldPlace } from './hold.js';
import type { Lane } from './priority.js';
import type { Release } from './run-slots.js';
import { admitTicket, runTicket } from './tickets.js';

export type {
  AdmissionDecision,
  AdmissionOptions,
  AdmissionState,
  DecideOptions,
  HoldableDecision,
  Ticket,
  WorkShape,
} from './admission-types.js';
export { COLD_CALL_MS } from './admission-types.js';
export type { Refusal };
export { ADMIT_WITHIN };

const MAX_RETRY_AFTER_S = 3600;

/**
 * Admission control (see the file header): the decisions, holding, tickets and run slots, over the
 * readings it extends (admission-readings.ts); its state is admission-core.ts.
 */
export class Admission extends AdmissionReadings {
  /** True when a one-judgment request of `graph` with a full deadline would be refused (or held) now. */
  saturated(graph: WorkShape, deadlineMs: number): boolean {
    // A question, not an admission: decided without recording its deadline (`admitted`).
    if (this.held > 0) return true;
    return !decision(this.core, [graph], deadlineMs, 'normal', {}, 'hold').ok;
  }

  /**
   * Whether the new judgments (one entry per judgment) fit: their run-slot wait within the memory bound, and
   * their completion after the backlog inside ADMIT_WITHIN of `remainingMs` (or `options.holdUntil`: the
   * decision then carries the new deadline) — decide.ts; an uncertain capacity decides at its upper end.
   */
  decide(
    graphs: readonly WorkShape[],
    remainingMs: number,
    lane: Lane = 'normal',
    options: DecideOptions = {},
  ): AdmissionDecision {
    const d = this.#admitted(decision(this.core, graphs, remainingMs, lane, options, 'upper'), remainingMs);
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
    if (lane === 'normal' && this.held > 0 && graphs.length > 0) return { ok: false, hold: true };
    return this.#admitted(decision(this.core, graphs, remainingMs, lane, options, 'hold'), remainingMs);
  }

  /** An admission's deadline (its own, `remainingMs` from now, or the one it was moved to) bounds the waits. */
  #admitted(d: HoldableDecision, remainingMs: number): HoldableDecision {
    if (d.ok) this.core.admittedUntil(d.deadline ?? this.core.now() + remainingMs);
    return d;
  }

  /**
   * Holds a request that `decideOrHold` answered with `hold`, deciding it again on every change and every
   * TICK_MS meanwhile (decide.ts, hold.ts). `deadline` is its own (absolute); `options` as for `decide`.
   */
  hold(
    graphs: readonly WorkShape[],
    deadline: number,
    signal: AbortSignal,
    lane: Lane = 'normal',
    options: DecideOptions = {},
  ): HoldPlace {
    return holdRequest(this.core, graphs, deadline, signal, lane, options);
  }

  /** Retry-After for a refusal: the predicted wait, whole seconds, 1 s – 1 h. */
  static retryAfterSeconds(refusal: Refusal): number {
    return Math.min(MAX_RETRY_AFTER_S, Math.max(1, Math.ceil(refusal.waitS)));
  }

  /** Adds one admitted judgment of `graph` to the backlog (tickets.ts); call `done` exactly once it ended. */
  admit(graph: WorkShape, lane: Lane = 'normal', work?: TenantWork): Ticket {
    return admitTicket(this.core, graph, lane, work);
  }

  /** One backend call finished (any outcome): feeds the drain rate and, when unloaded, the call latency. */
  recordCall(latencyMs: number): void {
    this.core.recordCall(latencyMs);
  }

  /**
   * Takes a run slot (run-slots.ts): in `lane` and `flow`, fairly, when all are busy; at once while `flow`
   * holds fewer than `fraction` of them (its guarantee).
   */
  acquire(signal: AbortSignal, lane: Lane = 'normal', flow?: Flow, fraction = 0): Promise<Release> {
    return this.core.slots.acquire(signal, lane, flow, Math.floor(this.maxConcurrent * fraction));
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
