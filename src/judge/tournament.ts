/**
 * Tournaments over a group of G candidates: which pairs are compared (schedules), running them, and turning
 * the outcomes into standings, a ranking and rewards. Pure apart from the `compare` callback it is given;
 * no HTTP, no metrics.
 *
 * Cost (every pair is asked in both orders, `judges` judges per order):
 * - `all_pairs`: G(G−1)/2 pairs → G(G−1) calls × judges (G = 6: 15 pairs, 30 calls);
 * - `circular`: pair k with k+1 (mod G) → G pairs, 2G calls × judges for G ≥ 3 (G = 2: 1 pair, 2 calls);
 * - `swiss`: ⌈log₂G⌉ rounds, each pairing neighbours in the current standings who have not met →
 *   at most ⌈log₂G⌉·⌊G/2⌋ pairs, 2·⌈log₂G⌉·⌊G/2⌋ calls × judges (G = 6: ≤ 9 pairs, 18 calls).
 */
import { scoreIntervals, scoreOutcomes, type Outcome, type ScoreMethod } from './bradley-terry.js';
import type { Preference } from './compare.js';

export const SCHEDULES = ['all_pairs', 'circular', 'swiss'] as const;
export type Schedule = (typeof SCHEDULES)[number];

/** Two candidates to compare (0-based, i < j). */
export interface Pairing {
  i: number;
  j: number;
}

const key = (p: Pairing): string => `${p.i}:${p.j}`;

function ordered(a: number, b: number): Pairing {
  return a < b ? { i: a, j: b } : { i: b, j: a };
}

/** Every unordered pair, lexicographic. */
export function allPairs(g: number): Pairing[] {
  const pairs: Pairing[] = [];
  for (let i = 0; i < g; i++) for (let j = i + 1; j < g; j++) pairs.push({ i, j });
  return pairs;
}

/** Candidate k against k+1 (mod G), each pair once. */
export function circularPairs(g: number): Pairing[] {
  const seen = new Set<string>();
  const pairs: Pairing[] = [];
  for (let k = 0; k < g && g > 1; k++) {
    const p = ordered(k, (k + 1) % g);
    if (seen.has(key(p))) continue;
    seen.add(key(p));
    pairs.push(p);
  }
  return pairs;
}

/** Swiss rounds for G candidates: ⌈log₂G⌉ (0 for G ≤ 1). */
export function swissRounds(g: number): number {
  return g <= 1 ? 0 : Math.ceil(Math.log2(g));
}

/**
 * One Swiss round: candidates ordered by points (win 1, tie ½), then index; each unpaired candidate in that
 * order meets the next unpaired one it has not met yet. With an odd number of candidates one sits out (the
 * bye): the lowest-placed one that has not sat out yet (`byes`), as the Swiss rule has it — else the same
 * last-placed candidate would sit out every round and never be compared. A candidate left without an
 * opponent (everyone left has met it) sits out too.
 */
export function swissPairings(
  g: number,
  points: readonly number[],
  played: ReadonlySet<string>,
  byes: ReadonlySet<number> = new Set(),
): Pairing[] {
  const order = Array.from({ length: g }, (_, k) => k).sort(
    (a, b) => (points[b] ?? 0) - (points[a] ?? 0) || a - b,
  );
  const paired = new Set<number>();
  if (g % 2 === 1) {
    const bye = [...order].reverse().find((k) => !byes.has(k));
    if (bye !== undefined) paired.add(bye);
  }
  const pairs: Pairing[] = [];
  for (const [pos, a] of order.entries()) {
    if (paired.has(a)) continue;
    for (const b of order.slice(pos + 1)) {
      if (paired.has(b) || played.has(key(ordered(a, b)))) continue;
      paired.add(a);
      paired.add(b);
      pairs.push(ordered(a, b));
      break;
    }
  }
  return pairs;
}

