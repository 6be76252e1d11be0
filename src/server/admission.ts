/**
 * Admission control for judgments: at most `maxConcurrent` run at once and at most `maxQueue` wait for a
 * slot. A request is admitted whole or not at all (`canAdmit(n)` before starting any of its judgments), so
 * a refused request never leaves half its work queued.
 */
import { toError } from '../errors.js';

type Release = () => void;

interface Waiter {
  resolve(release: Release): void;
}

export interface AdmissionOptions {
  maxConcurrent: number;
  maxQueue: number;
  /** Called whenever the running or waiting count changes (feeds the gauges). */
  onChange?: ((running: number, waiting: number) => void) | undefined;
}

const MIN_RETRY_AFTER_S = 1;
const MAX_RETRY_AFTER_S = 60;
/** Smoothing of the judgment-duration average behind Retry-After. */
const EWMA_ALPHA = 0.1;

export class Admission {
  readonly maxConcurrent: number;
  readonly maxQueue: number;
  #running = 0;
  readonly #waiters = new Set<Waiter>();
  readonly #onChange: ((running: number, waiting: number) => void) | undefined;
  #avgDurationMs = 1000;

  constructor(options: AdmissionOptions) {
    this.maxConcurrent = options.maxConcurrent;
    this.maxQueue = options.maxQueue;
    this.#onChange = options.onChange;
  }

  get running(): number {
    return this.#running;
  }

  get waiting(): number {
    return this.#waiters.size;
  }

  /** True when `n` more judgments fit in the free run slots plus the free queue places. */
  canAdmit(n: number): boolean {
    return this.#running + this.#waiters.size + n <= this.maxConcurrent + this.maxQueue;
  }

  /** Not even one more judgment would be admitted. */
  get saturated(): boolean {
    return !this.canAdmit(1);
  }

  /** Seconds a refused client should wait: the queue ahead of it divided by the drain rate, 1–60 s. */
  retryAfterSeconds(n = 1): number {
    const ahead = this.#waiters.size + n;
    const seconds = Math.ceil(((ahead / this.maxConcurrent) * this.#avgDurationMs) / 1000);
    return Math.min(MAX_RETRY_AFTER_S, Math.max(MIN_RETRY_AFTER_S, seconds));
  }

  /** Feeds the duration average behind `retryAfterSeconds`. */
  recordDuration(ms: number): void {
    this.#avgDurationMs += EWMA_ALPHA * (ms - this.#avgDurationMs);
  }

  /**
   * Takes a run slot, waiting FIFO when all are busy. Synchronous bookkeeping: the judgment counts as
   * running or waiting as soon as this returns. Rejects with the signal's reason if it aborts while waiting.
   */
  acquire(signal: AbortSignal): Promise<Release> {
    if (signal.aborted) return Promise.reject(toError(signal.reason));
    if (this.#running < this.maxConcurrent) {
      this.#running += 1;
      this.#changed();
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
        if (this.#waiters.delete(waiter)) this.#changed();
        reject(toError(signal.reason));
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.#waiters.add(waiter);
      this.#changed();
    });
  }

  #releaser(): Release {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.#waiters.values().next();
      if (next.done === true) {
        this.#running -= 1;
      } else {
        // The slot passes straight to the oldest waiter: running stays the same.
        this.#waiters.delete(next.value);
        next.value.resolve(this.#releaser());
      }
      this.#changed();
    };
  }

  #changed(): void {
    this.#onChange?.(this.#running, this.#waiters.size);
  }
}
