/**
 * The fleet's capacity from what its replicas do (src/server/admission/capacity.ts), and admission holding
 * what fits only the optimistic end of an uncertain estimate (hold.ts). Replica snapshots are written by
 * hand, the clock is manual.
 */
import { describe, expect, it } from 'vitest';

import type { ControlSnapshot } from '../../src/judge/inflight-control.js';
import { getPreset } from '../../src/judge/presets.js';
import type { ReplicaOutcome, ReplicaSnapshot } from '../../src/judge/types.js';
import { Admission } from '../../src/server/admission/admission.js';
import { CapacityEstimator, MIN_VALID_MS, SETTLE_MIN_MS } from '../../src/server/admission/capacity.js';

const analysts2 = getPreset('default')!; // 3 calls, critical path 2

interface Replica {
  snapshot: ReplicaSnapshot;
  /** Completes `n` calls (counted as `ok` attempts). */
  complete(n: number): void;
}

function replica(
  name: string,
  control: Partial<ControlSnapshot> | undefined,
  extra: Partial<ReplicaSnapshot> = {},
): Replica {
  const attempts = new Map<ReplicaOutcome, number>([['ok', 0]]);
  const snapshot: ReplicaSnapshot = {
    backend: 'default',
    replica: name,
    state: 'closed',
    inflight: 0,
    waiting: 0,
    limit: 16,
    maxInflight: 256,
    attempts,
    circuitOpens: 0,
    inflightControl: control === undefined ? 'fixed' : 'engine',
    control:
      control === undefined
        ? undefined
        : {
            law: 'engine',
            metrics: true,
            engine: { kind: 'vllm', running: 0, waiting: 0, kvUsage: 0, queueTime: undefined },
            capacity: { calls: 1, known: false },
            proven: 1,
            saturated: false,
            recentLatencyMs: undefined,
            ...control,
          },
    ...extra,
  };
  return {
    snapshot,
    complete: (n) => attempts.set('ok', (attempts.get('ok') ?? 0) + n),
  };
}

/**
 * A replica without engine metrics saturated at its 256 slots with 500 calls waiting, its recent latency
 * 1 s (from the warm-up), and an estimator of it on a manual clock.
 */
function saturatedWithoutMetrics() {
  const clock = { t: 1_000_000 };
  const r = replica('a:1', undefined, { limit: 256, inflight: 256, waiting: 500 });
  r.snapshot.control = {
    law: 'gradient',
    metrics: false,
    engine: undefined,
    capacity: { calls: 256, known: true },
    proven: 256,
    saturated: true,
    recentLatencyMs: 1000,
  };
  const est = new CapacityEstimator({ replicas: () => [r.snapshot], now: () => clock.t });
  return { clock, r, est };
}