/** Adds the candidates of `g` that no pair of a round includes to `byes` (who sat that round out). */
export function recordByes(g: number, pairs: readonly Pairing[], byes: Set<number>): void {
  const playing = new Set(pairs.flatMap((p) => [p.i, p.j]));
  for (let k = 0; k < g; k++) if (!playing.has(k)) byes.add(k);
}

/** Pairs a schedule compares for G candidates (for Swiss, the most it can compare). */
export function plannedPairs(schedule: Schedule, g: number): number {
  switch (schedule) {
    case 'all_pairs':
      return (g * (g - 1)) / 2;
    case 'circular':
      return circularPairs(g).length;
    case 'swiss':
      return swissRounds(g) * Math.floor(g / 2);
  }
}

/** A comparison's result as the tournament needs it. */
export interface PairResult {
  /** Null: the comparison failed (dropped and counted; never a loss). */
  preference: Preference | null;
  positionBias: boolean;
  /** False for results decided without an LLM (a degenerate candidate): not part of the position-bias rate. */
  judged: boolean;
}

export interface PlayedPair<R extends PairResult> extends Pairing {
  round: number;
  result: R;
}

/**
 * Runs a schedule: all pairs of a fixed schedule concurrently (the caller's compare bounds concurrency), Swiss
 * round by round. `compare` must not reject (failures are results with a null preference).
 */
export async function runTournament<R extends PairResult>(
  g: number,
  schedule: Schedule,
  compare: (pair: Pairing, round: number) => Promise<R>,
): Promise<Array<PlayedPair<R>>> {
  const play = async (pairs: readonly Pairing[], round: number): Promise<Array<PlayedPair<R>>> =>
    Promise.all(pairs.map(async (p) => ({ ...p, round, result: await compare(p, round) })));
  if (schedule === 'all_pairs') return play(allPairs(g), 1);
  if (schedule === 'circular') return play(circularPairs(g), 1);
  const played: Array<PlayedPair<R>> = [];
  const met = new Set<string>();
  const byes = new Set<number>();
  const points = new Array<number>(g).fill(0);
  for (let round = 1; round <= swissRounds(g); round++) {
    const pairs = swissPairings(g, points, met, byes);
    if (pairs.length === 0) break;
    recordByes(g, pairs, byes);
    for (const p of pairs) met.add(key(p));
    for (const r of await play(pairs, round)) {
      played.push(r);
      const pref = r.result.preference;
      if (pref === 'a') points[r.i] = (points[r.i] ?? 0) + 1;
      else if (pref === 'b') points[r.j] = (points[r.j] ?? 0) + 1;
      else if (pref === 'tie') {
        points[r.i] = (points[r.i] ?? 0) + 0.5;
        points[r.j] = (points[r.j] ?? 0) + 0.5;
      }
    }
  }
  return played;
}

export interface Standing {
  index: number;
  /** Score in [0, 1] (expected win rate in the group); null without any successful comparison. */
  score: number | null;
  ci: [number, number] | null;
  wins: number;
  losses: number;
  ties: number;
  /** Comparisons that involved this candidate and failed (dropped). */
  failed: number;
  /** 1-based rank among scored candidates; null when unscored. */
  rank: number | null;
}

export interface Standings {
  candidates: Standing[];
  /** Candidate indices best first: by score, then wins, then index; unscored candidates last (by index). */
  ranking: number[];
  comparisons: { scheduled: number; ok: number; failed: number };
  /** Position-bias events among the comparisons decided by the judge (degenerate pairs excluded). */
  positionBias: { events: number; judged: number; rate: number | null };
}

export interface StandingsOptions {
  method?: ScoreMethod | undefined;
  /**
   * Candidates that are no ideas (rejected inputs): each loses to every other candidate by rule, without a
   * comparison — in the fit and in wins/losses, not in `comparisons` nor the position-bias rate. Two of them
   * have no outcome between them. So the real candidates' scores count their wins over these (beating a
   * filler is a real outcome), and a lone real idea among them is scored.
   */
  rejected?: ReadonlySet<number> | undefined;
  /** Posterior draws of the score intervals (default DEFAULT_SCORE_DRAWS). */
  draws?: number | undefined;
  seed?: number | undefined;
}

