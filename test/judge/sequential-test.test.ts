/**
 * The CUSUM helpers behind quarantine, the fleet test and audit suspicion: the guarded reference (the upper
 * end of a one-sided 90 % Clopper–Pearson interval, checked against scipy) and the alarm / clear cycle.
 */
import { describe, expect, it } from 'vitest';

import { canaryLlr, cusumStep, guardedError, newCusum } from '../../src/judge/sequential-test.js';

describe('sequential test', () => {
  it('guards a reference by the 0.9 quantile of Beta(wrong + 1, n − wrong)', () => {
    // scipy.stats.beta.ppf(0.9, 1, 400), (0.9, 41, 360), (0.9, 5, 16)
    expect(guardedError(0, 400)).toBeCloseTo(0.00573993, 7);
    expect(guardedError(40, 400)).toBeCloseTo(0.12200245, 7);
    expect(guardedError(4, 20)).toBeCloseTo(0.36066188, 7);
    // No reference, or nothing but errors: nothing to test against.
    expect(guardedError(0, 0)).toBe(1);
    expect(guardedError(5, 5)).toBe(1);
  });

  it('alarms at h and clears only when the mirror statistic reaches h', () => {
    const state = newCusum();
    const wrong = canaryLlr(true, 0.05, 0.25); // ln 5 = 1.609
    const right = canaryLlr(false, 0.05, 0.25); // ln(0.75/0.95) = −0.236
    const events: Array<string | null> = [];
    for (let i = 0; i < 7; i++) events.push(cusumStep(state, wrong, 10));
    expect(events).toEqual([null, null, null, null, null, null, 'alarm']);
    expect(state.alarmed).toBe(true);
    // ⌈10 / 0.236⌉ = 43 right outcomes clear it; one wrong on the way sets it back.
    let cleared = 0;
    for (let i = 1; i <= 100 && cleared === 0; i++) if (cusumStep(state, right, 10) === 'clear') cleared = i;
    expect(cleared).toBe(43);
    expect(state).toEqual({ s: 0, r: 0, alarmed: false });
  });
});
