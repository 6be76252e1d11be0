/**
 * The shapes Admission (admission.ts) and its parts share: the work it is asked about (`WorkShape`), its
 * options, what it publishes (`AdmissionState`), its decisions and their options, and an admitted
 * judgment's `Ticket`; also the one latency it assumes before any call finished (COLD_CALL_MS). Types and
 * constants only; admission.ts re-exports them, so importers keep one module.
 */
import type { RewardError } from '../../errors.js';
import type { Flow } from '../../judge/fair-queue.js';
import type { CompiledGraph } from '../../judge/graph.js';
import type { ReplicaSnapshot } from '../../judge/types.js';
import type { TenantWork } from './fair-shares.js';
import type { Refusal } from './fit.js';
import type { Lane } from './priority.js';

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

/**
 * Admit (`deadline`: the request's deadline extended to its hold window, when it fits only within that);
 * refuse; or — only when the caller can hold it (`Admission.decideOrHold`) — hold it while the capacity is
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

/** Assumed latency of one backend call before any call finished, ms. */
export const COLD_CALL_MS = 1000;