/** Every candidate not in `rejected` beats every one in it (each such outcome counted in `rows`). */
function addRejectedLosses(
  rows: ReadonlyArray<{ index: number; wins: number; losses: number }>,
  outcomes: Outcome[],
  rejected: ReadonlySet<number> | undefined,
): void {
  if (rejected === undefined || rejected.size === 0) return;
  for (const real of rows) {
    if (rejected.has(real.index)) continue;
    for (const lost of rows) {
      if (!rejected.has(lost.index)) continue;
      real.wins += 1;
      lost.losses += 1;
      outcomes.push(
        real.index < lost.index
          ? { i: real.index, j: lost.index, winner: 'i' }
          : { i: lost.index, j: real.index, winner: 'j' },
      );
    }
  }
}

/** Standings, ranking and counts from the played pairs. */
export function standings<R extends PairResult>(
  g: number,
  played: ReadonlyArray<PlayedPair<R>>,
  options: StandingsOptions = {},
): Standings {
  const outcomes: Outcome[] = [];
  const rows = Array.from({ length: g }, (_, index) => ({ index, wins: 0, losses: 0, ties: 0, failed: 0 }));
  let failed = 0;
  let events = 0;
  let judged = 0;
  for (const p of played) {
    const pref = p.result.preference;
    const ri = rows[p.i];
    const rj = rows[p.j];
    if (ri === undefined || rj === undefined) continue;
    if (pref === null) {
      failed += 1;
      ri.failed += 1;
      rj.failed += 1;
      continue;
    }
    if (p.result.judged) {
      judged += 1;
      if (p.result.positionBias) events += 1;
    }
    if (pref === 'a') {
      ri.wins += 1;
      rj.losses += 1;
    } else if (pref === 'b') {
      rj.wins += 1;
      ri.losses += 1;
    } else {
      ri.ties += 1;
      rj.ties += 1;
    }
    outcomes.push({ i: p.i, j: p.j, winner: pref === 'a' ? 'i' : pref === 'b' ? 'j' : 'tie' });
  }
  addRejectedLosses(rows, outcomes, options.rejected);
  const scores = scoreOutcomes(g, outcomes, options.method);
  const cis = scoreIntervals(g, outcomes, {
    method: options.method,
    draws: options.draws,
    seed: options.seed,
  });
  const ranking = rows
    .map((r) => r.index)
    .sort((a, b) => {
      const sa = scores[a] ?? null;
      const sb = scores[b] ?? null;
      if (sa === null || sb === null) return sa === sb ? a - b : sa === null ? 1 : -1;
      return sb - sa || (rows[b]?.wins ?? 0) - (rows[a]?.wins ?? 0) || a - b;
    });
  const rankOf = new Map<number, number>();
  ranking.forEach((index, pos) => {
    if (scores[index] != null) rankOf.set(index, pos + 1);
  });
  return {
    candidates: rows.map((r) => ({
      ...r,
      score: scores[r.index] ?? null,
      ci: cis[r.index] ?? null,
      rank: rankOf.get(r.index) ?? null,
    })),
    ranking,
    comparisons: { scheduled: played.length, ok: played.length - failed, failed },
    positionBias: { events, judged, rate: judged === 0 ? null : events / judged },
  };
}

export type RewardMode = 'graded' | 'top_k';

/**
 * Rewards per candidate: `graded` = the score; `top_k` = 1 for the k best-ranked scored candidates, else 0.
 * Unscored candidates get null in both modes (never 0).
 */
export function tournamentRewards(s: Standings, mode: RewardMode, k = 1): Array<number | null> {
  if (mode === 'graded') return s.candidates.map((c) => c.score);
  return s.candidates.map((c) => (c.rank === null ? null : c.rank <= k ? 1 : 0));
}
