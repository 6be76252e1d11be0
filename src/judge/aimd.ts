/**
 * The adaptive in-flight limit of one replica (limiter.ts): AIMD on attempt latency, like TCP congestion
 * control. The limit grows while smoothed latency stays near the replica's unloaded baseline (slow start:
 * +1 per success until the first sign of queueing, then +1/limit) and shrinks multiplicatively when it
 * inflates past `tolerance` × baseline + `slackMs` (×0.8) or an attempt is overloaded (×0.5), at most once
 * per round trip.
 */

export interface AdaptiveOptions {
  /** Starting limit (clipped to [1, maxInflight]). Default 16. */
  initial?: number | undefined;
  /**
   * Smoothed latency above `tolerance` × baseline counts as queueing. Default 2: a call queued behind a
   * full slot waits about one service time, while a batching server (vLLM) slows down less than that
   * between moderate and high concurrency, and throttling it there would cost throughput.
   */
  tolerance?: number | undefined;
  /** Absolute slack added to the threshold, ms, so jitter on fast calls is not queueing. Default 50. */
  slackMs?: number | undefined;
}

/** One finished HTTP attempt, as the adaptive limit sees it. */
export interface AttemptSample {
  /** When the attempt was sent (epoch ms, the limiter's clock). */
  sentAt: number;
  latencyMs: number;
  /** A timeout, 429 or 503: the replica is past its capacity whatever the latency says. */
  overloaded: boolean;
  /** When the response headers arrived (epoch ms); undefined when none did. For `control`. */
  headersAt?: number | undefined;
  /** How it ended, for `control` (default: `other` when overloaded, else `ok`). */
  result?: 'ok' | 'timeout' | 'other' | undefined;
  /** Kind of call (its role), for `control`. */
  kind?: string | undefined;
}

const BASELINE_WINDOW = 64;
/** EWMA weight of a new latency sample. */
const SMOOTHING = 0.25;
const WARMUP_SAMPLES = 4;

const clamp = (value: number, min: number, max: number): number => Math.min(max, Math.max(min, value));

/** A float limit (additive increase adds 1/limit); the limiter's slots are its floor. */
export interface AimdLimit {
  readonly value: number;
  /**
   * Feeds one finished attempt; `limiting()` says whether the limit is what holds calls back (only then
   * does it grow: an idle replica proves nothing). True when the limit grew.
   */
  observe(sample: AttemptSample, limiting: () => boolean): boolean;
}

/** The AIMD limit under `maxInflight` (starts at `adaptive.initial`, default 16; `now`: epoch ms). */
export function createAimdLimit(
  maxInflight: number,
  adaptive: AdaptiveOptions,
  now: () => number,
): AimdLimit {
  const tolerance = adaptive.tolerance ?? 2;
  const slackMs = adaptive.slackMs ?? 50;
  let limit = clamp(adaptive.initial ?? 16, 1, maxInflight);
  let slowStart = true;
  let lastDecreaseAt = -Infinity;
  // Latency is smoothed (EWMA) before it is compared, because calls differ by nature (a 400-token analysis
  // takes longer than a 50-token verdict): one slow call is not queueing, a slow run of calls is. The
  // baseline is the minimum smoothed latency over the current and the previous window of BASELINE_WINDOW
  // samples, so it follows a change of prompt mix.
  let smoothed: number | undefined;
  let samples = 0;
  let windowMin = Infinity;
  let previousMin = Infinity;
  let windowCount = 0;

  const decrease = (factor: number, sentAt: number): false => {
    // One decrease per round trip: attempts sent before the last decrease saw the old limit.
    if (sentAt <= lastDecreaseAt) return false;
    limit = Math.max(1, limit * factor);
    slowStart = false;
    lastDecreaseAt = now();
    return false;
  };

  return {
    get value() {
      return limit;
    },
    observe(sample, limiting) {
      if (sample.overloaded) return decrease(0.5, sample.sentAt);
      const current =
        smoothed === undefined ? sample.latencyMs : smoothed + SMOOTHING * (sample.latencyMs - smoothed);
      smoothed = current;
      samples += 1;
      // The first samples only seed the average: a lone first value is not yet a mix.
      if (samples > WARMUP_SAMPLES) {
        windowMin = Math.min(windowMin, current);
        windowCount += 1;
        const baseline = Math.min(windowMin, previousMin);
        if (windowCount >= BASELINE_WINDOW) {
          previousMin = windowMin;
          windowMin = Infinity;
          windowCount = 0;
        }
        if (current > baseline * tolerance + slackMs) return decrease(0.8, sample.sentAt);
      }
      if (!limiting()) return false;
      limit = Math.min(maxInflight, limit + (slowStart ? 1 : 1 / limit));
      return true;
    },
  };
}
