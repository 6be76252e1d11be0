/**
 * Issue 30 item 3, the parts on their own: admission predicts each tenant's completion at its fair share
 * (so a second tenant is not refused behind the first's backlog), a tenant's queue memory and high lane are
 * its fraction, `max_priority` caps the lane, and the run slots and a backend replica's slots go to the
 * tenant holding fewest per weight. Each with FAIR_QUEUING off (no flows) beside it, where the second tenant
 * waits behind the first.
 */
import { describe, expect, it } from 'vitest';

import { SHARED_FLOW, type Flow } from '../../src/judge/fair-queue.js';
import { URGENT_PRIORITY } from '../../src/judge/calls.js';
import { createLimiter } from '../../src/judge/limiter.js';
import { getPreset } from '../../src/judge/presets.js';
import { Admission } from '../../src/server/admission/admission.js';
import { FairShares, type TenantWork } from '../../src/server/admission/fair-shares.js';

const analysts2 = getPreset('default')!; // 3 calls, critical path 2
const A: Flow = { name: 'run-a', weight: 1 };
const B: Flow = { name: 'run-b', weight: 1 };
const work = (flow: Flow, extra: Partial<TenantWork> = {}): TenantWork => ({ flow, fraction: 0.5, ...extra });

function setup(options: { maxConcurrent?: number; maxQueued?: number } = {}) {
  const clock = { t: 1_000_000 };
  const admission = new Admission({
    maxConcurrent: options.maxConcurrent ?? 512,
    maxQueued: options.maxQueued ?? 32_768,
    callSlots: 10, // 10 calls/s at the assumed 1 s call
    now: () => clock.t,
    highShare: 0.1,
  });
  return { admission, clock };
}

const flush = () => new Promise((resolve) => setImmediate(resolve));

describe('FairShares', () => {
  it('counts the calls that drain until a flow is done: its own, and the others’ weighted share meanwhile', () => {
    const fair = new FairShares(0.1, () => 0);
    fair.add(A, 1000);
    expect(fair.completionCalls(B, 100)).toBe(200); // 1:1, A drains as much as B meanwhile
    expect(fair.completionCalls(A, 100)).toBe(1100); // A waits behind its own backlog
    expect(fair.completionCalls({ name: 'run-b', weight: 3 }, 300)).toBe(400); // 1:3
    fair.add(B, 50);
    expect(fair.completionCalls(B, 100)).toBe(300); // B's own 50 first
    expect(fair.shareOf({ name: 'run-c', weight: 2 })).toBe(0.5);
    fair.remove(A, 1000);
    fair.remove(B, 50);
    expect(fair.completionCalls(B, 100)).toBe(100);
  });

  it('shows the shared flow (no tenant: /readyz, FAIR_QUEUING=false) the whole backlog', () => {
    const fair = new FairShares(0.1, () => 0);
    fair.add(A, 1000);
    fair.add(B, 50);
    expect(fair.backlogOf(SHARED_FLOW)).toBe(1050);
    expect(fair.completionCalls(SHARED_FLOW, 100)).toBe(1150);
    // So readiness says saturated while tenants' backlogs fill the deadline (they are admitted at their share).
    const { admission } = setup();
    for (let i = 0; i < 300; i++) admission.admit(analysts2, 'normal', work(A));
    expect(admission.saturated(analysts2, 10_000)).toBe(true);
    expect(admission.decide([analysts2], 10_000, 'normal', { work: work(B) }).ok).toBe(true);
  });
});

