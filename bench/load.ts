/**
 * Load generator (a separate process): keep-alive undici Pool, a bounded number of requests in flight,
 * bounded in count and in time. Started by the orchestrator (bench/harness.ts) with the protocol of
 * bench/child.ts; prints `RESULT <LoadResult>`.
 *
 *   --mode groups    POST /v1/reward, one GRPO group of --group-size unique candidates per request
 *   --mode rollouts  POST /get_reward (OpenRLHF), one rollout per request
 */
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { readyThenGo, send } from './child.js';
import { BLOCK, DEFAULT_DATASET, groupBody, loadCorpus, rolloutBody } from './data.js';
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

const MAX_SAMPLES = 2_000_000;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      url: { type: 'string' },
      mode: { type: 'string', default: 'rollouts' },
      start: { type: 'string', default: '0' },
      count: { type: 'string', default: '1000' },
      concurrency: { type: 'string', default: '256' },
      'group-size': { type: 'string', default: String(BLOCK) },
      'max-seconds': { type: 'string', default: '60' },
      dataset: { type: 'string', default: DEFAULT_DATASET },
      graph: { type: 'string', default: 'analysts-2' },
    },
    strict: true,
  });
  if (values.url === undefined) throw new Error('--url is required');
  const mode = values.mode;
  if (mode !== 'groups' && mode !== 'rollouts') throw new Error(`--mode: groups or rollouts, got ${mode}`);
  const start = Number(values.start);
  const count = Number(values.count);
  const concurrency = Number(values.concurrency);
  const groupSize = Number(values['group-size']);
  const maxMs = Number(values['max-seconds']) * 1000;
  const perRequest = mode === 'groups' ? groupSize : 1;
  const requests = Math.ceil(count / perRequest);
  const corpus = loadCorpus(values.dataset);

  const url = new URL(values.url);
  if (url.hostname !== '127.0.0.1' && url.hostname !== 'localhost') throw new Error('loopback only');
  const pool = new Pool(url.origin, {
    connections: concurrency,
    pipelining: 1,
    keepAliveTimeout: 60_000,
    headersTimeout: maxMs + 30_000,
    bodyTimeout: maxMs + 30_000,
  });
  const path = mode === 'groups' ? '/v1/reward' : '/get_reward';
  const headers = { 'content-type': 'application/json' };
  const bodyFor = (i: number): string =>
    mode === 'groups'
      ? groupBody(corpus, start + i * BLOCK, groupSize, values.graph)
      : rolloutBody(corpus, start + i);

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

  await readyThenGo();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  let next = 0;
  let done = 0;

  const worker = async (): Promise<void> => {
    while (next < requests) {
      if (performance.now() - t0 > maxMs) {
        result.timedOut = true;
        return;
      }
      const i = next++;
      const items = mode === 'groups' ? Math.min(groupSize, count - i * groupSize) : 1;
      const body =
        mode === 'groups' && items < groupSize
          ? groupBody(corpus, start + i * BLOCK, items, values.graph)
          : bodyFor(i);
      const sent = performance.now();
      try {
        const res = await pool.request({ method: 'POST', path, headers, body });
        const text = await res.body.text();
        if (latencies.length < MAX_SAMPLES) latencies.push(performance.now() - sent);
        handle(res.statusCode, text, items);
      } catch (err) {
        bump(result.statuses, 'error');
        result.judgments += items;
        result.failed += items;
        noteError(err instanceof Error ? `${err.name}: ${err.message}` : String(err));
      }
      done += 1;
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, requests) }, worker));
  result.wallMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  result.requests = done;
  result.cpuMs = (cpu.user + cpu.system) / 1000;
  result.latency = latencySummary(latencies);
  if (mode === 'groups') result.itemLatency = latencySummary(itemLatencies);
  await pool.close();
  send('RESULT', result);
}

await main();
