/**
 * Coverage of `/v1/rank`'s 95% score intervals by simulation (seeded, ~2 s): true log-strengths ~ N(0, 1),
 * one Bradley–Terry comparison per scheduled pair; every candidate's interval of every replication counts.
 * The percentile bootstrap over comparisons this replaced covered 0.000 at G = 2 and 0.84–0.91 at G = 3–6.
 */
import { describe, expect, it } from 'vitest';
import { rankCoverage } from '../../src/ablations/stats/rank-coverage.js';
import { SCHEDULES } from '../../src/judge/tournament.js';

describe('rank score intervals cover', () => {
  for (const schedule of SCHEDULES) {
    for (const g of [2, 3, 6, 16]) {
      it(`at ≥ 0.94 with ${schedule}, G = ${g}`, () => {
        const result = rankCoverage({ schedule, g }, g === 16 ? 60 : 200, 11, 400);
        expect(result.nullShare).toBe(0);
        expect(result.coverage).toBeGreaterThanOrEqual(0.94);
      });
    }
  }
});
