/**
 * Coverage of the report's intervals by simulation (small, seeded, bounded: the file runs in a few seconds).
 * Each check simulates data from a known truth many times and counts how often the 95% interval holds it.
 * With R replications the Monte-Carlo standard error of a coverage near 0.95 is sqrt(0.95·0.05/R).
 */
import { describe, expect, it } from 'vitest';
import { createRng } from '../../../src/math/sampling.js';
import { rates, sumConfusions } from '../../../src/ablations/stats/confusion.js';
import { clusteredProportion, type Tally } from '../../../src/ablations/stats/proportion.js';
import { pairedRates, ratesWithCi, type PairedCluster } from '../../../src/ablations/stats/rates.js';
import { clusteredMcnemar, mcnemarExact } from '../../../src/ablations/stats/significance.js';
import { clusterRate, type Rng } from '../../../src/ablations/stats/simulate.js';
import { mooseCluster as mooseClusterOf } from '../../../src/ablations/stats/coverage.js';

/** The openreview dev set's cluster sizes: 95 single items, 152 pairs, 67 triples (600 items, 314 clusters). */
const OPENREVIEW_SIZES = [
  ...Array<number>(95).fill(1),
  ...Array<number>(152).fill(2),
  ...Array<number>(67).fill(3),
];

function rareEventCoverage(p: number, icc: number, replications: number, seed: number): number {
  const rng = createRng(seed);
  let covered = 0;
  for (let r = 0; r < replications; r++) {
    const tallies: Tally[] = OPENREVIEW_SIZES.map((n) => {
      const rate = clusterRate(rng, p, icc);
      let hits = 0;
      for (let i = 0; i < n; i++) if (rng() < rate) hits++;
      return { hits, trials: n };
    });
    const { ci } = clusteredProportion(tallies);
    if (ci.lo !== null && ci.hi !== null && ci.lo <= p && p <= ci.hi) covered++;
  }
  return covered / replications;
}

/** MOOSE-Chem-like clusters whose second judge misses more positives and accepts fewer negatives. */
const mooseCluster = (rng: Rng): PairedCluster => mooseClusterOf(rng, 0.7, 0.3, 0.3);

describe('coverage by simulation', () => {
  it('exact intervals cover a 0.1% and a 0.3% rate at ≥ 0.95 (600 items in 314 clusters)', () => {
    for (const p of [0.001, 0.003]) {
      for (const icc of [0, 0.3]) {
        const coverage = rareEventCoverage(p, icc, 2000, 1000 * p + icc * 10 + 1);
        expect(coverage, `p = ${p}, ICC = ${icc}`).toBeGreaterThanOrEqual(0.95);
      }
    }
  });

  it('the few-cluster method covers F1, ΔF1 and recall at ≥ 0.94 with 34 clusters', () => {
    // The truth: the population values, from 200 000 clusters of the same model.
    const population = Array.from(
      { length: 200_000 },
      (
        (rng: Rng) => () =>
          mooseCluster(rng)
      )(createRng(99)),
    );
    const a = rates(sumConfusions(population.map((c) => c.a)));
    const b = rates(sumConfusions(population.map((c) => c.b)));
    const truth = { f1: a.f1!, recall: a.recall!, deltaF1: a.f1! - b.f1! };
    const rng = createRng(2024);
    const replications = 2000;
    const hits = { f1: 0, recall: 0, deltaF1: 0 };
    const inside = (lo: number | null, hi: number | null, x: number) =>
      lo !== null && hi !== null && lo <= x && x <= hi;
    for (let r = 0; r < replications; r++) {
      const sample = Array.from({ length: 34 }, () => mooseCluster(rng));
      const one = ratesWithCi(
        sample.map((c) => c.a),
        { seed: r, method: 'jackknife-t' },
      );
      const pair = pairedRates(sample, { seed: r, method: 'jackknife-t' });
      if (inside(one.ci.f1.lo, one.ci.f1.hi, truth.f1)) hits.f1++;
      if (inside(one.ci.recall.lo, one.ci.recall.hi, truth.recall)) hits.recall++;
      if (inside(pair.f1.ci.lo, pair.f1.ci.hi, truth.deltaF1)) hits.deltaF1++;
    }
    for (const [name, n] of Object.entries(hits)) {
      expect(n / replications, name).toBeGreaterThanOrEqual(0.94);
    }
  });

  it('McNemar ignores clusters (type-I error far above 5%); the clustered McNemar holds at 34 clusters', () => {
    // Equal accuracy overall, but in each cluster one judge (either, at random) is the better one.
    const rng = createRng(7);
    const replications = 2000;
    let exact = 0;
    let clustered = 0;
    for (let r = 0; r < replications; r++) {
      const discordant = Array.from({ length: 34 }, () => {
        const aBetter = rng() < 0.5;
        let b = 0;
        let c = 0;
        for (let i = 0; i < 8; i++) {
          if (rng() >= 0.3) continue; // concordant
          if (rng() < (aBetter ? 0.8 : 0.2)) b++;
          else c++;
        }
        return { b, c };
      });
      const b = discordant.reduce((s, d) => s + d.b, 0);
      const c = discordant.reduce((s, d) => s + d.c, 0);
      if (mcnemarExact(b, c) < 0.05) exact++;
      if (clusteredMcnemar(discordant) < 0.05) clustered++;
    }
    expect(exact / replications).toBeGreaterThan(0.1);
    expect(clustered / replications).toBeLessThanOrEqual(0.07);
  });
});
