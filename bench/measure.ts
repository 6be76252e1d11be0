/**
 * What a benchmark measures from outside the processes: the server's /metrics, its log's growth, and the
 * machine's other load (bench/procs.ts reads /proc for CPU and memory).
 */
import { statSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';

import { machineBusyMs } from './procs.js';

/** Sums every sample of a metric (all label sets) in a Prometheus text exposition; filter by a label. */
export function sumMetric(text: string, name: string, label?: string): number {
  let total = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (!(rest.startsWith('{') || rest.startsWith(' '))) continue;
    if (label !== undefined && !rest.includes(label)) continue;
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (Number.isFinite(value)) total += value;
  }
  return total;
}

/** The server's cache hits from its /metrics (undefined when not scrapeable). */
export async function scrapeCacheHits(server: { url: string }): Promise<number | undefined> {
  try {
    const res = await fetch(`${server.url}/metrics`, { signal: AbortSignal.timeout(5_000) });
    const text = await res.text();
    if (!res.ok || !text.includes('reward_cache_lookups_total')) return undefined;
    return sumMetric(text, 'reward_cache_lookups_total', 'result="hit"');
  } catch {
    return undefined;
  }
}

/** A file's size in bytes, 0 when it does not exist. */
export const fileSize = (path: string): number => {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
};

/** Cores used by the whole machine over `ms` (nothing of ours runs meanwhile). */
async function backgroundCores(ms: number): Promise<number> {
  const m0 = machineBusyMs();
  const t0 = performance.now();
  await delay(ms);
  return (machineBusyMs() - m0) / (performance.now() - t0);
}

/** Waits (bounded) until the machine is quiet; returns the last background load measured, in cores. */
export async function waitQuiet(maxSeconds: number, log: (line: string) => void): Promise<number> {
  const until = performance.now() + maxSeconds * 1000;
  let cores = await backgroundCores(2_000);
  for (let i = 0; i < 10_000 && cores > 0.15 && performance.now() < until; i++) {
    if (i % 15 === 0) log(`machine busy (${cores.toFixed(2)} cores used by other processes); waiting`);
    cores = await backgroundCores(2_000);
  }
  return cores;
}
