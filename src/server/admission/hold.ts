/**
 * Requests held before admission, in arrival order: those that fit the judge fleet's optimistic capacity
 * but not its proven one while the capacity is still being measured (capacity.ts). Nothing of a held
 * request has started; it waits here — in this server, where its deadline, its client's disconnect and
 * `POST /v1/cancel` reach it — and is decided again whenever the estimate or the backlog changes: admitted
 * (its calls reserved in the backlog at once, so the next held request sees them), refused (503 with
 * Retry-After), or left waiting. A request that arrives while others are held waits behind them: the
 * queue is first come, first served.
 *
 * One FIFO for now (the normal lane; the high lane has its own budget and is never held). Per-tenant fair
 * queueing (issue 30) replaces `#queue` with one queue per tenant and a weighted pick in `next`.
 */
import type { Refusal } from './fit.js';

/** While requests are held, how often they are decided again without another event, ms. */
const TICK_MS = 50;

/** How a held request's wait ended. */
export type HoldVerdict =
  | { kind: 'admit'; deadline: number }
  | { kind: 'refuse'; refusal: Refusal }
  /** Aborted (client gone, cancelled) or its deadline passed while held. */
  | { kind: 'gone' };

/** A request's place in the queue. */
export interface HoldPlace {
  /** Backend calls reserved for it once admitted (the backlog holds them until `leave`). */
  readonly reservedCalls: number;
  /** Resolves when it was decided, or gone. */
  readonly verdict: Promise<HoldVerdict>;
  /** Leaves the queue (and gives its reservation back); idempotent. */
  leave(): void;
}

/** What the queue asks admission about one held request, in order. */
export type HoldDecision = HoldVerdict | { kind: 'wait' };

interface Entry {
  calls: number;
  decide: () => HoldDecision;
  resolve: (verdict: HoldVerdict) => void;
  place: Place;
}

interface Place extends HoldPlace {
  reservedCalls: number;
}

export class HoldQueue {
  readonly #queue = new Set<Entry>();
  #timer: NodeJS.Timeout | undefined;
  #processing = false;
  /** Moves calls into (> 0: a held request admitted) or out of (< 0: it left) admission's backlog. */
  readonly #reserve: (calls: number) => void;

  constructor(reserve: (calls: number) => void) {
    this.#reserve = reserve;
  }

  get size(): number {
    return this.#queue.size;
  }

  /**
   * Holds a request of `calls` new backend calls. `decide` is asked in queue order at every `process`;
   * `signal` aborting (or `deadline` passing) takes it out.
   */
  hold(calls: number, decide: () => HoldDecision, signal: AbortSignal, deadline: number): HoldPlace {
    let resolve: (verdict: HoldVerdict) => void = () => {};
    const verdict = new Promise<HoldVerdict>((r) => {
      resolve = r;
    });
    let left = false;
    const timer = setTimeout(() => finish({ kind: 'gone' }), Math.max(0, deadline - Date.now()));
    timer.unref();
    const onAbort = (): void => finish({ kind: 'gone' });
    const finish = (v: HoldVerdict): void => {
      if (!this.#queue.delete(entry) && v.kind !== 'gone') return;
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      if (v.kind === 'admit') {
        place.reservedCalls = entry.calls;
        this.#reserve(entry.calls);
      }
      resolve(v);
    };
    const place: Place = {
      reservedCalls: 0,
      verdict,
      leave: () => {
        if (left) return;
        left = true;
        finish({ kind: 'gone' });
        if (place.reservedCalls > 0) this.#reserve(-place.reservedCalls);
        place.reservedCalls = 0;
      },
    };
    const entry: Entry = { calls, decide, resolve: finish, place };
    this.#queue.add(entry);
    signal.addEventListener('abort', onAbort, { once: true });
    if (signal.aborted) onAbort();
    this.#schedule();
    return place;
  }

  /**
   * Decides held requests in order until one must keep waiting; call on every change of the backlog or
   * the estimate (a timer does every TICK_MS meanwhile). Re-entrant calls (a decision that changes the
   * backlog) return at once.
   */
  process(): void {
    if (this.#queue.size === 0 || this.#processing) return;
    this.#processing = true;
    try {
      for (const entry of this.#queue) {
        const d = entry.decide();
        if (d.kind === 'wait') break;
        entry.resolve(d);
      }
    } finally {
      this.#processing = false;
    }
    this.#schedule();
  }

  #schedule(): void {
    if (this.#queue.size === 0 || this.#timer !== undefined) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.process();
    }, TICK_MS);
    this.#timer.unref();
  }
}
