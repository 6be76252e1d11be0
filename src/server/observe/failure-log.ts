/**
 * The rate-limited warning an operator sees at `info` when judging goes wrong: when at least `rate` of the
 * judgments over an interval failed or timed out, one line with the counts by reason; at most one such
 * line per interval.
 */
import type { Judgment } from '../../judge/types.js';

export interface FailureMonitorOptions {
  /** Fraction of judgments (0–1) that must have failed for a warning. */
  rate: number;
  /** The counting window and the rate limit, ms. */
  intervalMs: number;
  /** Judgments a window needs before a rate means anything. Default 20. */
  minJudgments?: number | undefined;
  warn: (fields: Record<string, unknown>, message: string) => void;
  /** Clock (ms). Default `Date.now`. */
  now?: (() => number) | undefined;
}

export interface FailureMonitor {
  /** Counts one computed judgment (cache hits are not judgments). */
  record(judgment: Judgment): void;
}

/** The reason a failure is counted under: `timeout`, or its error code (bounded: RW_* codes). */
function reasonOf(judgment: Judgment): string | undefined {
  if (judgment.status === 'timeout') return 'timeout';
  if (judgment.status === 'judge_error' || judgment.status === 'overloaded')
    return judgment.error?.code ?? judgment.status;
  return undefined;
}

export function createFailureMonitor(options: FailureMonitorOptions): FailureMonitor {
  const now = options.now ?? Date.now;
  const minJudgments = options.minJudgments ?? 20;
  let windowStart = now();
  let lastWarnAt = -Infinity;
  let total = 0;
  let failed = 0;
  const byReason = new Map<string, number>();

  const reset = (t: number): void => {
    windowStart = t;
    total = 0;
    failed = 0;
    byReason.clear();
  };

  return {
    record(judgment) {
      total += 1;
      const reason = reasonOf(judgment);
      if (reason !== undefined) {
        failed += 1;
        byReason.set(reason, (byReason.get(reason) ?? 0) + 1);
      }
      const t = now();
      if (t - lastWarnAt >= options.intervalMs && total >= minJudgments && failed / total >= options.rate) {
        options.warn(
          {
            failed,
            judgments: total,
            failure_rate: Math.round((failed / total) * 1000) / 1000,
            window_s: Math.round((t - windowStart) / 100) / 10,
            by_reason: Object.fromEntries([...byReason].sort((a, b) => b[1] - a[1])),
          },
          'judge failures above threshold',
        );
        lastWarnAt = t;
        reset(t);
      } else if (t - windowStart >= options.intervalMs) {
        reset(t);
      }
    },
  };
}