describe('CapacityEstimator', () => {
  it('models a replica without engine metrics as its limit ÷ the unloaded latency, certain', () => {
    const r = replica('a:1', undefined, { limit: 64 });
    const est = new CapacityEstimator({ replicas: () => [r.snapshot], now: () => 0 });
    expect(est.estimate(500, 256)).toMatchObject({ low: 128, high: 128, certain: true, source: 'model' });
    // The offline backend (no replicas): the fallback slots.
    expect(new CapacityEstimator({ replicas: () => [] }).estimate(1000, 256)).toMatchObject({
      low: 256,
      certain: true,
    });
  });

  it('gives an engine that never queued a range: what it was seen running, up to the ceiling', () => {
    const r = replica('a:1', { proven: 12, recentLatencyMs: 300 });
    const est = new CapacityEstimator({ replicas: () => [r.snapshot], now: () => 0 });
    // low: 12 calls at twice the unloaded latency (0.4 s; the recent 0.3 s may be of calls sent into a
    // smaller batch); high: 256 / 0.2 s.
    expect(est.estimate(200, 256)).toMatchObject({ low: 30, high: 1280, certain: false, source: 'engine' });
    // Once the engine queued at 32, that is its capacity: 32 / 0.2 s at most.
    r.snapshot.control = { ...r.snapshot.control!, capacity: { calls: 32, known: true }, proven: 32 };
    expect(est.estimate(200, 256)).toMatchObject({ low: 80, high: 160, certain: false });
    // A recent latency above twice the unloaded one is the one used.
    r.snapshot.control = { ...r.snapshot.control, recentLatencyMs: 500 };
    expect(est.estimate(200, 256)).toMatchObject({ low: 64, high: 160, certain: false });
  });

  it('takes the rate the engine has shown (Little’s law) as the low end, and its rate at capacity as certain', () => {
    const r = replica('a:1', { proven: 12, recentLatencyMs: 300 });
    const est = new CapacityEstimator({ replicas: () => [r.snapshot], now: () => 0 });
    // Shown at a load of 12 (its proven batch): 45 calls/s, above the assumed 30.
    r.snapshot.control = {
      ...r.snapshot.control!,
      shown: { callsPerS: 45, load: 12, fullCallsPerS: undefined },
    };
    expect(est.estimate(200, 256)).toMatchObject({ low: 45, high: 1280, certain: false });
    // Shown only at a load below its batch (unloaded probes: 5 calls/s at a load of 1): the assumed rate.
    r.snapshot.control = {
      ...r.snapshot.control,
      shown: { callsPerS: 5, load: 1, fullCallsPerS: undefined },
    };
    expect(est.estimate(200, 256)).toMatchObject({ low: 30, certain: false });
    // Shown at that load, lower than assumed: what it did wins.
    r.snapshot.control = {
      ...r.snapshot.control,
      shown: { callsPerS: 20, load: 12, fullCallsPerS: undefined },
    };
    expect(est.estimate(200, 256)).toMatchObject({ low: 20, certain: false });
    // Its capacity known and its rate while running it: certain, before the completion-rate measurement.
    r.snapshot.control = {
      ...r.snapshot.control,
      capacity: { calls: 32, known: true },
      proven: 32,
      shown: { callsPerS: 20, load: 12, fullCallsPerS: 120 },
    };
    expect(est.estimate(200, 256)).toMatchObject({ low: 120, high: 120, certain: true });
  });

  it('measures the calls completed per second at capacity, after the pipeline filled, and then is certain', () => {
    const clock = { t: 1_000_000 };
    const r = replica('a:1', { capacity: { calls: 8, known: true }, proven: 8, recentLatencyMs: 100 });
    const est = new CapacityEstimator({ replicas: () => [r.snapshot], now: () => clock.t });
    est.observe();
    r.snapshot.control!.saturated = true;
    // 40 calls/s at capacity, sampled every 50 ms.
    for (let ms = 0; ms <= SETTLE_MIN_MS + MIN_VALID_MS + 200; ms += 50) {
      clock.t += 50;
      r.complete(2);
      est.observe();
    }
    const e = est.estimate(100, 256);
    expect(e.certain).toBe(true);
    expect(e.source).toBe('measured');
    expect(e.low).toBeCloseTo(40, 0);
    // Far below the model (8 / 0.1 s = 80): a measurement lowers the estimate as well as it raises it.
    expect(e.replicas[0]?.measured).toBeCloseTo(40, 0);
  });

  it('waits for the calls in flight when saturation began to come back: a pipeline slower than the last latency is not a slow rate', () => {
    // The 6 144-rollout burst (test/slow/burst.test.ts): a replica without engine metrics saturates at its
    // 256 slots while the server parses the storm; its recent latency (1 s, from the warm-up) is stale —
    // the first calls take 4 s — and then it completes 200 calls/s. The 4 s of the pipeline filling are
    // not part of the rate (counting them measured ~100 calls/s and refused half of what fitted).
    const { clock, r, est } = saturatedWithoutMetrics();
    for (let ms = 0; ms < 4_000; ms += 50) {
      clock.t += 50;
      est.observe();
    }
    for (let ms = 0; ms < 4_000; ms += 50) {
      clock.t += 50;
      r.complete(10);
      est.observe();
    }
    const e = est.estimate(1000, 256);
    expect(e.source).toBe('measured');
    expect(e.low).toBeGreaterThan(190);
    expect(e.low).toBeLessThan(210);
  });

  it('measures whole waves: calls sent together come back together, one latency apart', () => {
    // After the storm's pipeline filled, its 256 slots complete in waves: 256 calls within 200 ms, every
    // 1 s (the call latency). A window shorter than a few waves measured the trough: 27 calls/s against
    // the 230 the backend then did, and 148 rollouts of the burst refused.
    const { clock, r, est } = saturatedWithoutMetrics();
    const seen: number[] = [];
    for (let ms = 0; ms < 8_000; ms += 50) {
      clock.t += 50;
      if (ms % 1000 < 200) r.complete(64);
      const e = est.estimate(1000, 256);
      if (e.source === 'measured') seen.push(e.low);
    }
    expect(seen.length).toBeGreaterThan(0);
    expect(Math.min(...seen)).toBeGreaterThan(0.65 * 256);
    expect(Math.max(...seen)).toBeLessThan(1.35 * 256);
  });

  it('does not count time in which this process’s event loop lagged', () => {
    const clock = { t: 1_000_000 };
    const r = replica('a:1', { capacity: { calls: 8, known: true }, proven: 8, saturated: true });
    const est = new CapacityEstimator({ replicas: () => [r.snapshot], now: () => clock.t, lagMs: () => 500 });
    for (let ms = 0; ms < 3_000; ms += 50) {
      clock.t += 50;
      r.complete(2);
      est.observe();
    }
    expect(est.estimate(100, 256).certain).toBe(false);
  });

  it('leaves out replicas whose circuit is open while others serve', () => {
    const up = replica('a:1', undefined, { limit: 10 });
    const down = replica('b:1', undefined, { limit: 10, state: 'open' });
    const est = new CapacityEstimator({ replicas: () => [up.snapshot, down.snapshot], now: () => 0 });
    expect(est.estimate(1000, 256).low).toBe(10);
  });
});

