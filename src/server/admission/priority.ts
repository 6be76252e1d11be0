/**
 * The priority lane: `priority: "high"` (body) or `x-reward-priority: high` (trainer adapters), for a
 * tenant whose key allows it (`max_priority`, fair-shares.ts). A high
 * judgment waits for a run slot ahead of every queued normal one and its backend calls take a free backend
 * slot ahead of queued normal calls; work already started (a running judgment, a call in flight) is never
 * preempted. High work has its own admission budget, HIGH_PRIORITY_SHARE of the drain rate: the calls
 * admitted as high over time drain out of a leaky bucket at share × drain calls/s, and a high request is
 * admitted while the bucket plus its calls stay within share × drain × its admission horizon (or when the
 * bucket is empty: one request alone is never refused forever). So a flood of "high" gets at most that share
 * of the capacity on average and is refused (`503 RW_OVERLOADED`, reason `priority`) beyond it; training
 * keeps the rest.
 */
import { RewardError } from '../../errors.js';

export type Lane = 'high' | 'normal';

export const PRIORITY_HEADER = 'x-reward-priority';

/** The lane of a request: the body's `priority`, else the `x-reward-priority` header, else normal. */
export function laneOf(body: Lane | undefined, header: string | string[] | undefined): Lane {
  if (body !== undefined) return body;
  if (header === undefined) return 'normal';
  const value = (Array.isArray(header) ? header[0] : header)?.trim().toLowerCase();
  if (value === 'high' || value === 'normal') return value;
  throw new RewardError('RW_BAD_REQUEST', `invalid ${PRIORITY_HEADER} header: must be "high" or "normal"`, {
    details: [{ path: `headers.${PRIORITY_HEADER}`, message: 'must be "high" or "normal"' }],
  });
}

/**
 * The high lane's admission budget: a leaky bucket of admitted high calls, draining at `share` × the
 * current drain rate (calls/s).
 */
export class HighLaneBudget {
  readonly share: number;
  #used = 0;
  #at: number;
  readonly #now: () => number;

  /** `previous`: the budget this one replaces (its share changed): the calls in its bucket carry over. */
  constructor(share: number, now: () => number, previous?: HighLaneBudget) {
    this.share = share;
    this.#now = now;
    this.#at = now();
    if (previous !== undefined) this.#used = previous.#used;
  }

  /** Calls in the bucket now (after draining at `share` × `drainCallsPerS`). */
  level(drainCallsPerS: number): number {
    const t = this.#now();
    this.#used = Math.max(0, this.#used - ((t - this.#at) / 1000) * this.share * drainCallsPerS);
    this.#at = t;
    return this.#used;
  }

  /** Whether `calls` more high calls fit inside `horizonS` at the lane's share of the drain rate. */
  fits(calls: number, drainCallsPerS: number, horizonS: number): boolean {
    const level = this.level(drainCallsPerS);
    if (level === 0) return true;
    return level + calls <= this.share * drainCallsPerS * horizonS;
  }

  /** Seconds until the bucket has room for `calls` more within `horizonS` (what Retry-After says). */
  waitS(calls: number, drainCallsPerS: number, horizonS: number): number {
    const rate = this.share * drainCallsPerS;
    if (rate <= 0) return Infinity;
    const level = this.level(drainCallsPerS);
    // Room for the calls, or an empty bucket (which admits any one request).
    return Math.max(0, Math.min(level + calls - rate * horizonS, level) / rate);
  }

  take(calls: number, drainCallsPerS: number): void {
    this.#used = this.level(drainCallsPerS) + calls;
  }
}
