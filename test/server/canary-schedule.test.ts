/**
 * The canary schedule (pure): turns at CANARY_RATE in mixed radix over the backends; under doubt the rate
 * rises to its ceiling and the extra canaries go two to one to the doubted replica and its peers; the
 * shares it reports are what it does; the rate falls back when the doubt is gone.
 */
import { describe, expect, it } from 'vitest';

import {
  createCanarySchedule,
  doubtOf,
  NO_DOUBT,
  type Doubt,
  type PlannedCanary,
} from '../../src/server/integrity/canary-schedule.js';

const four = [{ name: 'b', replicas: ['r0', 'r1', 'r2', 'r3'] }];

/** Ticks `ticks` judgments under `doubt`, taking every canary due; returns them. */
function drive(schedule: ReturnType<typeof createCanarySchedule>, doubt: Doubt, ticks: number) {
  const out: PlannedCanary[] = [];
  for (let i = 0; i < ticks; i++) {
    schedule.tick(doubt);
    for (let c = schedule.next(doubt); c !== undefined; c = schedule.next(doubt)) out.push(c);
  }
  return out;
}

const countBy = (canaries: PlannedCanary[], backend = 'b') => {
  const counts = new Map<string, number>();
  for (const c of canaries) {
    const r = c.pins.get(backend) ?? '';
    counts.set(r, (counts.get(r) ?? 0) + 1);
  }
  return counts;
};

describe('canary schedule', () => {
  it('runs CANARY_RATE canaries in turn without doubt, every replica combination of two backends coming round', () => {
    const schedule = createCanarySchedule({
      rate: 0.25,
      boost: 3,
      backends: () => [
        { name: 'a', replicas: ['a0', 'a1'] },
        { name: 'b', replicas: ['b0', 'b1'] },
      ],
    });
    const canaries = drive(schedule, NO_DOUBT, 32);
    expect(canaries).toHaveLength(8);
    expect(schedule.rate(NO_DOUBT)).toBe(0.25);
    expect(canaries.every((c) => !c.targeted)).toBe(true);
    const combos = canaries.slice(0, 4).map((c) => `${c.pins.get('a')}+${c.pins.get('b')}`);
    expect(combos).toEqual(['a0+b0', 'a1+b0', 'a0+b1', 'a1+b1']);
    // Rows advance once per round of the 4 combinations.
    expect(canaries.map((c) => c.slot)).toEqual([0, 0, 0, 0, 1, 1, 1, 1]);
  });

  it('raises the rate to the ceiling for a doubted replica: two of three extra canaries aimed at it, one at a peer', () => {
    const schedule = createCanarySchedule({ rate: 0.05, boost: 3, backends: () => four });
    const doubt: Doubt = { replicas: [{ backend: 'b', replica: 'r0' }], fleet: false };
    const canaries = drive(schedule, doubt, 12_000);
    expect(schedule.rate(doubt)).toBeCloseTo(0.15, 10);
    expect(canaries).toHaveLength(1800);
    const counts = countBy(canaries);
    // r0: its turn 600/4 = 150, plus 2/3 of the 1 200 extra = 800 → 950; the peers 150 + 400/3 each.
    expect(counts.get('r0')).toBe(950);
    for (const r of ['r1', 'r2', 'r3']) expect(Math.abs((counts.get(r) ?? 0) - 283.3)).toBeLessThanOrEqual(1);
    // Only those aimed at r0 are `targeted` (left out of the pooled fleet test).
    expect(canaries.filter((c) => c.targeted).every((c) => c.pins.get('b') === 'r0')).toBe(true);
    expect(canaries.filter((c) => c.targeted)).toHaveLength(800);
    // The shares it reports are the ones it ran.
    const shares = new Map(schedule.shares(doubt).map((s) => [s.replica, s.share]));
    for (const [r, n] of counts) expect(shares.get(r)).toBeCloseTo(n / canaries.length, 2);
    expect([...shares.values()].reduce((a, b) => a + b, 0)).toBeCloseTo(1, 10);
  });

  it('spreads the extra canaries evenly as turns when only the fleet is in doubt', () => {
    const schedule = createCanarySchedule({ rate: 0.05, boost: 3, backends: () => four });
    const doubt: Doubt = { replicas: [], fleet: true };
    const canaries = drive(schedule, doubt, 8000);
    expect(canaries).toHaveLength(1200);
    expect(canaries.every((c) => !c.targeted)).toBe(true);
    expect([...countBy(canaries).values()]).toEqual([300, 300, 300, 300]);
    expect(schedule.shares(doubt).map((s) => s.share)).toEqual([0.25, 0.25, 0.25, 0.25]);
  });

  it('falls back to CANARY_RATE once the doubt is gone, owing no more than one borrowed canary', () => {
    const schedule = createCanarySchedule({ rate: 0.05, boost: 3, backends: () => four });
    const doubt: Doubt = { replicas: [{ backend: 'b', replica: 'r2' }], fleet: false };
    const during = drive(schedule, doubt, 1010);
    const after = drive(schedule, NO_DOUBT, 2000);
    expect(during.length).toBeGreaterThanOrEqual(151);
    expect(during.length + after.length).toBeGreaterThanOrEqual(Math.floor(1010 * 0.15 + 2000 * 0.05) - 1);
    expect(after.length).toBeLessThanOrEqual(101);
    expect(after.every((c) => !c.targeted)).toBe(true);
    expect(schedule.rate(NO_DOUBT)).toBe(0.05);
  });

  it('skips the extra canaries first when too many are owed', () => {
    const schedule = createCanarySchedule({ rate: 0.5, boost: 3, backends: () => four });
    const doubt: Doubt = { replicas: [{ backend: 'b', replica: 'r0' }], fleet: false };
    for (let i = 0; i < 10; i++) schedule.tick(doubt);
    expect(schedule.due).toBe(15);
    expect(schedule.skip(12)).toBe(12);
    expect(schedule.due).toBe(3);
    expect(schedule.next(doubt)?.targeted).toBe(false);
  });

  it('takes as doubted the replicas the ledger doubts and the ones the audits suspect, never a quarantined one', () => {
    const replicas = [
      { backend: 'b', replica: 'r0', state: 'ok', doubted: true },
      { backend: 'b', replica: 'r1', state: 'quarantined', doubted: false },
      { backend: 'b', replica: 'r2', state: 'ok', doubted: false },
    ];
    const doubt = doubtOf(replicas, 'ok', [
      { backend: 'b', replica: 'r1' },
      { backend: 'b', replica: 'r2' },
      { backend: 'other', replica: 'x' },
    ]);
    expect(doubt).toEqual({
      replicas: [
        { backend: 'b', replica: 'r0' },
        { backend: 'b', replica: 'r2' },
      ],
      fleet: false,
    });
    expect(doubtOf(replicas, 'watching', []).fleet).toBe(true);
  });
});
