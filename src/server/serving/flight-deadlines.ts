/**
 * The deadline a flight (one judgment or comparison in progress, shared by every request waiting for it) runs
 * under: the latest deadline of the requests that wait for it. The request that starts a flight registers it;
 * a request that joins moves it later when its own deadline is later (a retry, a duplicate rollout, an
 * overlapping ranking). The engine reads it again whenever it needs it (`FlightDeadline.at`).
 *
 * The entry lives exactly as long as the flight's computation, not as long as the request that started it:
 * a starter that leaves (its client disconnected, it was cancelled, its own deadline passed) must not take
 * the joiners' extension with it, nor stop later joiners from extending. Used by the judgment service and
 * the comparison service alike.
 */

/** A flight's current deadline, epoch ms; only ever moves later. */
export interface FlightDeadline {
  readonly at: number;
}

export interface FlightDeadlines {
  /**
   * Runs `compute` as the flight of `key` under `at`, moved later by `extend` until `compute` settles (then
   * the entry is gone). A newer flight of the same key (after this one was abandoned) replaces the entry;
   * this one's end leaves the newer one's alone.
   */
  run<V>(key: string, at: number, compute: (deadline: FlightDeadline) => Promise<V>): Promise<V>;
  /** A request with deadline `at` joined the flight of `key` (no-op without one, or when `at` is earlier). */
  extend(key: string, at: number): void;
  /** Flights tracked (for tests). */
  readonly size: number;
}

export function createFlightDeadlines(): FlightDeadlines {
  const flights = new Map<string, { at: number }>();
  return {
    get size() {
      return flights.size;
    },
    run<V>(key: string, at: number, compute: (deadline: FlightDeadline) => Promise<V>): Promise<V> {
      const entry = { at };
      flights.set(key, entry);
      const done = (): void => {
        if (flights.get(key) === entry) flights.delete(key);
      };
      let running: Promise<V>;
      try {
        running = compute(entry);
      } catch (err) {
        done();
        throw err;
      }
      return running.finally(done);
    },
    extend(key, at) {
      const entry = flights.get(key);
      if (entry !== undefined && entry.at < at) entry.at = at;
    },
  };
}
