/**
 * This process's own event-loop lag, so that what a backend call's latency says about the engine can be
 * told apart from what it says about us: a reply that arrived on the socket while our loop was busy parsing
 * a storm of requests is read late, and that delay is ours, not the engine's (issue 29: the old adaptive
 * limit read our CPU saturation as backend queueing).
 *
 * `perf_hooks.monitorEventLoopDelay` (a libuv timer, sampled natively) is read every `SLICE_MS`: each
 * reading, the largest delay seen in that slice, goes into a ring that covers the last `RING` slices, so
 * `maxLagMs(from, to)` answers "how late could a callback have run between `from` and `to`". One monitor
 * per process, shared by every user (reference-counted: started by the first `acquire`, stopped with the
 * last release); its timers are unref'd and never hold the process open.
 */
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';

/** How often the histogram is read (and reset), ms. */
const SLICE_MS = 100;
/** Slices kept: 60 s. An attempt older than that is judged by the oldest slice kept. */
const RING = 600;
/** The histogram's own sampling resolution, ms. */
const RESOLUTION_MS = 10;

export interface LoopLag {
  /**
   * The largest event-loop delay seen between `fromMs` and `toMs` (epoch ms), in ms; 0 when nothing was
   * measured there (the monitor had not run yet). The slice being filled now counts with its maximum so far.
   */
  maxLagMs(fromMs: number, toMs: number): number;
  /** Stops this user's share of the monitor (the monitor stops with its last user). */
  release(): void;
}

interface Monitor {
  histogram: IntervalHistogram;
  timer: NodeJS.Timeout;
  /** Slice end times (epoch ms) and their maxima (ms), a ring. */
  ends: Float64Array;
  maxima: Float64Array;
  next: number;
  users: number;
}

let shared: Monitor | undefined;

/**
 * The slice's largest delay beyond the sampling timer's own period, ms: the histogram reports the time
 * between two samples (ns; 0 when it has none), so an idle loop reads about RESOLUTION_MS.
 */
const lagOf = (histogram: IntervalHistogram): number => Math.max(0, histogram.max / 1e6 - RESOLUTION_MS);

function start(): Monitor {
  const histogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  histogram.enable();
  const monitor: Monitor = {
    histogram,
    ends: new Float64Array(RING).fill(-Infinity),
    maxima: new Float64Array(RING),
    next: 0,
    users: 0,
    timer: setInterval(() => {
      monitor.ends[monitor.next] = Date.now();
      monitor.maxima[monitor.next] = lagOf(histogram);
      monitor.next = (monitor.next + 1) % RING;
      histogram.reset();
    }, SLICE_MS),
  };
  monitor.timer.unref();
  return monitor;
}

/** A user's handle on the process's event-loop lag monitor. */
export function acquireLoopLag(): LoopLag {
  shared ??= start();
  const monitor = shared;
  monitor.users += 1;
  let released = false;
  return {
    maxLagMs(fromMs, toMs) {
      let max = 0;
      // Newest first, back to the first slice that ended before `fromMs`. A slice ending at `end` covers
      // about (end − SLICE_MS, end] (later when it was itself delayed).
      const newest = monitor.ends[(monitor.next + RING - 1) % RING] ?? -Infinity;
      for (let k = 1; k <= RING; k++) {
        const i = (monitor.next + RING - k) % RING;
        const end = monitor.ends[i] ?? -Infinity;
        if (end < fromMs) break;
        if (end - SLICE_MS <= toMs) max = Math.max(max, monitor.maxima[i] ?? 0);
      }
      // The slice being filled, when the interval reaches into it.
      return toMs > newest ? Math.max(max, lagOf(monitor.histogram)) : max;
    },
    release() {
      if (released) return;
      released = true;
      monitor.users -= 1;
      if (monitor.users > 0 || shared !== monitor) return;
      clearInterval(monitor.timer);
      monitor.histogram.disable();
      shared = undefined;
    },
  };
}
