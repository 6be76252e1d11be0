/**
 * The simulation behind docs/integrity.md (bench/canary-cusum.ts: the real ledger, schedule and audit
 * evidence in the time of computed judgments) on fewer seeds, against the documented bounds: a slow ramp
 * caught within 4 096 judgments of crossing 0.2 below (and not without the boost), a healthy fleet's false
 * quarantines and fleet alerts, a whole-fleet drop alerted.
 */
import { describe, expect, it } from 'vitest';

import { DEFAULTS, measure, scenarios } from '../../bench/canary-cusum.js';

const byName = (q: number, name: string) => {
  const s = scenarios(q).find((x) => x.name === name);
  if (s === undefined) throw new Error(`no scenario ${name}`);
  return s;
};

describe('the integrity simulation (bench/canary-cusum.ts)', () => {
  it('quarantines a replica ramping slowly to 0.25 below within 4 096 judgments of crossing 0.2 below', () => {
    // Documented: ≥ 95 % of 200 runs at q = 0.16 (the fleet accuracy 0.84), 99 % at 0.05.
    const slow = byName(0.16, 'slow ramp to −0.25');
    const boosted = measure(slow, 0.16, 20);
    expect(boosted.withinTarget).toBeGreaterThanOrEqual(19);
    expect(boosted.otherQuarantines).toBe(0);
    // Without canaries going where the doubt is (CANARY_BOOST=1: turns only) about half the runs miss it.
    const even = measure(slow, 0.16, 20, { ...DEFAULTS, boost: 1 });
    expect(even.withinTarget).toBeLessThanOrEqual(16);
  });

  it('raises no more false quarantines or fleet alerts than documented on a healthy fleet', () => {
    const healthy = byName(0.16, 'healthy');
    const row = measure({ ...healthy, options: { ...healthy.options, judgments: 200_000 } }, 0.16, 3);
    // Documented: ~0.1 false quarantines per 10⁶ judgments and ~0.3 fleet alerts per 10⁵ pooled canaries;
    // 600 000 judgments here (~35 000 canaries).
    expect(row.falseQuarantines).toBeLessThanOrEqual(1);
    expect(row.falseAlerts).toBeLessThanOrEqual(1);
    // The doubt costs canaries: documented ~0.059 per judgment at CANARY_RATE 0.05.
    expect((row.canaries ?? 0) / (row.judgments ?? 1)).toBeLessThan(0.065);
  });

  it('alerts on an early whole-fleet drop of 0.2 against a file reference in every run', () => {
    const row = measure(byName(0.16, 'fleet −0.2 at 2000, file reference'), 0.16, 10);
    const pooled = row.pooledDelays ?? [];
    expect(pooled.every((d) => Number.isFinite(d))).toBe(true);
    // Documented median ~90 pooled canaries (p95 ~250).
    expect(pooled[Math.floor(pooled.length / 2)]).toBeLessThanOrEqual(150);
  });
});
