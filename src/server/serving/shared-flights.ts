/**
 * One judgment flight through the shared tier (REDIS_URL): the cross-process lease first — another
 * holder's outcome is taken as it lands, with no run slot held while waiting — else the judgment is computed
 * here and its outcome handed to the waiters elsewhere. The judgment service runs every flight through this
 * when it has a shared tier (`shared-judgments.ts`); without one it computes directly.
 *
 * A judgment whose holder elsewhere gave it up (its clients left, or it died) is new work here: it passes
 * the token budget and the capacity check like any other before it is computed (a request that only waited
 * was never admitted for it).
 */
import type { RewardError } from '../../errors.js';
import type { Admission, Refusal, Ticket, WorkShape } from '../admission/admission.js';
import type { TenantWork } from '../admission/fair-shares.js';
import type { FlightDeadline } from './flight-deadlines.js';
import type { SharedFlight, SharedJudgment, SharedJudgments } from './shared-judgments.js';

/** How often a request takes over a judgment another process's deadline cut short. */
const MAX_TAKEOVERS = 2;
/** ... when at least this much of its own deadline is left (less could not finish a judgment anyway). */
const TAKEOVER_MIN_MS = 1000;

export interface SharedFlightsOptions {
  shared: SharedJudgments;
  admission: Admission;
  /** Epoch-ms clock, the requests' deadlines' own. */
  now: () => number;
  /** The overload answer (`overloadError`) for a refused takeover. */
  refuse: (refusal: Refusal) => RewardError;
  /** Judged outcomes only go to the shared store (`isSharedCacheable`). */
  isCacheable: (stored: SharedJudgment) => boolean;
  /** `reward_cache_lookups_total{result="shared_hit" | "shared_coalesced"}`. */
  onLanded: (waited: boolean) => void;
}

export interface SharedFlights {
  /**
   * The flight of `key`: another process's outcome (`elsewhere: true`), or `here(ticket)`'s, published to the
   * other processes. `admitted` is this request's ticket when it admitted the judgment as new work (undefined
   * when it was being computed elsewhere); it is released when the outcome lands from elsewhere. A takeover
   * is admitted for `tenant` (its budget, its share), the request that waited for it.
   */
  run<S extends SharedJudgment>(
    key: string,
    graph: WorkShape,
    signal: AbortSignal,
    deadline: FlightDeadline,
    admitted: Ticket | undefined,
    here: (ticket: Ticket) => Promise<S>,
    tenant?: TenantWork,
  ): Promise<{ stored: S | SharedJudgment; elsewhere: boolean }>;
}

export function createSharedFlights(options: SharedFlightsOptions): SharedFlights {
  const { shared, admission, now } = options;

  /**
   * The shared lease of `key`, or the outcome another process published. An outcome cut by that process's
   * own deadline (status `timeout`) while this request still has time is not taken: this process asks again
   * and, the lease being free, computes the judgment itself. The wait reads the flight's deadline as it
   * moves: a request that joins the flight while it waits extends it.
   */
  const acquire = async (
    key: string,
    signal: AbortSignal,
    deadline: FlightDeadline,
  ): Promise<SharedFlight> => {
    let flight = await shared.acquire(key, signal, deadline);
    for (let i = 0; i < MAX_TAKEOVERS && flight.kind === 'landed'; i++) {
      const cutShort = flight.stored.judgment.status === 'timeout';
      if (!cutShort || deadline.at - now() < TAKEOVER_MIN_MS) break;
      flight = await shared.acquire(key, signal, deadline);
    }
    return flight;
  };

  /** New work here now: the token budget first, then the capacity (so a retry cannot spend or queue past them). */
  const takeOver = (graph: WorkShape, remainingMs: number, tenant: TenantWork | undefined): Ticket => {
    const gated = admission.gate?.() ?? tenant?.gate?.();
    if (gated !== undefined) throw gated;
    const decision = admission.decide([graph], remainingMs, 'normal', { work: tenant });
    if (!decision.ok) throw options.refuse(decision.refusal);
    return admission.admit(graph, 'normal', tenant);
  };

  return {
    async run(key, graph, signal, deadline, admitted, here, tenant) {
      let flight: SharedFlight;
      try {
        flight = await acquire(key, signal, deadline);
      } catch (err) {
        admitted?.done(undefined);
        throw err;
      }
      if (flight.kind === 'landed') {
        admitted?.done(undefined);
        // Stored by the time this process asked (its write raced our lookup) is a hit; waited for, coalesced.
        options.onLanded(flight.waited);
        return { stored: flight.stored, elsewhere: true };
      }
      let stored;
      try {
        stored = await here(admitted ?? takeOver(graph, deadline.at - now(), tenant));
      } catch (err) {
        void flight.abandon();
        throw err;
      }
      // Aborted here (every waiter here left or was cancelled): a waiter elsewhere takes it over rather than
      // receiving this process's abort as its outcome.
      if (signal.aborted) void flight.abandon();
      // Not awaited: the answer does not wait for Redis (the local LRU already has it).
      else void flight.complete(stored, options.isCacheable(stored));
      return { stored, elsewhere: false };
    },
  };
}
