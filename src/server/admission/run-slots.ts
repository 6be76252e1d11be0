/**
 * Admission's run slots (MAX_CONCURRENT_JUDGMENTS): a judgment holds one while it runs. When all are busy,
 * the waiters are served by lane (high first), then by tenant flow with weighted fair queuing, then FIFO
 * (`judge/fair-queue.ts`). A freed slot passes straight to the next waiter; nothing running is preempted.
 *
 * A tenant's guaranteed slots (its fraction × the slots, fair-shares.ts): a tenant holding fewer starts at
 * once even while others hold every slot, so a run arriving beside another's step does not wait for that
 * step's judgments to finish (they hold their slots while their calls queue at the backend). The running
 * count may then pass `max` by the guarantees not yet used (at most `max` more); while it does, a freed slot
 * goes only to a waiter whose tenant is still below its guarantee (else it is retired), so the count comes
 * back under `max` without holding up the tenant the guarantee is for.
 */
import { toError } from '../../errors.js';
import { FairQueue, type Flow } from '../../judge/fair-queue.js';
import type { Lane } from './priority.js';

export type Release = () => void;

interface Waiter {
  resolve(release: Release): void;
  /** Its tenant flow's name (the slot it is handed is held by that flow). */
  flow: string | undefined;
  /** Slots its flow may hold beyond `max` (its guarantee). */
  guaranteed: number;
}

export class RunSlots {
  readonly max: number;
  #running = 0;
  readonly #waiters = new FairQueue<Waiter>();
  readonly #changed: () => void;

  /** `changed`: called after every change of the running or waiting counts. */
  constructor(max: number, changed: () => void) {
    this.max = max;
    this.#changed = changed;
  }

  get running(): number {
    return this.#running;
  }

  get waiting(): number {
    return this.#waiters.size;
  }

  /** Judgments of the flow named `name` waiting for a slot. */
  waitingOf(name: string): number {
    return this.#waiters.sizeOf(name);
  }

  /** Flows holding or waiting for slots (introspection). */
  flows(): ReturnType<FairQueue<Waiter>['flows']> {
    return this.#waiters.flows();
  }

  /**
   * Takes a slot, waiting in `lane` and `flow` when all are busy, unless `flow` holds fewer than its
   * `guaranteed` slots (default none beyond the free ones). Synchronous bookkeeping: the judgment counts as
   * running or waiting as soon as this returns. Rejects with the signal's reason if it aborts while waiting.
   */
  acquire(signal: AbortSignal, lane: Lane = 'normal', flow?: Flow, guaranteed = 0): Promise<Release> {
    if (signal.aborted) return Promise.reject(toError(signal.reason));
    const below = flow !== undefined && this.#waiters.heldBy(flow.name) < guaranteed;
    if (this.#running < this.max || below) {
      this.#running += 1;
      this.#waiters.hold(flow);
      this.#changed();
      return Promise.resolve(this.#releaser(flow?.name));
    }
    return new Promise<Release>((resolve, reject) => {
      const waiter: Waiter = {
        flow: flow?.name,
        guaranteed,
        resolve: (release) => {
          signal.removeEventListener('abort', onAbort);
          resolve(release);
        },
      };
      const onAbort = (): void => {
        if (this.#waiters.delete(waiter)) this.#changed();
        reject(toError(signal.reason));
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.#waiters.add(waiter, flow, lane);
      this.#changed();
    });
  }

  #releaser(flow: string | undefined): Release {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#waiters.release(flow);
      // Over `max` (guaranteed slots were taken beyond it): this slot is retired, unless the next waiter's
      // tenant is still below its guarantee.
      const peeked = this.#waiters.peek();
      const below = peeked?.flow !== undefined && this.#waiters.heldBy(peeked.flow) < peeked.guaranteed;
      const next = this.#running <= this.max || below ? this.#waiters.shift() : undefined;
      if (next === undefined) {
        this.#running -= 1;
      } else {
        // The slot passes straight to the next waiter (high lane, fair share): running stays the same.
        next.resolve(this.#releaser(next.flow));
      }
      this.#changed();
    };
  }
}
