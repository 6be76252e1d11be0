/**
 * Budgeted committee choice: from members measured alone (each a candidate (role, model) seat with its
 * token cost), the majority committee of a given size with the best predicted accuracy under a cost budget,
 * predicted from the measured joint vote distribution (correlation-aware). The decorrelation gain is what
 * that choice wins over the committee a correlation-blind planner (independence prediction) would pick,
 * both scored on the measured joint distribution. Pure.
 */
import { independentPrediction, jointPrediction, type Prediction, type VotedItem } from './condorcet.js';
import type { MemberCalibration, VoteTable } from './members.js';

export interface PlanCandidate {
  key: string;
  role: string;
  model: string | null;
  /** Mean tokens per judgment this member spends, and its cost at the given price (or the tokens). */
  tokens: number;
  cost: number;
}

export interface PlannedCommittee {
  members: string[];
  cost: number;
  predicted: Prediction;
}

export interface Plan {
  size: number;
  budget: number;
  /** `usd` when a price was given, else `tokens` (the budget is then tokens per judgment). */
  unit: 'usd' | 'tokens';
  candidates: PlanCandidate[];
  /** Committees within budget that were scored. */
  considered: number;
  best: PlannedCommittee | null;
  /** The committee an independence-based planner would pick (scored on the joint distribution). */
  independenceChoice: PlannedCommittee | null;
  bestSingle: PlannedCommittee | null;
  /** best − independenceChoice accuracy: the part of the gain that comes from decorrelation. */
  decorrelationGain: number | null;
  /** best − bestSingle accuracy: the whole committee gain. */
  committeeGain: number | null;
}

/** Most committees the exhaustive search scores. */
export const MAX_PLAN_COMMITTEES = 50_000;

function* combinations(n: number, k: number, start = 0, prefix: number[] = []): Generator<number[]> {
  if (prefix.length === k) {
    yield prefix.slice();
    return;
  }
  for (let i = start; i < n; i++) {
    prefix.push(i);
    yield* combinations(n, k, i + 1, prefix);
    prefix.pop();
  }
}

function votedItems(table: VoteTable, rows: readonly number[]): VotedItem[] {
  const out: VotedItem[] = [];
  table.items.forEach((item, i) => {
    const votes: (0 | 1)[] = [];
    for (const r of rows) {
      const v = table.votes[r]?.[i];
      if (v === null || v === undefined) return;
      votes.push(v);
    }
    out.push({ label: item.label, votes, confidences: votes.map(() => 1) });
  });
  return out;
}

export function planCommittee(options: {
  table: VoteTable;
  members: readonly MemberCalibration[];
  candidates: readonly PlanCandidate[];
  size: number;
  budget: number;
  unit: 'usd' | 'tokens';
  /** Committees the engine can run (e.g. no identical parallel members); default every one. */
  admissible?: ((picked: readonly PlanCandidate[]) => boolean) | undefined;
}): Plan {
  const { table, candidates, size, budget } = options;
  const admissible = options.admissible ?? (() => true);
  const rowOf = new Map(table.members.map((m, i) => [m.key, i]));
  const calOf = new Map(options.members.map((m) => [m.member.key, m]));
  const positives = table.items.filter((i) => i.label === 1).length;
  const prevalence = table.items.length === 0 ? 0.5 : positives / table.items.length;
  let considered = 0;
  let best: PlannedCommittee | null = null;
  let blind: { committee: PlannedCommittee; independent: number } | null = null;
  let bestSingle: PlannedCommittee | null = null;
  const score = (picked: readonly PlanCandidate[], cost: number): PlannedCommittee | null => {
    const rows = picked.map((c) => rowOf.get(c.key) ?? -1);
    if (rows.some((r) => r < 0)) return null;
    const predicted = jointPrediction(
      'majority',
      votedItems(table, rows),
      picked.map(() => 1),
      prevalence,
    );
    return predicted === null ? null : { members: picked.map((c) => c.key), cost, predicted };
  };
  for (const c of candidates) {
    if (c.cost > budget) continue;
    const s = score([c], c.cost);
    if (s !== null && (bestSingle === null || s.predicted.accuracy > bestSingle.predicted.accuracy))
      bestSingle = s;
  }
  for (const combo of combinations(candidates.length, size)) {
    if (considered >= MAX_PLAN_COMMITTEES) break;
    const picked = combo.map((i) => candidates[i]).filter((c): c is PlanCandidate => c !== undefined);
    const cost = picked.reduce((s, c) => s + c.cost, 0);
    if (cost > budget || !admissible(picked)) continue;
    considered++;
    const s = score(picked, cost);
    if (s === null) continue;
    if (best === null || s.predicted.accuracy > best.predicted.accuracy) best = s;
    const voters = picked.map((c) => calOf.get(c.key));
    if (voters.some((v) => v?.tpr.rate == null || v.tnr.rate === null)) continue;
    const independent = independentPrediction(
      'majority',
      voters.map((v) => ({ tpr: v?.tpr.rate ?? 0, tnr: v?.tnr.rate ?? 0 })),
      prevalence,
    ).accuracy;
    if (blind === null || independent > blind.independent) blind = { committee: s, independent };
  }
  return {
    size,
    budget,
    unit: options.unit,
    candidates: [...candidates],
    considered,
    best,
    independenceChoice: blind?.committee ?? null,
    bestSingle,
    decorrelationGain:
      best === null || blind === null ? null : best.predicted.accuracy - blind.committee.predicted.accuracy,
    committeeGain:
      best === null || bestSingle === null ? null : best.predicted.accuracy - bestSingle.predicted.accuracy,
  };
}
