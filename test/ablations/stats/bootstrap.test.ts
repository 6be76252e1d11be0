import { describe, expect, it } from 'vitest';
import { jackknifeInterval } from '../../../src/ablations/stats/bootstrap.js';
import { tQuantile } from '../../../src/ablations/stats/distributions.js';

const meanOf = (xs: readonly number[]) =>
  xs.length === 0 ? null : xs.reduce((s, x) => s + x, 0) / xs.length;

describe('jackknifeInterval', () => {
  it('is the t-interval of a mean: mean ± t(k − 1) · s / √k', () => {
    const xs = [1, 2, 4, 7, 11];
    const ci = jackknifeInterval(xs, meanOf, 'mean');
    const m = 5;
    const s = Math.sqrt(xs.reduce((a, x) => a + (x - m) ** 2, 0) / 4);
    const half = tQuantile(0.975, 4) * (s / Math.sqrt(5));
    expect(ci.lo).toBeCloseTo(m - half, 10);
    expect(ci.hi).toBeCloseTo(m + half, 10);
    expect(ci.method).toBe('jackknife-t');
  });

  it('prints no interval for a statistic that cannot vary, or a τ at ±1', () => {
    const flat = jackknifeInterval([3, 3, 3, 3], meanOf, 'mean');
    expect([flat.lo, flat.hi]).toEqual([null, null]);
    expect(flat.note).toMatch(/cannot vary/);
    const one = jackknifeInterval([1, 2, 3], () => 1, 'tau');
    expect(one.lo).toBeNull();
    expect(one.note).toMatch(/boundary/);
  });
});
