/**
 * Coverage of `/v1/rank`'s score intervals by simulation: true log-strengths θ_k ~ N(0, spread²) redrawn
 * every replication, each scheduled pair decided once (or `perPair` times) by Bradley–Terry, P(i beats j) =
 * σ(θ_i − θ_j), with ties at rate `ties`; a candidate's true score is its expected win rate against the other
 * candidates under θ. Swiss rounds are paired on the simulated standings, as the server pairs them.
 */
import { scoreIntervals, type Outcome } from '../../judge/bradley-terry.js';
import {
  allPairs,
  circularPairs,
  recordByes,
  swissPairings,
  swissRounds,
  type Pairing,
  type Schedule,
} from '../../judge/tournament.js';
import { createRng } from '../../math/sampling.js';
import { logistic, normal, type Rng } from './simulate.js';

export interface RankScenario {
  schedule: Schedule;
  g: number;
  /** Standard deviation of the true log-strengths (default 1). */
  spread?: number | undefined;
  /** Comparisons per scheduled pair (default 1). */
  perPair?: number | undefined;
  /** Probability that a comparison is a tie (default 0). */
  ties?: number | undefined;
}

export interface CoverageResult {
  /** Intervals printed (not null). */
  intervals: number;
  /** Share of printed intervals holding the truth. */
  coverage: number;
  /** Share of intervals that were null. */
  nullShare: number;
  meanWidth: number;
}

function play(rng: Rng, theta: readonly number[], p: Pairing, perPair: number, ties: number): Outcome[] {
  const out: Outcome[] = [];
  for (let k = 0; k < perPair; k++) {
    if (rng() < ties) out.push({ i: p.i, j: p.j, winner: 'tie' });
    else
      out.push({
        i: p.i,
        j: p.j,
        winner: rng() < logistic((theta[p.i] ?? 0) - (theta[p.j] ?? 0)) ? 'i' : 'j',
      });
  }
  return out;
}

function schedule(rng: Rng, s: RankScenario, theta: readonly number[]): Outcome[] {
  const perPair = s.perPair ?? 1;
  const ties = s.ties ?? 0;
  if (s.schedule !== 'swiss') {
    const pairs = s.schedule === 'all_pairs' ? allPairs(s.g) : circularPairs(s.g);
    return pairs.flatMap((p) => play(rng, theta, p, perPair, ties));
  }
  const outcomes: Outcome[] = [];
  const met = new Set<string>();
  const byes = new Set<number>();
  const points = new Array<number>(s.g).fill(0);
  for (let round = 1; round <= swissRounds(s.g); round++) {
    const pairs = swissPairings(s.g, points, met, byes);
    if (pairs.length === 0) break;
    recordByes(s.g, pairs, byes);
    for (const p of pairs) {
      met.add(`${p.i}:${p.j}`);
      for (const o of play(rng, theta, p, perPair, ties)) {
        outcomes.push(o);
        const at = o.winner === 'i' ? [o.i] : o.winner === 'j' ? [o.j] : [];
        for (const k of at) points[k] = (points[k] ?? 0) + 1;
        if (o.winner === 'tie') {
          points[o.i] = (points[o.i] ?? 0) + 0.5;
          points[o.j] = (points[o.j] ?? 0) + 0.5;
        }
      }
    }
  }
  return outcomes;
}

/** Coverage of the 95% score intervals over `replications` simulated tournaments. */
export function rankCoverage(
  s: RankScenario,
  replications: number,
  seed: number,
  draws?: number,
): CoverageResult {
  const rng = createRng(seed);
  let intervals = 0;
  let covered = 0;
  let nulls = 0;
  let width = 0;
  for (let r = 0; r < replications; r++) {
    const theta = Array.from({ length: s.g }, () => (s.spread ?? 1) * normal(rng));
    const truth = theta.map((ti, i) => {
      let sum = 0;
      theta.forEach((tj, j) => {
        if (j !== i) sum += logistic(ti - tj);
      });
      return sum / (s.g - 1);
    });
    const cis = scoreIntervals(s.g, schedule(rng, s, theta), { seed: r + 1, draws });
    cis.forEach((ci, i) => {
      if (ci === null) {
        nulls++;
        return;
      }
      intervals++;
      width += ci[1] - ci[0];
      const t = truth[i] ?? 0;
      if (ci[0] <= t && t <= ci[1]) covered++;
    });
  }
  const all = intervals + nulls;
  return {
    intervals,
    coverage: intervals === 0 ? 0 : covered / intervals,
    nullShare: all === 0 ? 0 : nulls / all,
    meanWidth: intervals === 0 ? 0 : width / intervals,
  };
}
