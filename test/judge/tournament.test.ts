import { describe, expect, it } from 'vitest';

import { comparePair, type PairJudgment } from '../../src/judge/compare.js';
import {
  allPairs,
  circularPairs,
  plannedPairs,
  runTournament,
  standings,
  swissPairings,
  swissRounds,
  tournamentRewards,
  type PairResult,
  type PlayedPair,
  type Schedule,
} from '../../src/judge/tournament.js';
import { positionAJudge, rankJudge } from '../fakes/comparative.js';
import { type FakeReply, type FakeReplyFn } from '../fakes/openai.js';
import { useFakeRouter } from './helpers.js';

const result = (preference: PairResult['preference'], positionBias = false): PairResult => ({
  preference,
  positionBias,
  judged: true,
});

describe('schedules', () => {
  it('all_pairs lists G(G−1)/2 pairs, circular G (G ≥ 3), and Swiss ⌈log₂G⌉ rounds of ⌊G/2⌋', () => {
    expect(allPairs(6)).toHaveLength(15);
    expect(circularPairs(6)).toEqual([
      { i: 0, j: 1 },
      { i: 1, j: 2 },
      { i: 2, j: 3 },
      { i: 3, j: 4 },
      { i: 4, j: 5 },
      { i: 0, j: 5 },
    ]);
    expect(circularPairs(2)).toEqual([{ i: 0, j: 1 }]);
    expect(circularPairs(1)).toEqual([]);
    expect([2, 3, 4, 5, 8, 9].map(swissRounds)).toEqual([1, 2, 2, 3, 3, 4]);
    expect(plannedPairs('swiss', 6)).toBe(9);
    expect(plannedPairs('all_pairs', 6)).toBe(15);
    expect(plannedPairs('circular', 6)).toBe(6);
  });

  it('pairs Swiss neighbours in the standings who have not met; the odd one out sits out', () => {
    expect(swissPairings(5, [0, 0, 0, 0, 0], new Set())).toEqual([
      { i: 0, j: 1 },
      { i: 2, j: 3 },
    ]);
    // After round 1 (1 and 3 won): 1 meets 3 (same points), 0 meets 2 (0:1 already played), 4 sits out.
    expect(swissPairings(5, [0, 1, 0, 1, 0], new Set(['0:1', '2:3']))).toEqual([
      { i: 1, j: 3 },
      { i: 0, j: 2 },
    ]);
  });

  it('gives the bye to a candidate that has not had one: with an odd G nobody sits out every round', async () => {
    // Before: the last-placed candidate (0 points, highest index) sat out round after round, never compared,
    // and a ranking with it could say nothing about it (its group no reward, rank-outcomes.ts).
    for (const g of [3, 5, 7, 9, 11, 13, 15]) {
      const played = await runTournament(g, 'swiss', (p) => Promise.resolve(result(p.i < p.j ? 'a' : 'b')));
      const compared = new Set(played.flatMap((p) => [p.i, p.j]));
      expect(compared.size, `G = ${g}`).toBe(g);
      const s = standings(g, played);
      expect(
        s.candidates.every((c) => c.score !== null),
        `G = ${g}`,
      ).toBe(true);
    }
    expect(swissPairings(5, [0, 1, 0, 1, 0], new Set(['0:1', '2:3']), new Set([4]))).toEqual([
      { i: 1, j: 3 },
      { i: 0, j: 4 },
    ]);
  });

  it('runs Swiss round by round, feeding results into the next pairing, and never repeats a pair', async () => {
    const seen: string[] = [];
    const played = await runTournament(8, 'swiss', (p, round) => {
      seen.push(`${round}:${p.i}-${p.j}`);
      return Promise.resolve(result('b')); // pairs are (i < j): the higher index always wins
    });
    expect(played).toHaveLength(12);
    expect(new Set(played.map((p) => `${p.i}-${p.j}`)).size).toBe(12);
    expect(seen.slice(0, 4)).toEqual(['1:0-1', '1:2-3', '1:4-5', '1:6-7']);
    expect(seen.slice(4, 8)).toEqual(['2:1-3', '2:5-7', '2:0-2', '2:4-6']);
    const s = standings(8, played);
    expect(s.ranking[0]).toBe(7);
    expect(s.candidates[7]!.wins).toBe(3);
  });
});

