/**
 * Admission's decision (admission.ts) on a request's new work, from its state (admission-core.ts): refused
 * past the queue memory (its tenant's fraction of it, fair-shares.ts); high work within its tenant's
 * high-lane budget (priority.ts); anything else by predicted completion behind the backlog ahead of it
 * (fit.ts), at the drain rate's range while the capacity is still being measured — held there (hold.ts),
 * or decided at one end, as the caller says. A held request is decided again here on every change.
 */
import type { Flow } from '../../judge/fair-queue.js';
import type { AdmissionCore } from './admission-core.js';
import {
  COLD_CALL_MS,
  type DecideOptions,
  type HoldableDecision,
  type WorkShape,
} from './admission-types.js';
import { cappedLane, flowOf, type FairShares } from './fair-shares.js';
import { fit, horizons, refusalOf, type FitInput, type FitVerdict, type Refusal } from './fit.js';
import type { HoldPlace } from './hold.js';
import type { Lane } from './priority.js';

/**
 * A request held this long for an uncertain capacity (or a tenth of its deadline, when sooner) is decided
 * on the proven capacity alone, ms.
 */
const MAX_UNCERTAIN_HOLD_MS = 5_000;

/**
 * Whether the new judgments (one entry per judgment) fit now, `remainingMs` before their deadline (or by
 * `options.holdUntil`: the decision then carries that deadline). `uncertain`: while the capacity is
 * uncertain, hold what fits only its upper end (`hold`), or decide at one end (`upper`, `lower`).
 */
export function decision(
  core: AdmissionCore,
  graphs: readonly WorkShape[],
  remainingMs: number,
  lane: Lane,
  options: DecideOptions,
  uncertain: FitInput['uncertain'],
): HoldableDecision {
  const n = graphs.length;
  if (n === 0) return { ok: true };
  const now = core.now();
  core.observe(now);
  const { estimate, ...range } = core.drain();
  const { low, high } = range;
  const { horizonS, holdHorizonS } = horizons(now, remainingMs, options.holdUntil);
  const { work } = options;
  const flow = flowOf(work);
  const calls = core.callsOf(graphs);
  const input: FitInput = {
    ...range,
    backlogCalls: aheadOf(core.fair, core.backlogCalls, core.holds.size, flow, calls),
    calls,
    criticalPathCalls: criticalPathOf(graphs),
    // Under load a batch is slower than one call alone: the tail runs at the latency calls have now.
    callS: Math.max(core.calls.unloadedLatencyMs ?? COLD_CALL_MS, estimate.recentLatencyMs ?? 0) / 1000,
    probeCalls: estimate.probeCalls,
    horizonS,
    holdHorizonS,
    uncertain,
  };
  // The wait a refusal says: the backlog ahead drained, within the admitted work's deadlines (core.waitS).
  const refusal = (
    reason: Refusal['reason'],
    drain: number,
    waitS = core.waitS(input.backlogCalls, drain),
  ): HoldableDecision => ({
    ok: false,
    refusal: { ...refusalOf(input, reason, drain, core.slots.waiting), waitS },
  });
  const over = Math.max(0, n - Math.max(0, core.maxConcurrent - core.slots.running));
  // A tenant's part of the queue memory is its fraction of it (fair-shares.ts).
  const fraction = work?.fraction ?? 1;
  if (core.slots.waiting + over > core.maxQueued) return refusal('memory', low);
  if (core.slots.waitingOf(flow.name) + over > core.maxQueued * fraction) return refusal('memory', low);
  // High work goes ahead of the backlog, within its tenant's part of its own budget (HIGH_PRIORITY_SHARE=0:
  // no lane) of the optimistic rate while the capacity is measured: high work is small, and a human's curl
  // waits for no calibration.
  if (cappedLane(lane, work) === 'high' && core.fair.highShare > 0) {
    const budget = core.fair.highLane(flow, fraction);
    return budget.fits(calls, high, horizonS)
      ? { ok: true }
      : refusal('priority', high, budget.waitS(calls, high, horizonS));
  }
  return decisionOf(fit(input), options.holdUntil, (drain) => refusal('deadline', drain));
}

/**
 * How long a request is held for an uncertain capacity before the lower end decides it, ms: long enough for
 * the calls sent meanwhile to come back and be measured (3 call latencies: the unloaded one, or the recent
 * one when longer), within a quarter of the time it has (`remainingMs`), at least a tenth of it, at most
 * MAX_UNCERTAIN_HOLD_MS.
 */
function uncertainHoldMs(
  remainingMs: number,
  unloadedMs: number | undefined,
  estimate: { recentLatencyMs: number | undefined },
): number {
  const callMs = Math.max(unloadedMs ?? COLD_CALL_MS, estimate.recentLatencyMs ?? 0);
  return Math.min(MAX_UNCERTAIN_HOLD_MS, Math.max(remainingMs / 10, Math.min(remainingMs / 4, 3 * callMs)));
}

/**
 * Holds a request that was answered with `hold` (hold.ts): it is decided again, in arrival order, whenever
 * the estimate or the backlog changes. `deadline` is its own (absolute). After `uncertainHoldMs` it is
 * decided on the proven rate alone: admitted if it fits there, else refused.
 */
export function holdRequest(
  core: AdmissionCore,
  graphs: readonly WorkShape[],
  deadline: number,
  signal: AbortSignal,
  lane: Lane,
  options: DecideOptions,
): HoldPlace {
  const since = core.now();
  const patience = uncertainHoldMs(deadline - since, core.calls.unloadedLatencyMs, core.drain().estimate);
  return core.holds.hold(
    core.callsOf(graphs),
    () => {
      const now = core.now();
      const mode = now - since < patience ? 'hold' : 'lower';
      const d = decision(core, graphs, deadline - now, lane, options, mode);
      if (d.ok) {
        core.admittedUntil(d.deadline ?? deadline);
        return { kind: 'admit', deadline: d.deadline ?? deadline };
      }
      return d.refusal === undefined ? { kind: 'wait' } : { kind: 'refuse', refusal: d.refusal };
    },
    signal,
    Math.max(deadline, options.holdUntil ?? 0),
  );
}

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