describe('Admission with tenants', () => {
  it("admits a second tenant's step beside a first tenant's full backlog; without flows refuses it (deadline)", () => {
    const { admission } = setup();
    // run-a: 300 judgments = 900 calls = 90 s at 10 calls/s (the horizon of a 100 s deadline).
    for (let i = 0; i < 300; i++) admission.admit(analysts2, 'normal', work(A));
    const step = Array.from({ length: 10 }, () => analysts2); // 30 calls
    expect(admission.decide(step, 100_000, 'normal', { work: work(A) })).toMatchObject({
      ok: false,
      refusal: { reason: 'deadline' },
    });
    // run-b: 30 calls + 30 of run-a's meanwhile = 6 s.
    expect(admission.decide(step, 100_000, 'normal', { work: work(B) })).toEqual({ ok: true });
    // FAIR_QUEUING=false: no flow, first come first served: run-b would wait the 90 s.
    const fifo = setup();
    for (let i = 0; i < 300; i++) fifo.admission.admit(analysts2, 'normal', {});
    expect(fifo.admission.decide(step, 100_000, 'normal', {})).toMatchObject({ ok: false });
  });

  it("bounds a tenant's queued judgments by its fraction of MAX_QUEUED_JUDGMENTS", () => {
    const { admission } = setup({ maxConcurrent: 1, maxQueued: 100 });
    const shapes = (n: number) => Array.from({ length: n }, () => analysts2);
    // One runs at once; 51 of 52 would wait: over run-a's half of the 100.
    expect(admission.decide(shapes(52), 1e9, 'normal', { work: work(A) })).toMatchObject({
      refusal: { reason: 'memory' },
    });
    expect(admission.decide(shapes(52), 1e9, 'normal', { work: work(A, { fraction: 1 }) })).toEqual({
      ok: true,
    });
    expect(admission.decide(shapes(51), 1e9, 'normal', { work: work(A) })).toEqual({ ok: true });
  });

  it('caps the lane by max_priority, and splits the high lane by fraction', () => {
    const { admission } = setup();
    expect(admission.admit(analysts2, 'high', work(A, { maxPriority: 'normal' })).lane).toBe('normal');
    expect(admission.admit(analysts2, 'high', work(B, { maxPriority: 'high' })).lane).toBe('high');
    expect(admission.fair.highLane(B, 0.5).share).toBeCloseTo(0.05);
    expect(admission.fair.highLane(A, 1).share).toBeCloseTo(0.1);
  });

  it('hands freed run slots to the tenant holding fewest; FIFO across tenants without flows', async () => {
    for (const fair of [true, false]) {
      const { admission } = setup({ maxConcurrent: 4 });
      const signal = new AbortController().signal;
      const flowOf = (f: Flow) => (fair ? f : undefined);
      const held = await Promise.all(
        Array.from({ length: 4 }, () => admission.acquire(signal, 'normal', flowOf(A))),
      );
      const order: string[] = [];
      const releases: Array<() => void> = [];
      const wait = (name: string, f: Flow) =>
        void admission.acquire(signal, 'normal', flowOf(f)).then((release) => {
          order.push(name);
          releases.push(release);
        });
      for (let i = 0; i < 4; i++) wait(`a${i}`, A);
      for (let i = 0; i < 2; i++) wait(`b${i}`, B);
      for (const release of held) release();
      await flush();
      expect(order, fair ? 'fair' : 'fifo').toEqual(
        fair ? ['b0', 'b1', 'a0', 'a1'] : ['a0', 'a1', 'a2', 'a3'],
      );
      // The rest get the slots as these free, and every slot comes back.
      while (releases.length > 0) {
        releases.shift()?.();
        await flush();
      }
      expect(order).toHaveLength(6);
      expect([admission.running, admission.waiting]).toEqual([0, 0]);
    }
  });
  it("starts a tenant's judgments at once up to its guaranteed slots while another holds them all", async () => {
    const { admission } = setup({ maxConcurrent: 4 });
    const signal = new AbortController().signal;
    const held = await Promise.all(
      Array.from({ length: 4 }, () => admission.acquire(signal, 'normal', A, 0.5)),
    );
    const started: string[] = [];
    const releases: Array<() => void> = [];
    const take = (name: string, flow: Flow, fraction: number) =>
      void admission.acquire(signal, 'normal', flow, fraction).then((release) => {
        started.push(name);
        releases.push(release);
      });
    take('b0', B, 0.5);
    take('b1', B, 0.5);
    take('b2', B, 0.5); // beyond run-b's 2 of 4: waits
    take('a4', A, 0.5);
    await flush();
    expect(started).toEqual(['b0', 'b1']);
    expect([admission.running, admission.waiting]).toEqual([6, 2]);
    // A slot of run-b's frees while over the max: it goes to run-b's next (still below its guarantee).
    releases.shift()?.();
    await flush();
    expect(started).toEqual(['b0', 'b1', 'b2']);
    expect([admission.running, admission.waiting]).toEqual([6, 1]);
    // Back under MAX_CONCURRENT_JUDGMENTS first: the first two slots A frees are retired.
    held[0]?.();
    held[1]?.();
    await flush();
    expect(started).toHaveLength(3);
    expect(admission.running).toBe(4);
    held[2]?.();
    await flush();
    expect(started).toEqual(['b0', 'b1', 'b2', 'a4']); // run-a now holds fewer
    held[3]?.();
    while (releases.length > 0) {
      releases.shift()?.();
      await flush();
    }
    expect(started.toSorted()).toEqual(['a4', 'b0', 'b1', 'b2']);
    expect([admission.running, admission.waiting]).toEqual([0, 0]);
  });
});

describe('backend slots with tenants (limiter)', () => {
  it('hands freed slots to the tenant holding fewest; urgent calls of any tenant first', async () => {
    const limiter = createLimiter({ maxInflight: 4 });
    const open = (flow: Flow, priority = 0) => ({
      signal: new AbortController().signal,
      deadline: Date.now() + 60_000,
      flow,
      priority,
    });
    const held = await Promise.all(Array.from({ length: 4 }, () => limiter.acquire(1, open(A))));
    const order: string[] = [];
    const wait = (name: string, flow: Flow, priority = 0) =>
      limiter.acquire(1, open(flow, priority)).then((release) => {
        order.push(name);
        return release;
      });
    const waits = [
      wait('a0', A, 100),
      wait('a1', A, 100),
      wait('b0', B),
      wait('b1', B),
      wait('a-urgent', A, URGENT_PRIORITY),
    ];
    expect(limiter.waiting).toBe(5);
    for (const release of held) release();
    await flush();
    // The urgent call first; then B (0 held) until it holds as many as A, whatever A's own priorities.
    expect(order).toEqual(['a-urgent', 'b0', 'b1', 'a0']);
    expect(limiter.inflight).toBe(4);
    for (const release of await Promise.all(waits.filter((_, i) => i !== 1))) release();
    await flush();
    expect(order).toContain('a1');
  });
});
