/**
 * What becomes of each ranked candidate (src/server/serving/rank-outcomes.ts) and its reward
 * (src/server/serving/outcomes.ts): rejected → 0 in both modes and last, an incomplete group → no reward,
 * a cancel → cancelled. Pure: standings from hand-made pairs.
 */
import { describe, expect, it } from 'vitest';

import type { ErrorCode } from '../../src/errors.js';
import type { Preference } from '../../src/judge/compare.js';
import { allPairs, standings, type PlayedPair, type RewardMode } from '../../src/judge/tournament.js';
import { rewardOf, trainerFailure, trainerReward } from '../../src/server/serving/outcomes.js';
import { rankOutcomes } from '../../src/server/serving/rank-outcomes.js';

interface Pair {
  preference: Preference | null;
  positionBias: boolean;
  judged: boolean;
  judgment: {
    status: 'ok' | 'rejected_input' | 'judge_error' | 'timeout';
    error?: { code: ErrorCode; message: string };
  };
}

const ok = (preference: Preference): Pair => ({
  preference,
  positionBias: false,
  judged: true,
  judgment: { status: 'ok' },
});
const failed = (code: ErrorCode = 'RW_JUDGE_UNAVAILABLE'): Pair => ({
  preference: null,
  positionBias: false,
  judged: false,
  judgment: {
    status: code === 'RW_JUDGE_TIMEOUT' ? 'timeout' : 'judge_error',
    error: { code, message: code },
  },
});
/**
 * All pairs of the real candidates of `g` (as the comparison service plays them: rejected ones are no idea to
 * compare, the standings decide their losses), each from `result(i, j)` (by default the lower index wins).
 */
function outcomes(
  g: number,
  rejections: Array<string | undefined>,
  result: (i: number, j: number) => Pair = () => ok('a'),
  mode: RewardMode = 'top_k',
  k = 1,
) {
  const rejected = new Set(rejections.flatMap((r, i) => (r === undefined ? [] : [i])));
  const played: Array<PlayedPair<Pair>> = allPairs(g)
    .filter((p) => !rejected.has(p.i) && !rejected.has(p.j))
    .map((p) => ({ ...p, round: 1, result: result(p.i, p.j) }));
  const r = rankOutcomes(standings(g, played, { rejected }), played, rejections, mode, k);
  return { ...r, rewards: r.candidates.map((c) => rewardOf(c.outcome)) };
}

describe('rejected candidates', () => {
  it('get 0 whatever k, rank after every idea, and never take a top-k place', () => {
    const r = outcomes(
      4,
      [undefined, 'master_key_filler', 'master_key_filler', 'empty'],
      undefined,
      'top_k',
      3,
    );
    expect(r.rewards).toEqual([1, 0, 0, 0]);
    expect(r.ranking).toEqual([0, 1, 2, 3]);
    expect(r.candidates.map((c) => c.score)).toEqual([expect.any(Number), 0, 0, 0]);
    expect(r.candidates[1]?.outcome).toEqual({ kind: 'rejected', reason: 'master_key_filler' });
  });

  it('get 0 in graded mode, and a lone real idea still gets its score from beating them', () => {
    const r = outcomes(3, ['master_key_filler', undefined, 'too_short'], undefined, 'graded');
    expect(r.rewards[0]).toBe(0);
    expect(r.rewards[2]).toBe(0);
    expect(r.rewards[1]).toBeGreaterThan(0.5);
    expect(r.ranking[0]).toBe(1);
  });

  it('an all-rejected group: every reward 0, none ranked above another by anything but index', () => {
    const r = outcomes(3, ['empty', 'empty', 'master_key_filler'], undefined, 'graded');
    expect(r.rewards).toEqual([0, 0, 0]);
    expect(r.ranking).toEqual([0, 1, 2]);
    expect(r.incomplete).toBeUndefined();
  });
});

describe('incomplete groups', () => {
  it('a candidate whose comparisons all failed: no reward for any real candidate, rejected ones keep 0', () => {
    const r = outcomes(4, [undefined, undefined, undefined, 'empty'], (i, j) =>
      i === 0 || j === 0 ? failed() : ok('a'),
    );
    expect(r.rewards).toEqual([null, null, null, 0]);
    expect(r.incomplete).toMatchObject({
      kind: 'failed',
      status: 'judge_error',
      code: 'RW_JUDGE_UNAVAILABLE',
    });
    expect(r.candidates.map((c) => c.rank)).toEqual([null, null, null, 4]);
  });

  it('two islands no successful comparison links: no reward (who is best is unknown)', () => {
    const islands = (i: number, j: number) => (i < 2 === j < 2 ? ok('a') : failed('RW_JUDGE_TIMEOUT'));
    const r = outcomes(4, [undefined, undefined, undefined, undefined], islands);
    expect(r.rewards).toEqual([null, null, null, null]);
    expect(r.incomplete).toMatchObject({ kind: 'failed', status: 'timeout' });
  });

  it('one failed pair in a connected group: the rewards stand', () => {
    const r = outcomes(4, [undefined, undefined, undefined, undefined], (i, j) =>
      i === 0 && j === 1 ? failed() : ok('a'),
    );
    expect(r.incomplete).toBeUndefined();
    expect(r.rewards.filter((x) => x === 1)).toHaveLength(1);
    expect(r.rewards.every((x) => x === 0 || x === 1)).toBe(true);
  });

  it('cut short by a cancel: cancelled, null, and no trainer adapter refuses or pays FAILURE_REWARD for it', () => {
    const r = outcomes(3, [undefined, undefined, undefined], (i) =>
      i === 0 ? failed('RW_CANCELLED') : ok('a'),
    );
    expect(r.incomplete).toEqual({ kind: 'cancelled' });
    const all = r.candidates.map((c) => c.outcome);
    expect(all.map((o) => trainerReward(o, 0.5))).toEqual([null, null, null]);
    expect(trainerFailure(all, undefined, 'rollouts')).toBeUndefined();
  });
});
