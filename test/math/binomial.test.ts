import { describe, expect, it } from 'vitest';

import { exactInterval } from '../../src/math/binomial.js';

describe('exactInterval (Clopper–Pearson)', () => {
  it('matches R binom.test at 95 %', () => {
    // binom.test(x, n)$conf.int in R 4.3
    const cases: Array<[number, number, number, number]> = [
      [5, 10, 0.187086, 0.812914],
      [3, 7, 0.0989883, 0.8159484],
      [950, 1000, 0.9346095, 0.9626646],
      [1, 40, 0.0006326, 0.1315859],
    ];
    for (const [x, n, lo, hi] of cases) {
      const i = exactInterval(x, n);
      expect(i.lo, `${x}/${n}`).toBeCloseTo(lo, 5);
      expect(i.hi, `${x}/${n}`).toBeCloseTo(hi, 5);
    }
  });

  it('has the closed forms at the edges: [0, 1 − (α/2)^(1/n)] for x = 0 and [(α/2)^(1/n), 1] for x = n', () => {
    expect(exactInterval(0, 10)).toEqual({ rate: 0, lo: 0, hi: expect.closeTo(1 - 0.025 ** 0.1, 9) });
    expect(exactInterval(10, 10)).toEqual({ rate: 1, lo: expect.closeTo(0.025 ** 0.1, 9), hi: 1 });
  });

  it('is null without trials', () => {
    expect(exactInterval(0, 0)).toEqual({ rate: null, lo: null, hi: null });
  });
});
