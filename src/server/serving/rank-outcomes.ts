/**
 * What became of each candidate of a ranked group (`outcomes.ts` maps it to a reward), and the order they
 * are ranked in. The rules:
 *
 * - **A rejected candidate** (not an idea: src/judge/candidate.ts, decided once by the comparison service's
 *   preparation) is `rejected`: a real 0 in both reward modes, score 0, ranked after every real candidate,
 *   never best. Its comparisons (lost to any real idea, tied with another rejected one, no LLM call) still
 *   count in the real candidates' Bradley–Terry fit: beating a filler is a real outcome.
 * - **An incomplete group** is no reward: when the successful comparisons among the real candidates do not
 *   connect all of them (a candidate whose comparisons all failed, or two islands no comparison links), the
 *   standings cannot say who is better than whom, so every real candidate is `failed` (`cancelled` when a
 *   cancel cut the comparisons short); rejected candidates keep their 0. Without this, the judge failing on
 *   A would pay B for A's absence. A connected group with some failed pairs stands: Bradley–Terry scores
 *   are identified by a connected comparison graph (the circular and Swiss schedules are such incomplete
 *   designs themselves), and the failed pairs are reported per pair and per candidate (`failed`).
 * - **Otherwise** a real candidate is `judged`: graded → its score; top_k → 1 for the k best real
 *   candidates, else 0.
 */
import type { PairJudgment } from '../../judge/compare.js';
import type { PairResult, PlayedPair, RewardMode, Standings } from '../../judge/tournament.js';
import type { Outcome } from './outcomes.js';

/** One candidate of a ranked group as the routes answer it. */
export interface CandidateResult {
  index: number;
  outcome: Outcome;
  /** The outcome's score: the Bradley–Terry score of a judged candidate, 0 rejected, null failed. */
  score: number | null;
  ci: [number, number] | null;
  /** 1-based position in `ranking`; null for a candidate without a reward (failed, cancelled). */
  rank: number | null;
  wins: number;
  losses: number;
  ties: number;
  failed: number;
}

export interface RankedOutcomes {
  candidates: CandidateResult[];
  /** Judged candidates best first (score, then wins, then index), then the failed ones, then rejected. */
  ranking: number[];
  /** Why the real candidates have no reward; undefined for a complete group. */
  incomplete?: Extract<Outcome, { kind: 'failed' | 'cancelled' }> | undefined;
}

/** The pair outcome a ranking reads: its preference, and the failure's status and code when it failed. */
interface PairView extends PairResult {
  judgment: Pick<PairJudgment, 'status' | 'error'>;
}

const UNSCORED: Outcome = {
  kind: 'failed',
  status: 'judge_error',
  code: 'RW_INTERNAL',
  message: 'internal error',
};

/** True when the successful comparisons among `real` candidates connect all of them (union–find). */
function connected(real: readonly number[], played: ReadonlyArray<PlayedPair<PairView>>, isReal: boolean[]) {
  const parent = new Map(real.map((k) => [k, k]));
  const find = (k: number): number => {
    let root = k;
    for (let p = parent.get(root); p !== undefined && p !== root; p = parent.get(root)) root = p;
    parent.set(k, root);
    return root;
  };
  let sets = real.length;
  for (const p of played) {
    if (p.result.preference === null || isReal[p.i] !== true || isReal[p.j] !== true) continue;
    const a = find(p.i);
    const b = find(p.j);
    if (a === b) continue;
    parent.set(a, b);
    sets -= 1;
  }
  return sets <= 1;
}

/** Why an incomplete group failed: cancelled when a cancel cut one of its real candidates' pairs. */
function incompleteOutcome(
  played: ReadonlyArray<PlayedPair<PairView>>,
  isReal: boolean[],
): NonNullable<RankedOutcomes['incomplete']> {
  const failedPairs = played.filter(
    (p) => p.result.preference === null && (isReal[p.i] === true || isReal[p.j] === true),
  );
  if (failedPairs.some((p) => p.result.judgment.error?.code === 'RW_CANCELLED')) return { kind: 'cancelled' };
  const first = failedPairs[0]?.result.judgment;
  const allTimeouts =
    failedPairs.length > 0 && failedPairs.every((p) => p.result.judgment.status === 'timeout');
  return {
    kind: 'failed',
    status: allTimeouts ? 'timeout' : 'judge_error',
    code: first?.error?.code,
    message:
      'the comparisons among the real candidates are incomplete (no successful comparison connects ' +
      `every one of them)${first?.error === undefined ? '' : `: ${first.error.message}`}`,
  };
}

/**
 * The outcome, score and rank of every candidate of a group from its standings, the pairs it played and
 * the candidates its preparation rejected (reason per candidate, undefined for a real one).
 */
export function rankOutcomes(
  standings: Standings,
  played: ReadonlyArray<PlayedPair<PairView>>,
  rejections: ReadonlyArray<string | undefined>,
  mode: RewardMode,
  topK: number,
): RankedOutcomes {
  const g = standings.candidates.length;
  const isReal = Array.from({ length: g }, (_, k) => rejections[k] === undefined);
  const real = standings.ranking.filter((k) => isReal[k] === true);
  const everyScored = real.every((k) => standings.candidates[k]?.score != null);
  const incomplete =
    everyScored && connected(real, played, isReal) ? undefined : incompleteOutcome(played, isReal);
  const rejected = Array.from({ length: g }, (_, k) => k).filter((k) => isReal[k] !== true);
  // `standings.ranking` orders real candidates by score, wins and index (unscored last); rejected go last.
  const ranking = [...real, ...rejected];
  const position = new Map(ranking.map((k, pos) => [k, pos]));
  const candidates = standings.candidates.map((s): CandidateResult => {
    const reason = rejections[s.index];
    const pos = position.get(s.index) ?? g - 1;
    const counts = { index: s.index, wins: s.wins, losses: s.losses, ties: s.ties, failed: s.failed };
    if (reason !== undefined) {
      return { ...counts, outcome: { kind: 'rejected', reason }, score: 0, ci: null, rank: pos + 1 };
    }
    const score = s.score;
    // A complete group has every real candidate scored; a hole would be a bug, answered as a failure.
    if (incomplete !== undefined || score === null) {
      return { ...counts, outcome: incomplete ?? UNSCORED, score: null, ci: null, rank: null };
    }
    const reward = mode === 'graded' ? score : pos < topK ? 1 : 0;
    return {
      ...counts,
      outcome: { kind: 'judged', reward, score },
      score,
      ci: s.ci,
      rank: pos + 1,
    };
  });
  return { candidates, ranking, incomplete };
}
