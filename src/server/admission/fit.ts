/**
 * Whether a request's new work fits, by predicted completion (admission.ts): the backlog ahead plus its
 * calls drained at the fleet's rate, then its critical path's tail, inside ADMIT_WITHIN of its deadline.
 * Pure: admission gathers the numbers, this decides.
 *
 * The rate is a range while the fleet's capacity is still being measured (capacity.ts): the request is
 * admitted when it fits the range's lower end (or the backlog stays within what fills the engines so they
 * can be measured), refused when it does not fit its upper end, and in between held, or decided at one end
 * — the caller says which (`uncertain`). A request that fits only by its hold window (`/get_reward`:
 * `holdHorizonS` beyond `horizonS`) is admitted with its deadline moved there.
 */

/** Why a request was refused, with what a log line and the client need. */
export interface Refusal {
  /** `priority`: a high-priority request beyond HIGH_PRIORITY_SHARE (priority.ts). */
  reason: 'deadline' | 'memory' | 'priority';
  /**
   * Seconds until the backlog admitted so far has drained (what Retry-After says): here at `drainCallsPerS`;
   * decide.ts bounds it by the admitted work's deadlines (admission-core.ts `waitS`).
   */
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

/** Fraction of the request deadline the predicted completion must fit in (the rest absorbs error). */
export const ADMIT_WITHIN = 0.9;

export interface FitInput {
  /** Backend calls admitted and not ended (reservations of held requests included). */
  backlogCalls: number;
  /** This request's new calls. */
  calls: number;
  /** Its longest critical path, in calls. */
  criticalPathCalls: number;
  /** A call's latency now, s. */
  callS: number;
  /** The drain rate, calls/s: `low` = proven, `high` = optimistic; equal when `certain`. */
  low: number;
  high: number;
  certain: boolean;
  /** Backlog admitted while uncertain so that the engines fill up (capacity.ts `probeCalls`). */
  probeCalls: number;
  /** ADMIT_WITHIN of the request's deadline, s; and of its hold window (≥ horizonS). */
  horizonS: number;
  holdHorizonS: number;
  /** While uncertain: hold what fits only the upper end, or decide at the upper or the lower end. */
  uncertain: 'hold' | 'upper' | 'lower';
}

export type FitVerdict =
  | { kind: 'admit' }
  /** Admitted, with its deadline moved to its hold window. */
  | { kind: 'extend' }
  | { kind: 'hold' }
  /** Refused: its completion at `drain` is past its (hold) horizon. */
  | { kind: 'refuse'; drain: number };

/**
 * ADMIT_WITHIN of the time a request has, s: until its deadline (`remainingMs` from `now`), and until its
 * hold window ends (`holdUntil`, epoch ms; the deadline's when it is sooner or unset).
 */
export function horizons(
  now: number,
  remainingMs: number,
  holdUntil: number | undefined,
): { horizonS: number; holdHorizonS: number } {
  const horizonS = (ADMIT_WITHIN * Math.max(0, remainingMs)) / 1000;
  const holdHorizonS =
    holdUntil !== undefined && holdUntil > now + remainingMs
      ? (ADMIT_WITHIN * (holdUntil - now)) / 1000
      : horizonS;
  return { horizonS, holdHorizonS };
}

/** Seconds until the backlog plus `calls` have drained at `drain` and the last critical path has run. */
export function completionS(input: FitInput, drain: number): number {
  return (input.backlogCalls + input.calls) / drain + Math.max(0, input.criticalPathCalls - 1) * input.callS;
}

export function fit(input: FitInput): FitVerdict {
  const { low, high, certain, uncertain } = input;
  // Nothing ahead: refusing it would refuse it forever (its unfinished items time out).
  if (input.backlogCalls <= 0) return { kind: 'admit' };
  if (completionS(input, low) <= input.horizonS) return { kind: 'admit' };
  if (!certain && uncertain === 'hold' && input.backlogCalls + input.calls <= input.probeCalls)
    return { kind: 'admit' };
  const upper = certain || uncertain === 'lower' ? low : high;
  const atUpper = completionS(input, upper);
  if (atUpper > input.holdHorizonS) return { kind: 'refuse', drain: upper };
  if (!certain && uncertain === 'hold') return { kind: 'hold' };
  return atUpper <= input.horizonS ? { kind: 'admit' } : { kind: 'extend' };
}

/** The refusal of `input` for `reason`, at `drain` calls/s; `waiting`: judgments waiting for a run slot. */
export function refusalOf(
  input: FitInput,
  reason: Refusal['reason'],
  drain: number,
  waiting: number,
): Refusal {
  return {
    reason,
    waitS: input.backlogCalls / drain,
    completionS: completionS(input, drain),
    horizonS: input.holdHorizonS,
    drainCallsPerS: drain,
    neededCallsPerS:
      input.holdHorizonS > 0 ? (input.backlogCalls + input.calls) / input.holdHorizonS : Infinity,
    waiting,
  };
}
