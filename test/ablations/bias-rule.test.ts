/**
 * One bias rule for `ablate` and `calibrate` (issue 40 item 8): the same reviewer on the same items gets the
 * same label from both, printed in the same words. Before, calibrate called a member `permissive` whenever its
 * interval of FPR − FNR excluded 0, while ablate called the same votes `balanced` (|FPR − FNR| ≤ 0.05).
 */
import { describe, expect, it } from 'vitest';
import type { DatasetItem } from '../../src/ablations/dataset.js';
import { calibrateMember, type VoteTable } from '../../src/ablations/calibrate/members.js';
import { biasCell } from '../../src/ablations/format.js';
import { callBias, reviewerCalibration, type BiasCluster } from '../../src/ablations/stats/calibration.js';

function item(i: number, label: 0 | 1): DatasetItem {
  return {
    id: `i${i}`,
    question: 'q',
    candidate: 'c',
    ground_truth: `gt${i}`,
    label,
    kind: label === 1 ? 'positive' : 'hard_negative',
    source: 's',
    venue: 'v',
    area: 'a',
  };
}

/** n positives (the first `fn` missed) and n hard negatives (the first `fp` accepted), one cluster each. */
function votes(n: number, fn: number, fp: number): { items: DatasetItem[]; vote: (0 | 1)[] } {
  const items = [
    ...Array.from({ length: n }, (_, i) => item(i, 1)),
    ...Array.from({ length: n }, (_, i) => item(n + i, 0)),
  ];
  const vote = items.map((it, i): 0 | 1 => (it.label === 1 ? (i < fn ? 0 : 1) : i - n < fp ? 1 : 0));
  return { items, vote };
}

function both(n: number, fn: number, fp: number) {
  const { items, vote } = votes(n, fn, fp);
  const table: VoteTable = {
    members: [
      { key: 'g/judge', graph: 'g', nodeId: 'judge', role: 'judge', model: null, round: 1, stage: 'debate' },
    ],
    items,
    clusterOf: items.map((_, i) => i),
    clusters: items.length,
    votes: [vote],
    confidence: [vote.map(() => 0.9)],
  };
  const member = calibrateMember(table, 0)!;
  const clusters: BiasCluster[] = items.map((it, i) => {
    const v = vote[i]!;
    const all = {
      tp: it.label === 1 && v === 1 ? 1 : 0,
      fn: it.label === 1 && v === 0 ? 1 : 0,
      tn: it.label === 0 && v === 0 ? 1 : 0,
      fp: it.label === 0 && v === 1 ? 1 : 0,
    };
    return { all, hard: { hits: all.fp, trials: it.label === 0 ? 1 : 0 } };
  });
  const agent = reviewerCalibration(clusters, { seed: 1, hardNegatives: true });
  return { member, agent };
}

describe('one bias rule for ablate and calibrate', () => {
  it('labels a small but certain difference (FPR 14% − FNR 10%) balanced in both, not shown', () => {
    const { member, agent } = both(2000, 200, 280);
    expect(member.bias.difference!.point).toBeCloseTo(0.04, 12);
    // The interval excludes 0 (the old calibrate rule said permissive) and passes 0.05.
    expect(member.bias.difference!.lo).toBeGreaterThan(0);
    expect(member.bias.difference!.hi).toBeGreaterThan(0.05);
    expect({ bias: member.bias.label, shown: member.bias.shown }).toEqual({ bias: 'balanced', shown: false });
    expect({ bias: agent.bias, shown: agent.shown }).toEqual({ bias: 'balanced', shown: false });
    expect(biasCell({ bias: member.bias.label, shown: member.bias.shown })).toBe('balanced (not shown)');
    expect(biasCell(agent)).toBe('balanced (not shown)');
  });

  it('agrees on a clear permissive reviewer and a clear strict one', () => {
    for (const [fn, fp, label] of [
      [20, 120, 'permissive'],
      [120, 20, 'strict'],
    ] as const) {
      const { member, agent } = both(200, fn, fp);
      expect(member.bias).toMatchObject({ label, shown: true });
      expect(agent).toMatchObject({ bias: label, shown: true });
      expect(biasCell(agent)).toBe(label);
    }
  });

  it('callBias: the label from the point and the tolerance, shown from the interval', () => {
    expect(callBias(0.2, 0.1, 0.3)).toEqual({ bias: 'permissive', shown: true });
    expect(callBias(0.2, -0.1, 0.5)).toEqual({ bias: 'permissive', shown: false });
    expect(callBias(-0.2, null, null)).toEqual({ bias: 'strict', shown: false });
    expect(callBias(0.01, -0.02, 0.03)).toEqual({ bias: 'balanced', shown: true });
    expect(callBias(null, null, null)).toEqual({ bias: null, shown: null });
    expect(biasCell({ bias: null, shown: null })).toBe('–');
  });
});
