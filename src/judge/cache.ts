/**
 * Judgment cache: an LRU of completed values plus a single-flight map of computations in progress.
 *
 * Each caller that waits on a flight holds a reference tied to its own AbortSignal. When a caller's signal
 * aborts it lets go; when the last reference lets go before the flight settles, the flight's own
 * AbortController aborts, cancelling the LLM calls. A flight shared with another caller keeps running.
 * Values rejected by `isCacheable` (failures) are never stored, so the next caller computes afresh.
 */
import { toError } from '../errors.js';
import { evictOldest } from '../state/bounded.js';

function start<V>(compute: (signal: AbortSignal) => Promise<V>, signal: AbortSignal): Promise<V> {
  try {
    return compute(signal);
  } catch (err) {
    return Promise.reject(toError(err));
  }
}

interface Flight<V> {
  readonly controller: AbortController;
  readonly promise: Promise<V>;
  refs: number;
  settled: boolean;
}

export interface JudgmentCacheOptions<V> {
  /** Completed values kept; 0 disables the LRU (single-flight still coalesces concurrent callers). */
  maxEntries: number;
  /** Only values for which this is true are stored (judge failures and timeouts are not). */
  isCacheable: (value: V) => boolean;
  /** Called (synchronously) when a flight's last caller let go and the flight was aborted. */
  onAbandon?: (() => void) | undefined;
}

export class JudgmentCache<V> {
  readonly #lru = new Map<string, V>();
  readonly #flights = new Map<string, Flight<V>>();
  readonly #maxEntries: number;
  readonly #isCacheable: (value: V) => boolean;
  readonly #onAbandon: (() => void) | undefined;

  constructor(options: JudgmentCacheOptions<V>) {
    this.#maxEntries = options.maxEntries;
    this.#isCacheable = options.isCacheable;
    this.#onAbandon = options.onAbandon;
  }

  /** Completed values held. */
  get size(): number {
    return this.#lru.size;
  }

  /** Computations in progress. */
  get inflight(): number {
    return this.#flights.size;
  }

  /** A completed value, marked most recently used; undefined when absent. */
  get(key: string): V | undefined {
    const value = this.#lru.get(key);
    if (value !== undefined) {
      this.#lru.delete(key);
      this.#lru.set(key, value);
    }
    return value;
  }

  /** True when a completed value for `key` is held (without marking it used). */
  holds(key: string): boolean {
    return this.#lru.has(key);
  }

  /** True while a computation for `key` is in progress (a new caller would join it). */
  has(key: string): boolean {
    return this.#flights.has(key);
  }

  /**
   * Waits for the flight of `key`, holding a reference until it settles or `signal` aborts (then the
   * returned promise rejects with the signal's reason). Undefined when no flight is in progress.
   */
  join(key: string, signal?: AbortSignal): Promise<V> | undefined {
    const flight = this.#flights.get(key);
    return flight === undefined ? undefined : this.#attach(key, flight, signal);
  }

  /**
   * Starts computing `key` and joins it. `compute` receives the flight's signal, aborted once every caller
   * has let go. The caller must have checked `get` and `has` first; an existing flight is an error.
   */
  run(key: string, compute: (signal: AbortSignal) => Promise<V>, signal?: AbortSignal): Promise<V> {
    if (this.#flights.has(key)) throw new Error('judgment cache: flight already in progress');
    const controller = new AbortController();
    const flight: Flight<V> = {
      controller,
      refs: 0,
      settled: false,
      promise: start(compute, controller.signal).then(
        (value) => {
          this.#settle(key, flight);
          if (this.#maxEntries > 0 && !controller.signal.aborted && this.#isCacheable(value)) {
            this.#store(key, value);
          }
          return value;
        },
        (err: unknown) => {
          this.#settle(key, flight);
          throw toError(err);
        },
      ),
    };
    // A flight nobody waits for any more must not surface as an unhandled rejection.
    flight.promise.catch(() => undefined);
    this.#flights.set(key, flight);
    return this.#attach(key, flight, signal);
  }

  /**
   * Stores a completed value obtained elsewhere (another process computed it), subject to the same
   * `isCacheable` rule; no-op with the LRU disabled.
   */
  remember(key: string, value: V): void {
    if (this.#maxEntries > 0 && this.#isCacheable(value)) this.#store(key, value);
  }

  /** Aborts every flight in progress (shutdown past its grace period). */
  abortAll(reason?: unknown): void {
    for (const [key, flight] of this.#flights) {
      this.#flights.delete(key);
      flight.controller.abort(reason);
    }
  }

  clear(): void {
    this.#lru.clear();
  }

  #settle(key: string, flight: Flight<V>): void {
    flight.settled = true;
    if (this.#flights.get(key) === flight) this.#flights.delete(key);
  }

  #store(key: string, value: V): void {
    this.#lru.delete(key);
    this.#lru.set(key, value);
    evictOldest(this.#lru, this.#maxEntries);
  }

  #attach(key: string, flight: Flight<V>, signal: AbortSignal | undefined): Promise<V> {
    flight.refs += 1;
    if (signal === undefined) return flight.promise;
    if (signal.aborted) {
      this.#release(key, flight);
      return Promise.reject(toError(signal.reason));
    }
    return new Promise<V>((resolve, reject) => {
      const onAbort = (): void => {
        this.#release(key, flight);
        reject(toError(signal.reason));
      };
      signal.addEventListener('abort', onAbort, { once: true });
      flight.promise.then(
        (value) => {
          signal.removeEventListener('abort', onAbort);
          resolve(value);
        },
        (err: unknown) => {
          signal.removeEventListener('abort', onAbort);
          reject(toError(err));
        },
      );
    });
  }

  #release(key: string, flight: Flight<V>): void {
    flight.refs -= 1;
    if (flight.refs > 0 || flight.settled) return;
    // Last caller gone: drop the flight so a later caller starts afresh, and cancel its LLM calls.
    if (this.#flights.get(key) === flight) this.#flights.delete(key);
    flight.controller.abort(new DOMException('every caller let go of this judgment', 'AbortError'));
    this.#onAbandon?.();
  }
}
