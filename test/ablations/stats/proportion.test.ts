import { describe, expect, it } from 'vitest';
import {
  clopperPearson,
  clusteredProportion,
  degreesOfFreedomFactor,
  trialsNeeded,
  type Tally,
} from '../../../src/ablations/stats/proportion.js';

/** n independent trials (one per cluster), the first `hits` of them hits. */
const independent = (hits: number, n: number): Tally[] =>
  Array.from({ length: n }, (_, i) => ({ hits: i < hits ? 1 : 0, trials: 1 }));

describe('Clopper–Pearson', () => {
  it('matches the closed form at 0 events and R at 5/20', () => {
    expect(clopperPearson(0, 60).hi).toBeCloseTo(1 - 0.025 ** (1 / 60), 12);
    expect(clopperPearson(0, 60).lo).toBe(0);
    expect(clopperPearson(60, 60).hi).toBe(1);
    const { lo, hi } = clopperPearson(5, 20);
    expect(lo).toBeCloseTo(0.08657147, 7);
    expect(hi).toBeCloseTo(0.49104587, 7);
  });

  it('0 failures out of 60 has an upper bound ≥ 4%, never [0, 0]', () => {
    const p = clusteredProportion(independent(0, 60));
    expect(p.rate).toBe(0);
    expect(p.ci.lo).toBe(0);
    expect(p.ci.hi!).toBeGreaterThanOrEqual(0.04);
    // 1 − 0.025^(1/n) on the effective n = 60 × (z / t₅₉)² (Korn–Graubard), a little above 5.96%.
    expect(p.ci.hi!).toBeCloseTo(1 - 0.025 ** (1 / (60 * degreesOfFreedomFactor(60))), 9);
    expect(p.ci.designEffect).toBe(1);
  });
});

describe('clusteredProportion', () => {
  it('counts a perfectly clustered outcome about once per cluster (design effect ≈ cluster size)', () => {
    // 40 clusters of 5 items, each cluster all hits or all misses.
    const clustered = Array.from({ length: 40 }, (_, i) => ({ hits: i % 4 === 0 ? 5 : 0, trials: 5 }));
    const p = clusteredProportion(clustered);
    expect(p.rate).toBeCloseTo(0.25, 12);
    expect(p.ci.designEffect!).toBeCloseTo(5 * (40 / 39), 9);
    const iid = clusteredProportion(independent(50, 200));
    expect(p.ci.hi! - p.ci.lo!).toBeGreaterThan(1.8 * (iid.ci.hi! - iid.ci.lo!));
  });

  it('never gets narrower than independent items (design effect floored at 1)', () => {
    // Every cluster has exactly the mean rate: the clustered variance is 0.
    const even = Array.from({ length: 50 }, () => ({ hits: 1, trials: 4 }));
    expect(clusteredProportion(even).ci.designEffect).toBe(1);
  });

  it('gives no interval without trials', () => {
    const p = clusteredProportion([{ hits: 0, trials: 0 }]);
    expect(p).toMatchObject({ rate: null, ci: { lo: null, hi: null, note: 'no trials' } });
  });
});

describe('trialsNeeded', () => {
  it('0/330 does not show a 1% rate; the same rate would at the returned n and not one below', () => {
    const p = clusteredProportion(independent(0, 330));
    expect(p.ci.hi!).toBeGreaterThan(0.01);
    const n = trialsNeeded(p, 0.01)!;
    // ln(0.025) / ln(0.99) = 367.0 effective trials, divided by the df factor of these 330 clusters.
    expect(n).toBe(Math.ceil(Math.log(0.025) / Math.log(0.99) / degreesOfFreedomFactor(330)));
    const factor = p.ci.effectiveTrials! / p.trials;
    expect(clopperPearson(0, n * factor).hi).toBeLessThanOrEqual(0.01);
    expect(clopperPearson(0, (n - 1) * factor).hi).toBeGreaterThan(0.01);
  });

  it('is null when the rate is at or above the gate', () => {
    expect(trialsNeeded(clusteredProportion(independent(2, 100)), 0.02)).toBeNull();
    expect(trialsNeeded(clusteredProportion(independent(1, 100)), 0.02)).toBeGreaterThan(100);
  });
});

describe('clusteredProportion with few events', () => {
  it('adds the cluster-level bound and labels the interval when no event is seen', () => {
    const none = clusteredProportion(Array.from({ length: 34 }, () => ({ hits: 0, trials: 8 })));
    expect(none.ci.clusterLevel!.hi).toBeCloseTo(1 - 0.025 ** (1 / 34), 10);
    expect(none.ci.clusterLevel!.hi).toBeGreaterThan(none.ci.hi! * 5);
    expect(none.ci.note).toMatch(/assumes unclustered events/);
  });

  it('bounds by the clusters that hold an event, however many events each holds', () => {
    const tallies = Array.from({ length: 34 }, (_, i) => ({ hits: i === 0 ? 4 : 0, trials: 8 }));
    const p = clusteredProportion(tallies);
    expect(p.ci.clusterLevel!.hi).toBeCloseTo(clopperPearson(1, 34).hi, 12);
    expect(p.ci.note).toMatch(/only 4 events/);
  });

  it('reports no cluster-level bound with enough events of both kinds', () => {
    const p = clusteredProportion(Array.from({ length: 34 }, (_, i) => ({ hits: i % 2, trials: 8 })));
    expect(p.ci.clusterLevel).toBeNull();
    expect(p.ci.note).toBeNull();
  });
});
