import { describe, expect, it } from 'vitest';

import { createRng, quantile } from '../../src/math/sampling.js';

describe('createRng', () => {
  it('is deterministic per seed and different across seeds', () => {
    const a = createRng(7);
    const b = createRng(7);
    const c = createRng(8);
    const xs = Array.from({ length: 5 }, () => a());
    expect(Array.from({ length: 5 }, () => b())).toEqual(xs);
    expect(Array.from({ length: 5 }, () => c())).not.toEqual(xs);
    for (const x of xs) expect(x >= 0 && x < 1).toBe(true);
  });
});

describe('quantile', () => {
  it('interpolates between order statistics (R type 7) and is null for no values', () => {
    expect(quantile([1, 2, 3, 4], 0.5)).toBe(2.5);
    expect(quantile([1, 2, 3, 4], 0)).toBe(1);
    expect(quantile([1, 2, 3, 4], 1)).toBe(4);
    expect(quantile([10, 20], 0.25)).toBe(12.5);
    expect(quantile([], 0.5)).toBeNull();
  });
});
