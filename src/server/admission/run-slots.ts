/**
 * The run slots: at most `max` judgments (or comparisons) run at once; the others wait for a slot in two
 * FIFO lanes (priority.ts: the high lane first). A freed slot passes straight to the next waiter. Per-tenant
 * fair queueing (issue 30) is a weighted pick in place of the lanes' FIFO.
 */
import { toError } from '../../errors.js';
import { LaneQueue, type Lane } from './priority.js';

type Release = () => void;

interface Waiter {
  resolve(release: Release): void;
}

export class RunSlots {
  readonly max: number;
  #running = 0;
  readonly #waiters = new LaneQueue<Waiter>();
  /** Told after every change of the running or waiting counts. */
  readonly #onChange: () => void;

  constructor(max: number, onChange: () => void) {
    this.max = max;
    this.#onChange = onChange;
  }

  get running(): number {
    return this.#running;
  }

  get waiting(): number {
    return this.#waiters.size;
  }

  /**
   * Takes a slot, waiting in `lane` when all are busy. Synchronous bookkeeping: the caller counts as running
   * or waiting as soon as this returns. Rejects with the signal's reason if it aborts while waiting.
   */
  acquire(signal: AbortSignal, lane: Lane = 'normal'): Promise<Release> {
    if (signal.aborted) return Promise.reject(toError(signal.reason));
    if (this.#running < this.max) {
      this.#running += 1;
      this.#onChange();
      return Promise.resolve(this.#releaser());
    }
    return new Promise<Release>((resolve, reject) => {
      const waiter: Waiter = {
        resolve: (release) => {
          signal.removeEventListener('abort', onAbort);
          resolve(release);
        },
      };
      const onAbort = (): void => {
        if (this.#waiters.delete(waiter)) this.#onChange();
        reject(toError(signal.reason));
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.#waiters.add(waiter, lane);
      this.#onChange();
    });
  }

  #releaser(): Release {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.#waiters.shift();
      if (next === undefined) {
        this.#running -= 1;
      } else {
        // The slot passes straight to the oldest waiter (high lane first): running stays the same.
        next.resolve(this.#releaser());
      }
      this.#onChange();
    };
  }
}