describe('Admission with an uncertain capacity', () => {
  function setup() {
    const clock = { t: 1_000_000 };
    const r = replica('a:1', { proven: 2, recentLatencyMs: 1000 });
    const admission = new Admission({
      maxConcurrent: 512,
      maxQueued: 32_768,
      callSlots: 256,
      replicas: () => [r.snapshot],
      now: () => clock.t,
    });
    admission.recordCall(1000); // unloaded latency 1 s: low 2 calls/s, high 256
    return { admission, clock, r };
  }
  const shapes = (n: number) => Array.from({ length: n }, () => analysts2);
  const signal = new AbortController().signal;

  it('admits what fits the proven rate, holds what fits only the optimistic one, refuses the rest', async () => {
    const { admission, clock, r } = setup();
    // 30 calls ahead (the first request is always admitted); a 100 s deadline allows 90 s.
    for (const g of shapes(10)) admission.admit(g);
    // 30 + 30 calls: 30 s at 2 calls/s — fits the proven rate.
    expect(admission.decideOrHold(shapes(10), 100_000).ok).toBe(true);
    for (const g of shapes(10)) admission.admit(g);
    // 60 + 300 calls: 180 s at 2 calls/s, 1.4 s at 256: held.
    expect(admission.decideOrHold(shapes(100), 100_000)).toEqual({ ok: false, hold: true });
    const place = admission.hold(shapes(100), clock.t + 100_000, signal);
    // A later, small request waits behind it (first come, first served).
    expect(admission.decideOrHold(shapes(1), 100_000)).toEqual({ ok: false, hold: true });
    // 60 + 30 000 calls: more than 90 s even at 256 calls/s: refused at once.
    const tooBig = admission.decide(shapes(10_000), 100_000, 'normal');
    expect(tooBig.ok).toBe(false);
    // The engine is measured: 10 calls/s at capacity. 60 + 300 = 36 s: the held request is admitted.
    r.snapshot.control = {
      ...r.snapshot.control!,
      capacity: { calls: 8, known: true },
      proven: 8,
      saturated: true,
    };
    for (let ms = 0; ms < 1_000; ms += 50) {
      clock.t += 50;
      admission.recordCall(1000);
    }
    // (Valid after 2 recent latencies of saturation: 2 s.)
    for (let ms = 0; ms < 3_000; ms += 50) {
      clock.t += 50;
      (r.snapshot.attempts as Map<ReplicaOutcome, number>).set(
        'ok',
        (r.snapshot.attempts.get('ok') ?? 0) + 0.5,
      );
      admission.recordCall(1000);
    }
    const verdict = await place.verdict;
    expect(verdict).toMatchObject({ kind: 'admit' });
    expect(admission.backlogCalls).toBe(60 + 300);
    place.leave();
    expect(admission.backlogCalls).toBe(60);
  });

  it('refuses a held request that stops fitting even the optimistic rate, and lets one go when its client leaves', async () => {
    const { admission, clock } = setup();
    for (const g of shapes(10)) admission.admit(g);
    const a = admission.hold(shapes(100), clock.t + 2_000, signal);
    const leaving = new AbortController();
    const b = admission.hold(shapes(1), clock.t + 100_000, leaving.signal);
    leaving.abort();
    expect(await b.verdict).toEqual({ kind: 'gone' });
    // 30 + 300 calls at 256 calls/s is 1.3 s; after 1 s its 2 s deadline allows 0.9 s: refused.
    clock.t += 1_000;
    admission.recordCall(1000);
    expect(await a.verdict).toMatchObject({ kind: 'refuse', refusal: { reason: 'deadline' } });
    expect(admission.held).toBe(0);
  });
});
