/**
 * The rate an engine has shown it completes calls at, before a completion-rate measurement exists (the
 * capacity estimate: src/server/admission/capacity.ts), from the in-flight control's view of one replica:
 * its engine readings and its successful attempts.
 *
 * Little's law (λ = L / W) per attempt: L = the engine's load (batch + queue) when it was sent — the lower of
 * the readings on either side of its sending, since a FIFO call waits for that much to drain — and W its
 * latency. Over the last SHOWN_SAMPLES attempts under the most load the engine was given (at least half of
 * it: unloaded probes show the rate of one sequence, not of a batch), λ = mean L ÷ mean W (the mean of each
 * L / W is biased up by the calls that were served at once). The rate at capacity is the same over attempts
 * during which the engine ran its capacity throughout (at least 2 × SHOWN_MIN of them).
 */
import type { EngineReading } from './engine-metrics.js';

/** Attempts in the shown rate, and the fewest that make one (twice as many for the rate at capacity). */
export const SHOWN_SAMPLES = 16;
export const SHOWN_MIN = 4;
/** How long an attempt counts, ms (as long as the largest batch seen counts as proven). */
export const SHOWN_TTL_MS = 60_000;
/** Engine readings kept to place an attempt's sending between two of them. */
const READINGS_KEPT = 256;

/** What the capacity estimate reads (`ControlSnapshot.shown`). */
export interface ShownRate {
  /** Calls/s under the most load given; undefined before SHOWN_MIN attempts. */
  callsPerS: number | undefined;
  /** That load (batch + queue), calls; 0 before any attempt. */
  load: number;
  /** Calls/s while the engine ran its capacity; undefined before 2 × SHOWN_MIN such attempts or a capacity. */
  fullCallsPerS: number | undefined;
}

/** One successful attempt as the shown rate sees it. */
interface ShownSample {
  latencyMs: number;
  /** The engine's load when it was sent. */
  load: number;
  /** The engine's lowest batch during its life. */
  running: number;
  /** When it ended (epoch ms). */
  at: number;
}

/** Little's law over `samples`, calls/s; undefined below `fewest` of them. */
function littleRate(samples: readonly ShownSample[], fewest: number): number | undefined {
  if (samples.length < fewest) return undefined;
  let load = 0;
  let ms = 0;
  for (const s of samples) {
    load += s.load;
    ms += s.latencyMs;
  }
  return ms > 0 ? (load * 1000) / ms : undefined;
}

export function createShownRate(now: () => number) {
  /** Recent readings' time (requested), batch and load, oldest first. */
  const readings: Array<{ at: number; running: number; load: number }> = [];
  const samples: ShownSample[] = [];
  return {
    /** A fresh engine reading. */
    reading(r: Pick<EngineReading, 'requestedAt' | 'running' | 'waiting'>): void {
      readings.push({ at: r.requestedAt, running: r.running, load: r.running + r.waiting });
      if (readings.length > READINGS_KEPT) readings.shift();
    },
    /** One successful attempt (epoch ms). */
    attempt(sample: { sentAt: number; endedAt: number }): void {
      const ms = sample.endedAt - sample.sentAt;
      if (!(ms > 0)) return;
      let after: { load: number } | undefined;
      let running = Infinity;
      for (let i = readings.length - 1; i >= 0; i--) {
        const r = readings[i];
        if (r === undefined || r.at > sample.endedAt) continue;
        running = Math.min(running, r.running);
        if (r.at > sample.sentAt) {
          after = r;
          continue;
        }
        // Without a reading on either side of its sending, its load is unknown.
        if (after === undefined) return;
        const load = Math.min(r.load, after.load);
        if (load >= 1) samples.push({ latencyMs: ms, load, running, at: sample.endedAt });
        if (samples.length > 4 * SHOWN_SAMPLES) samples.shift();
        return;
      }
    },
    /** The rates now; `capacity`: the engine's, when known. */
    snapshot(capacity: number | undefined): ShownRate {
      const since = now() - SHOWN_TTL_MS;
      const recent = samples.filter((s) => s.at >= since);
      let top = 0;
      for (const s of recent) top = Math.max(top, s.load);
      const last = recent.filter((s) => s.load >= top / 2).slice(-SHOWN_SAMPLES);
      const full =
        capacity === undefined ? [] : recent.filter((s) => s.running >= capacity).slice(-SHOWN_SAMPLES);
      return {
        callsPerS: littleRate(last, SHOWN_MIN),
        load: top,
        fullCallsPerS: littleRate(full, 2 * SHOWN_MIN),
      };
    },
  };
}
