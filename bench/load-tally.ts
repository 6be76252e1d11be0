/**
 * What the load generator (bench/load.ts) counts from the server's answers: requests and judgments by
 * status, rewarded and failed judgments, cache hits, request and server-reported item latencies, the first
 * error. Pure: the load generator feeds it each answer.
 */
import { latencySummary, type LatencySummary } from './stats.js';

export interface LoadResult {
  mode: 'groups' | 'rollouts';
  requests: number;
  judgments: number;
  /** Judgments with a reward (status ok or rejected_input). */
  rewarded: number;
  /** Judgments without a reward: failed items and items of failed requests. */
  failed: number;
  /** Items marked `cached: true` (only `/v1/reward` reports it). */
  cached: number;
  statuses: Record<string, number>;
  itemStatuses: Record<string, number>;
  firstError?: string;
  wallMs: number;
  /** Request latency (a group for `groups`, a rollout for `rollouts`), ms. */
  latency: LatencySummary;
  /** Server-reported per-item `latency_ms` (groups only). */
  itemLatency?: LatencySummary;
  /** This process's user+system CPU during the run, ms. */
  cpuMs: number;
  timedOut: boolean;
}

/** Latency samples kept at most (a bounded memory for any run length). */
const MAX_SAMPLES = 2_000_000;

export interface LoadTally {
  /** An answer of `items` judgments: its HTTP status, body text and how long the request took, ms. */
  answered(status: number, text: string, items: number, latencyMs: number): void;
  /** A request of `items` judgments that got no answer (connection error, timeout). */
  failed(err: unknown, items: number): void;
  /** The result once the run ended: `requests` sent, its wall time and this process's CPU, ms. */
  finish(run: { requests: number; wallMs: number; cpuMs: number; timedOut: boolean }): LoadResult;
}

export function createLoadTally(mode: LoadResult['mode']): LoadTally {
  const result: LoadResult = {
    mode,
    requests: 0,
    judgments: 0,
    rewarded: 0,
    failed: 0,
    cached: 0,
    statuses: {},
    itemStatuses: {},
    wallMs: 0,
    latency: latencySummary([]),
    cpuMs: 0,
    timedOut: false,
  };
  const latencies: number[] = [];
  const itemLatencies: number[] = [];
  const bump = (table: Record<string, number>, key: string, by = 1): void => {
    table[key] = (table[key] ?? 0) + by;
  };
  const noteError = (message: string): void => {
    result.firstError ??= message.slice(0, 500);
  };

  const handle = (status: number, text: string, items: number): void => {
    bump(result.statuses, String(status));
    result.judgments += items;
    if (status !== 200) {
      result.failed += items;
      noteError(`HTTP ${status}: ${text}`);
      return;
    }
    const body = JSON.parse(text) as {
      rewards?: Array<number | null>;
      results?: Array<{ status?: string; cached?: boolean; latency_ms?: number; error?: string }>;
    };
    const rewards = body.rewards ?? [];
    for (let j = 0; j < items; j++) {
      if (typeof rewards[j] === 'number') result.rewarded += 1;
      else result.failed += 1;
    }
    for (const r of body.results ?? []) {
      bump(result.itemStatuses, r.status ?? 'unknown');
      if (r.cached === true) result.cached += 1;
      if (typeof r.latency_ms === 'number' && itemLatencies.length < MAX_SAMPLES)
        itemLatencies.push(r.latency_ms);
      if (r.status !== 'ok' && r.error !== undefined) noteError(`item ${r.status ?? '?'}: ${r.error}`);
    }
  };

  return {
    answered(status, text, items, latencyMs) {
      if (latencies.length < MAX_SAMPLES) latencies.push(latencyMs);
      handle(status, text, items);
    },
    failed(err, items) {
      bump(result.statuses, 'error');
      result.judgments += items;
      result.failed += items;
      noteError(err instanceof Error ? `${err.name}: ${err.message}` : String(err));
    },
    finish(run) {
      result.wallMs = run.wallMs;
      result.requests = run.requests;
      result.cpuMs = run.cpuMs;
      result.timedOut = run.timedOut;
      result.latency = latencySummary(latencies);
      if (mode === 'groups') result.itemLatency = latencySummary(itemLatencies);
      return result;
    },
  };
}
