/**
 * WORKERS=N, in process: the primary's merged /metrics (src/server/process/cluster-metrics.ts) over fake
 * workers that answer with real prom-client registries, and the restart back-off (cluster.ts). The process
 * suite (cluster.test.ts) runs the same through real workers.
 */
import { Counter, Gauge, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';

import { createMetricsMerger, type ClusterMember } from '../../src/server/process/cluster-metrics.js';
import { createRestartBackoff } from '../../src/server/process/cluster.js';

interface FakeWorker extends ClusterMember {
  registry: Registry;
  count: Counter;
  gauge: Gauge;
  /** Whether it answers the primary's asks. */
  answers: boolean;
  received: unknown[];
}

type Merger = ReturnType<typeof createMetricsMerger>;

function fakeWorker(id: number, merger: () => Merger): FakeWorker {
  const registry = new Registry();
  const count = new Counter({ name: 'reward_things_total', help: 'h', registers: [registry] });
  const gauge = new Gauge({ name: 'reward_level', help: 'h', registers: [registry], aggregator: 'sum' });
  const worker: FakeWorker = {
    id,
    registry,
    count,
    gauge,
    answers: true,
    received: [],
    send(message) {
      worker.received.push(message);
      const ask = message as { type: string; id: number };
      if (ask.type !== 'reward:metrics-ask' || !worker.answers) return true;
      void registry.getMetricsAsJSON().then((metrics) => {
        // A copy, as IPC delivers it (prom-client's JSON shares the live values).
        const copy = structuredClone(metrics);
        merger().onMessage(worker, { type: 'reward:metrics-snapshot', id: ask.id, metrics: copy });
      });
      return true;
    },
  };
  return worker;
}

function cluster(n: number): { workers: FakeWorker[]; live: Set<FakeWorker>; merger: Merger; own: Registry } {
  const own = new Registry();
  new Gauge({ name: 'reward_workers', help: 'h', registers: [own] }).set(n);
  const live = new Set<FakeWorker>();
  const merger = createMetricsMerger({ alive: () => [...live], registry: own, askTimeoutMs: 50 });
  const workers = Array.from({ length: n }, (_, i) => fakeWorker(i + 1, () => merger));
  for (const w of workers) live.add(w);
  return { workers, live, merger, own };
}

const value = (text: string, name: string): number | undefined => {
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
};

describe('createMetricsMerger', () => {
  it('sums every live worker’s counters and gauges, plus the primary’s own registry', async () => {
    const { workers, merger } = cluster(2);
    workers[0]!.count.inc(2);
    workers[1]!.count.inc(3);
    workers[0]!.gauge.set(4);
    workers[1]!.gauge.set(1);
    const text = await merger.merged();
    expect(value(text, 'reward_things_total')).toBe(5);
    expect(value(text, 'reward_level')).toBe(5);
    expect(value(text, 'reward_workers')).toBe(2);
  });

  it('a worker that does not answer in time counts with its last snapshot’s counters (its gauges go)', async () => {
    const { workers, merger } = cluster(2);
    workers[0]!.count.inc(2);
    workers[1]!.count.inc(3);
    workers[1]!.gauge.set(7);
    await merger.merged();
    workers[1]!.answers = false;
    workers[1]!.count.inc(100); // never reported: the stale snapshot stands in
    const started = Date.now();
    const text = await merger.merged();
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);
    expect(value(text, 'reward_things_total')).toBe(5);
    expect(value(text, 'reward_level')).toBe(0);
  });

  it('keeps a dead worker’s counters, so merged counters never go backwards', async () => {
    const { workers, live, merger } = cluster(2);
    workers[0]!.count.inc(2);
    workers[1]!.count.inc(3);
    expect(value(await merger.merged(), 'reward_things_total')).toBe(5);
    live.delete(workers[1]!);
    merger.onExit(workers[1]!.id);
    await new Promise((resolve) => setImmediate(resolve));
    workers[0]!.count.inc(1);
    expect(value(await merger.merged(), 'reward_things_total')).toBe(6);
  });

  it('a worker’s exit ends a scrape waiting for it (no ask timeout)', async () => {
    const { workers, live, merger } = cluster(2);
    workers[1]!.answers = false;
    const scrape = merger.merged();
    live.delete(workers[1]!);
    merger.onExit(workers[1]!.id);
    const started = Date.now();
    await scrape;
    expect(Date.now() - started).toBeLessThan(45);
  });

  it('answers a worker’s request with the merged text under its id; other messages are not its', async () => {
    const { workers, merger } = cluster(2);
    workers[0]!.count.inc(1);
    expect(merger.onMessage(workers[0]!, { type: 'reward:metrics-request', id: 9 })).toBe(true);
    expect(merger.onMessage(workers[0]!, { type: 'reward:cancel', id: 9 })).toBe(false);
    for (
      let i = 0;
      i < 100 && !workers[0]!.received.some((m) => (m as { type: string }).type === 'reward:metrics-text');
      i++
    )
      await new Promise((resolve) => setTimeout(resolve, 5));
    const reply = workers[0]!.received.find(
      (m) => (m as { type: string }).type === 'reward:metrics-text',
    ) as {
      id: number;
      text: string;
    };
    expect(reply.id).toBe(9);
    expect(value(reply.text, 'reward_things_total')).toBe(1);
  });
});

describe('createRestartBackoff', () => {
  it('restarts at once until 5 deaths in 30 s, then waits 1 s doubling, at most 10 s', () => {
    const delay = createRestartBackoff();
    const t0 = 1_000_000;
    expect([0, 1, 2, 3].map((k) => delay(t0 + k))).toEqual([0, 0, 0, 0]);
    expect([4, 5, 6, 7, 8, 9].map((k) => delay(t0 + k))).toEqual([1000, 2000, 4000, 8000, 10_000, 10_000]);
  });

  it('forgets deaths older than the 30 s window', () => {
    const delay = createRestartBackoff();
    for (let k = 0; k < 5; k++) delay(k);
    expect(delay(10)).toBe(2000);
    // At 30 006 ms the deaths at 0–4 ms are older than the window: two deaths remain (10 ms and now).
    expect(delay(30_006)).toBe(0);
  });
});
