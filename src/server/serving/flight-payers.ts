/**
 * Who pays for a judgment flight, and whose fair-queue flow its calls wait in (issue 38 item 4). With a
 * shared cache (CACHE_SCOPE=shared) one flight can answer several tenants: the one that started it and
 * those that joined it.
 *
 * - **The receivers pay.** A flight's calls are counted in the metrics as they happen, but charged to the
 *   tenants (`TenantWork.onCall`: their token budget and `reward_tenant_tokens_total`) when the flight
 *   ends, split equally among the distinct tenants still waiting for it then — those it is delivered to. A
 *   tenant that left (cancelled, disconnected, its deadline passed) pays nothing for work delivered only to
 *   others. A flight every tenant left is charged to all of them, split: it was work they asked for and
 *   nobody received.
 * - **Its work runs in a receiver's flow.** The calls wait for backend slots in the flow of the first
 *   tenant still waiting (the starter while it waits); when it leaves, the next call goes in a remaining
 *   joiner's flow.
 *
 * Charging at the end delays a tenant's budget by one flight's calls (seconds): the budget gates new work,
 * never a flight in progress. A flight computed here for the shared tier (REDIS_URL) is charged to the
 * tenants waiting here; one computed elsewhere is charged there.
 */
import type { Flow } from '../../judge/fair-queue.js';
import type { CallEvent, JudgeObserver } from '../../judge/types.js';
import type { TenantWork } from '../admission/fair-shares.js';

interface Member {
  work: TenantWork;
  left: boolean;
}

interface FlightSpend {
  members: Member[];
  events: CallEvent[];
}

/** Calls kept per flight for the charge at its end (a graph makes a few dozen; more is a runaway). */
const MAX_EVENTS = 4096;

export interface FlightPayers {
  /**
   * A request of `work`'s tenant starts (`starts`) or joins the flight of `key`; `signal` aborting means it
   * left. A join of a flight already settled is ignored.
   */
  enter(key: string, work: TenantWork | undefined, signal: AbortSignal, starts: boolean): void;
  /** `base` for the flight's calls, keeping the tenants' share of each call for the end of the flight. */
  observer(key: string, base: JudgeObserver): JudgeObserver;
  /** The flow the flight's next call waits in: the first tenant still waiting's, else `fallback`. */
  flow(key: string, fallback: Flow | undefined): Flow | undefined;
  /** The flight of `key` ended (any way): its calls are charged to its receivers (see above). */
  settle(key: string): void;
}

/** `event` with its token counts divided by `n` (one payer's share). */
function shareOf(event: CallEvent, n: number): CallEvent {
  if (n === 1) return event;
  return {
    ...event,
    promptTokens: event.promptTokens / n,
    completionTokens: event.completionTokens / n,
    cachedPromptTokens: event.cachedPromptTokens === null ? null : event.cachedPromptTokens / n,
    ...(event.reasoningTokens === undefined ? {} : { reasoningTokens: event.reasoningTokens / n }),
  };
}

export function createFlightPayers(): FlightPayers {
  const flights = new Map<string, FlightSpend>();
  const spendOf = (key: string): FlightSpend => {
    let spend = flights.get(key);
    if (spend === undefined) {
      spend = { members: [], events: [] };
      flights.set(key, spend);
    }
    return spend;
  };

  return {
    enter(key, work, signal, starts) {
      const spend = starts ? spendOf(key) : flights.get(key);
      if (spend === undefined || work === undefined) return;
      const member: Member = { work, left: signal.aborted };
      spend.members.push(member);
      signal.addEventListener('abort', () => (member.left = true), { once: true });
    },
    observer(key, base) {
      return {
        ...base,
        onCall: (event) => {
          base.onCall?.(event);
          const spend = flights.get(key);
          if (spend !== undefined && spend.events.length < MAX_EVENTS) spend.events.push(event);
        },
      };
    },
    flow(key, fallback) {
      const waiting = flights.get(key)?.members.find((m) => !m.left && m.work.flow !== undefined);
      return waiting?.work.flow ?? fallback;
    },
    settle(key) {
      const spend = flights.get(key);
      flights.delete(key);
      if (spend === undefined || spend.events.length === 0) return;
      const receivers = new Set(spend.members.filter((m) => !m.left).map((m) => m.work));
      const payers = receivers.size > 0 ? receivers : new Set(spend.members.map((m) => m.work));
      for (const event of spend.events) {
        const share = shareOf(event, payers.size);
        for (const work of payers) work.onCall?.(share);
      }
    },
  };
}
