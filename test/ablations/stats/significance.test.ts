import { describe, expect, it } from 'vitest';
import { chiSquare1Sf } from '../../../src/ablations/stats/distributions.js';
import {
  clusteredMcnemar,
  holm,
  mcnemarExact,
  signFlipP,
} from '../../../src/ablations/stats/significance.js';

describe('mcnemarExact', () => {
  it('matches the binomial tail on known tables', () => {
    // b=2, c=8: 2·P(X≤2 | n=10) = 2·(1+10+45)/1024
    expect(mcnemarExact(2, 8)).toBeCloseTo((2 * 56) / 1024, 12);
    expect(mcnemarExact(8, 2)).toBeCloseTo((2 * 56) / 1024, 12);
    expect(mcnemarExact(0, 5)).toBeCloseTo(0.0625, 12);
    expect(mcnemarExact(5, 5)).toBe(1);
    expect(mcnemarExact(0, 0)).toBe(1);
    const p = mcnemarExact(100, 150);
    expect(p).toBeGreaterThan(0);
    expect(p).toBeLessThan(0.01);
  });
});

describe('clusteredMcnemar', () => {
  it('is the asymptotic McNemar test when every cluster is one item (from 20 discordant clusters)', () => {
    const items = [
      ...Array.from({ length: 15 }, () => ({ b: 1, c: 0 })),
      ...Array.from({ length: 5 }, () => ({ b: 0, c: 1 })),
    ];
    expect(clusteredMcnemar(items)).toBeCloseTo(chiSquare1Sf((15 - 5) ** 2 / (15 + 5)), 12);
    expect(clusteredMcnemar([{ b: 0, c: 0 }])).toBe(1);
  });

  it('is the exact sign-flip test below 20 discordant clusters', () => {
    // b = 0, c = 1: the χ² reference said 0.317; one sign flip either way is as extreme.
    expect(clusteredMcnemar([{ b: 0, c: 1 }])).toBe(1);
    // Four one-way clusters: 2 of 16 sign vectors are as extreme (the sign test's 0.125; χ² said 0.0455).
    expect(clusteredMcnemar(Array.from({ length: 4 }, () => ({ b: 1, c: 0 })))).toBe(0.125);
    // Unit differences: the sign-flip test is the two-sided exact binomial (McNemar exact) test.
    expect(signFlipP([1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, 1])).toBeCloseTo(mcnemarExact(10, 2), 12);
    // Sizes matter: observed 3 + 1 − 1 + 1 = 4; of the 16 sums ±3 ± 1 ± 1 ± 1, 8 have |sum| ≥ 4.
    expect(signFlipP([3, 1, -1, 1])).toBe(8 / 16);
  });

  it('keeps the χ² reference shape at 20+ clusters', () => {
    const items = [
      ...Array.from({ length: 12 }, () => ({ b: 1, c: 0 })),
      ...Array.from({ length: 4 }, () => ({ b: 0, c: 1 })),
      ...Array.from({ length: 4 }, () => ({ b: 1, c: 0 })),
    ];
    expect(clusteredMcnemar(items)).toBeCloseTo(chiSquare1Sf((16 - 4) ** 2 / (16 + 4)), 12);
  });

  it('is far less sure than the exact test when the discordant pairs sit in a few clusters', () => {
    // 12 vs 4 discordant items, but in 3 clusters: effectively 3 observations, not 16.
    const clustered = [
      { b: 6, c: 0 },
      { b: 6, c: 0 },
      { b: 0, c: 4 },
    ];
    expect(mcnemarExact(12, 4)).toBeLessThan(0.08);
    expect(clusteredMcnemar(clustered)).toBeGreaterThan(0.3);
  });
});

describe('holm', () => {
  it('matches a hand computation and leaves nulls out of the family', () => {
    // sorted: 0.005·4 = 0.02; 0.01·3 = 0.03; 0.03·2 = 0.06; 0.04·1 = 0.04 → running max 0.06
    expect(holm([0.01, 0.04, 0.03, 0.005])).toEqual(
      [0.03, 0.06, 0.06, 0.02].map((x) => expect.closeTo(x, 12)),
    );
    const withNull = holm([0.02, null, 0.04]);
    expect(withNull[1]).toBeNull();
    expect(withNull[0]).toBeCloseTo(0.04, 12); // m = 2
    expect(withNull[2]).toBeCloseTo(0.04, 12);
    expect(holm([0.6, 0.9])).toEqual([1, 1]);
  });
});
