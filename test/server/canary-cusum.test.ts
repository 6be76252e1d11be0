/**
 * The simulation behind docs/integrity.md (bench/canary-cusum.ts: the real ledger, schedule and audit
 * evidence in the time of computed judgments) on fewer seeds, against the documented bounds: ramps, steps
 * and a replica wrong on long candidates quarantined within 4 096 judgments of crossing 0.2 below (the slow
 * ramp not without the boost), a healthy fleet's false quarantines no more than before the fleet test and
 * its false fleet alerts under 1 per 10⁵ pooled canaries, whole-fleet drops alerted early and late — and
 * the bound no pooled CUSUM can beat (`oracle`), which is why 95 % within 60 canaries is out of reach.
 */
import { describe, expect, it } from 'vitest';

import { DEFAULTS, measure, oracle, scenarios } from '../../bench/canary-cusum.js';

const byName = (q: number, name: string) => {
  const s = scenarios(q).find((x) => x.name === name);
  if (s === undefined) throw new Error(`no scenario ${name}`);
  return s;
};

describe('the integrity simulation (bench/canary-cusum.ts)', () => {
  it('quarantines a replica ramping slowly to 0.25 below within 4 096 judgments of crossing 0.2 below', () => {
    // Documented: ≥ 95 % of 100 runs at q = 0.16 (the fleet accuracy 0.84) and at 0.05.
    const slow = byName(0.16, 'slow ramp to −0.25');
    const boosted = measure(slow, 0.16, 20);
    expect(boosted.withinTarget).toBeGreaterThanOrEqual(19);
    expect(boosted.otherQuarantines).toBe(0);
    // Without canaries going where the doubt is (CANARY_BOOST=1: turns only) about half the runs miss it.
    const even = measure(slow, 0.16, 20, { ...DEFAULTS, boost: 1 });
    expect(even.withinTarget).toBeLessThanOrEqual(16);
  });

  it('quarantines a fast ramp, a step of 0.3 and a replica wrong on long candidates (25 % of canaries)', () => {
    for (const name of ['fast ramp to −0.25', 'step −0.3', 'long candidates only (25 % of canaries)']) {
      const row = measure(byName(0.05, name), 0.05, 10);
      expect(row.withinTarget, name).toBeGreaterThanOrEqual(9);
    }
    // Wrong on long candidates that are 10 % of the canaries is a 0.09 drop, below the margin: documented
    // as mostly missed within 4 096 judgments (20 % caught), not promised.
    const thin = measure(byName(0.05, 'long candidates only (10 % of canaries)'), 0.05, 10);
    expect(thin.withinTarget).toBeLessThanOrEqual(6);
  });

  it('keeps a healthy fleet: false quarantines as before the fleet test, < 1 false fleet alert per 10⁵', () => {
    const healthy = byName(0.16, 'healthy, file reference');
    const row = measure(healthy, 0.16, 8);
    // 3.2 × 10⁶ judgments, ~190 000 canaries. Documented: 0.017 false quarantines per 10⁴ canaries per
    // replica (0.07 before the fleet test at q = 0.1–0.2) and 0–0.4 fleet alerts per 10⁵ pooled canaries.
    const canaries = row.canaries ?? 0;
    expect(canaries).toBeGreaterThan(150_000);
    expect(((row.falseQuarantines ?? 0) / canaries) * 1e4).toBeLessThanOrEqual(0.07);
    expect(((row.falseAlerts ?? 0) / (row.pooled ?? 1)) * 1e5).toBeLessThanOrEqual(1.6);
    // The doubt costs canaries: documented ~0.059 per judgment at CANARY_RATE 0.05.
    expect(canaries / (row.judgments ?? 1)).toBeLessThan(0.065);
  });

  it('alerts on whole-fleet drops of 0.2, early against a file reference and late against the frozen one', () => {
    for (const name of ['fleet −0.2 at 2000, file reference', 'fleet −0.2 at 100000']) {
      const row = measure(byName(0.05, name), 0.05, 20);
      const pooled = row.pooledDelays ?? [];
      expect(
        pooled.every((d) => Number.isFinite(d)),
        name,
      ).toBe(true);
      // Documented: 70–76 % within 60 pooled canaries (the oracle: 88 %), p95 ~100–120.
      expect(row.withinTarget, name).toBeGreaterThanOrEqual(11);
      expect(pooled[Math.floor(pooled.length * 0.9)], name).toBeLessThanOrEqual(160);
    }
    const q16 = measure(byName(0.16, 'fleet −0.2 at 2000, file reference'), 0.16, 10);
    const pooled = q16.pooledDelays ?? [];
    expect(pooled.every((d) => Number.isFinite(d))).toBe(true);
    // Documented median ~120 pooled canaries at q = 0.16 (p95 ~250); the oracle's median is ~60.
    expect(pooled[Math.floor(pooled.length / 2)]).toBeLessThanOrEqual(180);
  });

  it('no pooled CUSUM reaches 95 % within 60 canaries at ≤ 1 false alert per 10⁵ (the oracle bound)', () => {
    for (const q of [0.05, 0.16]) {
      // The fleet threshold 9 with the reference known exactly: ≤ 1 false alarm per 10⁵ healthy canaries…
      const at9 = oracle(q, 9, 0.2, 2_000_000, 1000, 7);
      expect(at9.falseAlarms).toBeLessThanOrEqual(1.5);
      // …and still short of 95 % within 60 canaries of a 0.2 drop (documented 88 % at 0.05, 49 % at 0.16).
      expect(at9.within60).toBeLessThan(0.93);
      // Where it does reach 95 % (h = 7 at q = 0.05), it raises several false alarms per 10⁵.
      const at7 = oracle(q, 7, 0.2, 2_000_000, 1000, 7);
      expect(at7.falseAlarms).toBeGreaterThan(3);
    }
  });
});
