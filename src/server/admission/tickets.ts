/**
 * Admitted work's tickets (admission.ts): a ticket holds one judgment's expected calls in the backlog
 * (admission-core.ts; its tenant's part in fair-shares.ts) from its admission until it ended, any way, and
 * then teaches its graph's measured cost. `runTicket` is the life of one: a run slot in its lane and flow
 * (run-slots.ts), its work, the work's aftermath, and the end of the ticket.
 */
import type { Flow } from '../../judge/fair-queue.js';
import type { AdmissionCore } from './admission-core.js';
import type { Ticket, WorkShape } from './admission-types.js';
import { cappedLane, flowOf, type TenantWork } from './fair-shares.js';
import type { Lane } from './priority.js';
import type { Release } from './run-slots.js';

/**
 * Adds one admitted judgment of `graph` to the backlog (of `work`'s tenant); high work takes its cost from
 * its tenant's high-lane budget. The ticket's `done` counts once.
 */
export function admitTicket(
  core: AdmissionCore,
  graph: WorkShape,
  lane: Lane,
  work: TenantWork | undefined,
): Ticket {
  const cost = core.costOf(graph);
  const flow = flowOf(work);
  core.add(flow, cost);
  const laneOf: Lane = cappedLane(lane, work) === 'high' && core.fair.highShare > 0 ? 'high' : 'normal';
  if (laneOf === 'high') core.fair.highLane(flow, work?.fraction ?? 1).take(cost, core.drain().high);
  let finished = false;
  return {
    lane: laneOf,
    flow,
    work,
    done: (calls) => {
      if (finished) return;
      finished = true;
      core.remove(flow, cost);
      if (calls !== undefined && graph.rejected !== true) core.calls.recordCost(graph.hash, calls);
      core.changed();
    },
  };
}

/** Takes a run slot, as `Admission.acquire` does. */
export interface SlotTaker {
  acquire(signal: AbortSignal, lane?: Lane, flow?: Flow, fraction?: number): Promise<Release>;
}

/** `Admission.run`: the run slot (in the ticket's lane and flow, with its guarantee), the work, `after`. */
export async function runTicket<T extends { usage: { calls: number } }, R>(
  slots: SlotTaker,
  ticket: Ticket,
  signal: AbortSignal,
  work: () => Promise<T>,
  after: (result: T) => R | Promise<R>,
): Promise<R> {
  let calls: number | undefined;
  try {
    const release = await slots.acquire(signal, ticket.lane, ticket.flow, ticket.work?.fraction);
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
