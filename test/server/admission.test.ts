import { describe, expect, it } from 'vitest';

import { getPreset } from '../../src/judge/presets.js';
import { Admission, COLD_CALL_MS } from '../../src/server/admission/admission.js';

const analysts2 = getPreset('default')!; // 3 calls
const ordinary = getPreset('ordinary')!; // 4 calls

function setup(options: { slots?: number; maxConcurrent?: number; maxQueued?: number } = {}) {
  const clock = { t: 1_000_000, saturated: false };
  const admission = new Admission({
    maxConcurrent: options.maxConcurrent ?? 512,
    maxQueued: options.maxQueued ?? 32_768,
    callSlots: options.slots ?? 100,
    now: () => clock.t,
    isBackendSaturated: () => clock.saturated,
  });
  return { admission, clock };
}

describe('Admission: drain rate', () => {
  it('starts from call slots / the assumed 1 s call, then learns the unloaded call latency', () => {
    const { admission } = setup({ slots: 100 });
    expect(COLD_CALL_MS).toBe(1000);
    expect(admission.drainCallsPerS()).toBe(100);
    expect(admission.drainJudgmentsPerS(analysts2)).toBeCloseTo(100 / 3);
    admission.recordCall(200);
    expect(admission.drainCallsPerS()).toBeCloseTo(500);
  });

  it('raises the estimate to the calls/s measured while backlogged, and keeps it once idle', () => {
    const { admission, clock } = setup({ slots: 100 });
    admission.recordCall(1000); // unloaded: the model says 100 calls/s
    clock.t += 5000;
    clock.saturated = true;
    admission.recordCall(1000); // the backlog starts
    // 400 calls/s for 12 s while saturated (e.g. more replicas than the default backend's slots).
    for (let i = 0; i < 12 * 400; i++) {
      clock.t += 2.5;
      admission.recordCall(3000);
    }
    expect(admission.drainCallsPerS()).toBeGreaterThan(360);
    expect(admission.drainCallsPerS()).toBeLessThan(440);
    clock.saturated = false;
    clock.t += 1000;
    admission.recordCall(1000);
    expect(admission.drainCallsPerS()).toBeGreaterThan(360);
  });

  it('never lowers the modelled capacity below slots / unloaded latency for a slow measurement', () => {
    const { admission, clock } = setup({ slots: 100 });
    admission.recordCall(1000);
    clock.t += 5000;
    clock.saturated = true;
    admission.recordCall(1000);
    // 20 calls/s for 12 s: a transient of the server itself (e.g. parsing a storm of requests).
    for (let i = 0; i < 12 * 20; i++) {
      clock.t += 50;
      admission.recordCall(1000);
    }
    expect(admission.drainCallsPerS()).toBe(100);
  });

  it('learns a graph’s calls per judgment from the judgments that ended', () => {
    const { admission } = setup();
    expect(admission.costOf(ordinary)).toBe(4);
    for (let i = 0; i < 50; i++) admission.admit(ordinary).done(2);
    expect(admission.costOf(ordinary)).toBeLessThan(2.1);
    expect(admission.costOf(analysts2)).toBe(3);
  });
});

describe('Admission: decisions', () => {
  it('admits while backlog + new calls drain within 0.9 × the deadline, and says how long the backlog needs', () => {
    const { admission } = setup({ slots: 10 }); // 10 calls/s cold
    // Nothing ahead: admitted even though it alone needs 300 s.
    expect(admission.decide(Array(100).fill(analysts2), 10_000).ok).toBe(true);
    for (let i = 0; i < 20; i++) admission.admit(analysts2); // 60 calls = 6 s
    expect(admission.predictedWaitS()).toBeCloseTo(6);
    // 6 s + 1 judgment (0.3 s) ≤ 0.9 × 10 s.
    expect(admission.decide([analysts2], 10_000).ok).toBe(true);
    const refused = admission.decide(Array(11).fill(analysts2), 10_000);
    expect(refused.ok).toBe(false);
    if (refused.ok) return;
    expect(refused.refusal.reason).toBe('deadline');
    expect(refused.refusal.waitS).toBeCloseTo(6);
    // 6.3 s to drain, then the last judgment's evaluator after its analysts (1 s, cold).
    expect(refused.refusal.completionS).toBeCloseTo(10.3);
    expect(refused.refusal.horizonS).toBeCloseTo(9);
    expect(Admission.retryAfterSeconds(refused.refusal)).toBe(6);
  });

  it('says no longer a wait than the admitted work’s deadlines allow when the drain estimate falls after admitting it', () => {
    // A storm admitted at the modelled 100 calls/s; then its first calls come back 10× slower than the
    // model (a latency the storm itself inflated), and the estimate falls to 10 calls/s.
    const { admission, clock } = setup({ slots: 100 });
    admission.recordCall(1000);
    expect(admission.decide(Array(200).fill(analysts2), 30_000).ok).toBe(true);
    for (let i = 0; i < 200; i++) admission.admit(analysts2); // 600 calls: 6 s at 100 calls/s
    expect(admission.decide(Array(600).fill(analysts2), 30_000).ok).toBe(true); // 24 s: fits 27 s
    for (let i = 0; i < 600; i++) admission.admit(analysts2); // 2 400 calls in all
    clock.t += 5_000;
    for (let i = 0; i < 4; i++) admission.recordCall(10_000); // unloaded latency ≈ 4.1 s now: ≈ 24 calls/s
    const drain = admission.drainCallsPerS();
    expect(drain).toBeLessThan(50);
    // The estimate says the backlog needs ≈ 98 s; all of it has finished or timed out 25 s from now.
    const refused = admission.decide([analysts2], 30_000);
    expect(refused.ok).toBe(false);
    if (refused.ok) return;
    expect(refused.refusal.drainCallsPerS).toBeCloseTo(drain);
    expect(refused.refusal.waitS).toBeCloseTo(25);
    expect(Admission.retryAfterSeconds(refused.refusal)).toBe(25);
    expect(admission.predictedWaitS()).toBeCloseTo(25);
    // Where the estimate says less, it stands.
    clock.t += 24_000;
    expect(admission.predictedWaitS()).toBeCloseTo(1);
  });

  it('takes no deadline from the readiness question (saturated), which admits nothing', () => {
    const { admission } = setup({ slots: 10 });
    for (let i = 0; i < 100; i++) admission.admit(analysts2); // 300 calls: 30 s at 10 calls/s
    expect(admission.saturated(analysts2, 5_000)).toBe(true);
    expect(admission.saturated(analysts2, 600_000)).toBe(false);
    expect(admission.predictedWaitS()).toBeCloseTo(30);
  });

  it('refuses beyond the memory bound of queued judgments', () => {
    const { admission } = setup({ maxConcurrent: 1, maxQueued: 2 });
    // A run slot free + 2 queue places: 3 fit, 4 do not.
    expect(admission.decide(Array(3).fill(analysts2), 600_000).ok).toBe(true);
    const refused = admission.decide(Array(4).fill(analysts2), 600_000);
    expect(refused.ok).toBe(false);
    if (!refused.ok) expect(refused.refusal.reason).toBe('memory');
  });

  it('takes an admitted judgment out of the backlog once it ended, whatever the outcome', () => {
    const { admission } = setup();
    const ticket = admission.admit(analysts2);
    expect(admission.backlogCalls).toBe(3);
    ticket.done(undefined);
    ticket.done(undefined);
    expect(admission.backlogCalls).toBe(0);
  });
});
