import { describe, expect, it } from 'vitest';
import { calibrateMember, type VoteTable } from '../../src/ablations/calibrate/members.js';
import { planCommittee, type PlanCandidate } from '../../src/ablations/calibrate/plan.js';
import type { DatasetItem } from '../../src/ablations/dataset.js';

// 10 positives and 2 negatives; every member is right on both negatives.
const items: DatasetItem[] = Array.from({ length: 12 }, (_, i) => ({
  id: `i${i}`,
  question: 'q',
  candidate: 'c',
  ground_truth: `gt${i}`,
  label: i < 10 ? 1 : 0,
  kind: i < 10 ? 'positive' : 'easy_negative',
  source: 's',
  venue: 'v',
  area: 'a',
}));
const wrongOn = (wrong: number[]): (0 | 1)[] =>
  items.map((item, i) => (wrong.includes(i) ? (item.label === 1 ? 0 : 1) : item.label));
// Three copies of an 80 % member (same errors) and three 70 % members with nearly disjoint errors.
const rows: Record<string, number[]> = {
  a1: [0, 1],
  a2: [0, 1],
  a3: [0, 1],
  d: [2, 3, 4],
  e: [5, 6, 7],
  f: [8, 9, 1],
};
const table: VoteTable = {
  members: Object.keys(rows).map((id) => ({
    key: `g/${id}`,
    graph: 'g',
    nodeId: id,
    role: 'judge',
    model: null,
    round: 1,
    stage: 'debate',
  })),
  items,
  clusterOf: items.map((_, i) => i),
  clusters: items.length,
  votes: Object.values(rows).map(wrongOn),
  confidence: Object.values(rows).map(() => items.map(() => 1)),
};
const members = table.members.map((_, m) => calibrateMember(table, m)!);
const candidates: PlanCandidate[] = table.members.map((m) => ({
  key: m.key,
  role: 'judge',
  model: null,
  tokens: 1,
  cost: 1,
}));

describe('planCommittee', () => {
  it('picks decorrelated members that independence would pass over, and says how much that is worth', () => {
    const plan = planCommittee({ table, members, candidates, size: 3, budget: 3, unit: 'tokens' });
    expect(plan.considered).toBe(20);
    // Independence prefers the three 80 % copies (TPR .896 predicted) — together they are just one member.
    expect(plan.independenceChoice?.members).toEqual(['g/a1', 'g/a2', 'g/a3']);
    expect(plan.independenceChoice?.predicted.tpr).toBeCloseTo(0.8, 12);
    expect(plan.independenceChoice?.predicted.accuracy).toBeCloseTo((10 / 12) * 0.8 + 2 / 12, 12);
    // The joint distribution finds a trio no two of which err on the same item: every positive accepted.
    expect(plan.best?.predicted.tpr).toBe(1);
    expect(plan.best?.predicted.accuracy).toBe(1);
    expect(plan.best?.members.filter((k) => k.startsWith('g/a'))).toHaveLength(1);
    expect(plan.decorrelationGain).toBeCloseTo(1 - ((10 / 12) * 0.8 + 2 / 12), 12);
    expect(plan.bestSingle?.predicted.accuracy).toBeCloseTo((10 / 12) * 0.8 + 2 / 12, 12);
    expect(plan.committeeGain).toBeCloseTo(plan.decorrelationGain!, 12);
  });

  it('honours the budget: nothing of size 3 fits in 2.5', () => {
    const plan = planCommittee({ table, members, candidates, size: 3, budget: 2.5, unit: 'tokens' });
    expect(plan.considered).toBe(0);
    expect(plan.best).toBeNull();
    expect(plan.decorrelationGain).toBeNull();
    expect(plan.bestSingle?.members).toEqual(['g/a1']);
  });
});
