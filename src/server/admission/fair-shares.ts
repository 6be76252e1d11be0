/**
 * Admission's view of the tenants (REWARD_KEYS): each request's work belongs to a flow (its tenant, by
 * weight; `SHARED_FLOW` for everyone when FAIR_QUEUING=false or without keys), and the run slots and the
 * backend slots serve the flows by weighted fair queuing (`judge/fair-queue.ts`). So a request is admitted
 * when its tenant's own work would finish in time at the tenant's fair share, not behind another tenant's
 * backlog:
 *
 * - **Completion.** With backlogs X_j (expected calls admitted, not ended) and weights w_j, the calls that
 *   drain until flow t's backlog plus its new calls c are done are, in the fluid model of fair queuing,
 *   (X_t + c) + Σ_{j≠t} min(X_j, (X_t + c) · w_j / w_t): every other flow drains its weighted share meanwhile,
 *   or all it has. One flow: the whole backlog plus c (first come, first served).
 * - **Memory.** A tenant may hold at most its `fraction` (weight / Σ weights of the judging keys) of
 *   MAX_QUEUED_JUDGMENTS waiting for a run slot, so one tenant's burst cannot fill the queue another needs.
 * - **Priority.** The high lane's budget (HIGH_PRIORITY_SHARE) is split the same way: a tenant's high work
 *   gets HIGH_PRIORITY_SHARE × its fraction of the drain rate, and only a tenant whose key allows it
 *   (`max_priority: "high"`) has a high lane at all.
 */
import type { RewardError } from '../../errors.js';
import { SHARED_FLOW, type Flow } from '../../judge/fair-queue.js';
import type { CallEvent } from '../../judge/types.js';
import { evictOldest } from '../../state/bounded.js';
import { HighLaneBudget, type Lane } from './priority.js';

/** What admission and the serving services know about the tenant of one request (tenants/ builds it). */
export interface TenantWork {
  /** Its fair-queue flow (name and weight); undefined = the shared flow (FAIR_QUEUING=false). */
  flow?: Flow | undefined;
  /** Its guaranteed part of the server (queue memory, high lane): weight / Σ weights. Default 1. */
  fraction?: number | undefined;
  /** The highest lane it may use (`max_priority`); a higher request is served in this one. Default high. */
  maxPriority?: Lane | undefined;
  /** Its own refusal of new work (its token budget, 429), checked with the server's. */
  gate?: (() => RewardError | undefined) | undefined;
  /** Told about every backend call made for the judgments it started (its spend). */
  onCall?: ((event: CallEvent) => void) | undefined;
  /** CACHE_SCOPE=tenant: mixed into the judgment keys, so no judgment is shared with another tenant. */
  cacheScope?: string | undefined;
}

/** The lane a request asked for, capped by its tenant's `max_priority`. */
export const cappedLane = (lane: Lane, work: TenantWork | undefined): Lane =>
  lane === 'high' && work?.maxPriority !== 'normal' ? 'high' : 'normal';

/** High-lane budgets kept (one per tenant seen; a reload can add names). */
const MAX_HIGH_BUDGETS = 1024;

export class FairShares {
  readonly #backlog = new Map<string, { weight: number; calls: number }>();
  readonly #high = new Map<string, HighLaneBudget>();
  readonly #highShare: number;
  readonly #now: () => number;

  constructor(highShare: number, now: () => number) {
    this.#highShare = highShare;
    this.#now = now;
  }

  /** HIGH_PRIORITY_SHARE (0 = no high lane for anyone). */
  get highShare(): number {
    return this.#highShare;
  }

  /** `calls` expected calls of `flow` admitted. */
  add(flow: Flow, calls: number): void {
    const b = this.#backlog.get(flow.name);
    if (b === undefined) this.#backlog.set(flow.name, { weight: flow.weight, calls });
    else {
      b.calls += calls;
      b.weight = flow.weight;
    }
  }

  /** `calls` of `flow`'s admitted work ended (any way). */
  remove(flow: Flow, calls: number): void {
    const b = this.#backlog.get(flow.name);
    if (b === undefined) return;
    b.calls -= calls;
    if (b.calls <= 1e-9) this.#backlog.delete(flow.name);
  }

  /** Expected calls admitted and not ended, every flow. */
  get totalCalls(): number {
    let total = 0;
    for (const b of this.#backlog.values()) total += b.calls;
    return total;
  }

  /**
   * Expected calls of `flow` admitted and not ended. The shared flow (work of no tenant: FAIR_QUEUING=false,
   * where it is all the work, or a probe such as /readyz's) sees every flow's: the server as a whole.
   */
  backlogOf(flow: Flow): number {
    if (flow.name === SHARED_FLOW.name) return this.totalCalls;
    return this.#backlog.get(flow.name)?.calls ?? 0;
  }

  /**
   * Calls that drain until `flow`'s backlog and `calls` new calls are done, under weighted fair queuing
   * (the module comment); with one flow, the whole backlog plus `calls`.
   */
  completionCalls(flow: Flow, calls: number): number {
    const own = this.backlogOf(flow) + calls;
    if (flow.name === SHARED_FLOW.name) return own;
    let total = own;
    for (const [name, b] of this.#backlog) {
      if (name === flow.name) continue;
      total += Math.min(b.calls, (own * b.weight) / flow.weight);
    }
    return total;
  }

  /** Part of the drain rate `flow` gets now: its weight over the weights of the flows with a backlog. */
  shareOf(flow: Flow): number {
    let weights = flow.weight;
    for (const [name, b] of this.#backlog) if (name !== flow.name) weights += b.weight;
    return flow.weight / weights;
  }

  /** The high-lane budget of `flow`: HIGH_PRIORITY_SHARE × `fraction` of the drain rate. */
  highLane(flow: Flow, fraction: number): HighLaneBudget {
    const share = this.#highShare * fraction;
    let budget = this.#high.get(flow.name);
    if (budget === undefined || budget.share !== share) {
      budget = new HighLaneBudget(share, this.#now, budget);
      this.#high.delete(flow.name);
      this.#high.set(flow.name, budget);
      evictOldest(this.#high, MAX_HIGH_BUDGETS);
    }
    return budget;
  }
}

/** The flow of a request's work: its tenant's, or the shared one. */
export const flowOf = (work: TenantWork | undefined): Flow => work?.flow ?? SHARED_FLOW;