describe('standings and rewards', () => {
  const play = (pairs: Array<[number, number, PairResult]>): Array<PlayedPair<PairResult>> =>
    pairs.map(([i, j, r]) => ({ i, j, round: 1, result: r }));

  it('drops a failed comparison without a loss and gives a candidate with none successful null', () => {
    const s = standings(
      3,
      play([
        [0, 1, result('a')],
        [0, 2, result(null)],
        [1, 2, result(null)],
      ]),
    );
    expect(s.comparisons).toEqual({ scheduled: 3, ok: 1, failed: 2 });
    expect(s.candidates[2]).toMatchObject({
      score: null,
      ci: null,
      rank: null,
      wins: 0,
      losses: 0,
      failed: 2,
    });
    expect(s.candidates[1]).toMatchObject({ wins: 0, losses: 1, failed: 1 });
    expect(s.ranking).toEqual([0, 1, 2]);
    expect(tournamentRewards(s, 'graded')[2]).toBeNull();
    expect(tournamentRewards(s, 'top_k', 1)).toEqual([1, 0, null]);
  });

  it('counts position-bias events over judged comparisons only, and breaks score ties by wins then index', () => {
    const s = standings(
      3,
      play([
        [0, 1, result('tie', true)],
        [1, 2, result('tie', true)],
        [0, 2, { preference: 'a', positionBias: false, judged: false }],
      ]),
    );
    expect(s.positionBias).toEqual({ events: 2, judged: 2, rate: 1 });
    expect(s.ranking[0]).toBe(0);
    const even = standings(2, play([[0, 1, result('tie')]]));
    expect(even.ranking).toEqual([0, 1]);
    expect(tournamentRewards(even, 'top_k', 1)).toEqual([1, 0]);
  });
});

describe('tournaments on the fake backend', () => {
  const start = useFakeRouter();

  const ideas = Array.from(
    { length: 6 },
    (_, k) =>
      `Idea RANK${[3, 1, 5, 0, 4, 2][k]}: a distinct method for verifying reasoning steps, number ${k}.`,
  );

  async function tournament(schedule: Schedule, judge: FakeReply | FakeReplyFn, maxRetries = 0) {
    const { fake, router: r } = await start({ fallback: judge }, { max_retries: maxRetries });
    const played = await runTournament<PairResult & { j: PairJudgment }>(6, schedule, async (p) => {
      const j = await comparePair(
        {
          question: 'Q?',
          groundTruth: 'A ground truth abstract.',
          criterion: 'match',
          a: ideas[p.i]!,
          b: ideas[p.j]!,
        },
        { router: r, deadline: Date.now() + 5_000 },
      );
      return { preference: j.preference, positionBias: j.positionBias, judged: j.status === 'ok', j };
    });
    return { played, s: standings(6, played), calls: fake.callCount };
  }

  it('all_pairs over 6 candidates makes exactly 30 comparison calls, circular 12', async () => {
    expect((await tournament('all_pairs', rankJudge)).calls).toBe(30);
    expect((await tournament('circular', rankJudge)).calls).toBe(12);
  });

  it('a judge that always prefers position A gives a position-bias rate of 1 and equal scores', async () => {
    const { s } = await tournament('all_pairs', positionAJudge);
    expect(s.positionBias).toEqual({ events: 15, judged: 15, rate: 1 });
    const scores = s.candidates.map((c) => c.score!);
    for (const score of scores) expect(score).toBeCloseTo(0.5, 12);
    expect(s.candidates.every((c) => c.ties === 5 && c.wins === 0)).toBe(true);
  });

  it('a judge with a known total order yields that ranking and scores monotone in it', async () => {
    const { s } = await tournament('all_pairs', rankJudge);
    // RANK markers 3,1,5,0,4,2 → best first: indices 2 (5), 4 (4), 0 (3), 5 (2), 1 (1), 3 (0).
    expect(s.ranking).toEqual([2, 4, 0, 5, 1, 3]);
    const ordered = s.ranking.map((k) => s.candidates[k]!.score!);
    for (let k = 1; k < ordered.length; k++) expect(ordered[k]!).toBeLessThan(ordered[k - 1]!);
    expect(s.positionBias.rate).toBe(0);
    expect(s.candidates[2]).toMatchObject({ wins: 5, losses: 0, rank: 1 });
  });

  it('a comparison that fails after retries never becomes a loss; a candidate with none successful gets null', async () => {
    // Every call whose prompt shows idea 3 (RANK0) fails with 500, also on its one retry.
    const { s } = await tournament(
      'all_pairs',
      (body) =>
        JSON.stringify(body.messages).includes('RANK0') ? { kind: 'status', status: 500 } : rankJudge(body),
      1,
    );
    expect(s.candidates[3]).toMatchObject({
      score: null,
      rank: null,
      wins: 0,
      losses: 0,
      ties: 0,
      failed: 5,
    });
    expect(s.comparisons).toEqual({ scheduled: 15, ok: 10, failed: 5 });
    // The others keep their order, their losses coming only from real comparisons.
    expect(s.ranking).toEqual([2, 4, 0, 5, 1, 3]);
    expect(s.candidates[1]).toMatchObject({ wins: 0, losses: 4, failed: 1 });
    expect(tournamentRewards(s, 'graded')[3]).toBeNull();
  });
});
