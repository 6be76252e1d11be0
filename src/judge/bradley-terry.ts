/**
 * Scores from pairwise outcomes: a Bradley–Terry fit (minorise–maximise, Hunter 2004) with a small prior,
 * Elo as a documented alternative, and a percentile bootstrap over the outcomes. Pure, deterministic for a
 * given seed, no I/O.
 *
 * Model: P(i beats j) = p_i / (p_i + p_j). A tie counts as half a win for each side. The prior is `prior`
 * virtual games (half won, half lost) of every rated candidate against a fixed anchor of strength 1, so the
 * fit exists under perfect separation (a candidate that won everything) and for comparison graphs that are
 * not connected. A candidate's **score** is its expected win rate against the other rated candidates of the
 * group, mean over j ≠ i of p_i / (p_i + p_j): in [0, 1], 0.5 for everyone when nobody can be separated.
 * A candidate without any outcome is not rated: its score is null (never 0).
 */

/** One decided comparison between candidates i and j (0-based). */
export interface Outcome {
  i: number;
  j: number;
  winner: 'i' | 'j' | 'tie';
}

export interface FitOptions {
  /** Virtual games against the anchor per rated candidate (default 1). */
  prior?: number | undefined;
  /** MM iterations at most (default 10 000). */
  maxIterations?: number | undefined;
  /** Stop when no strength changes by more than this factor (default 1e-10). */
  tolerance?: number | undefined;
}

export const DEFAULT_PRIOR_GAMES = 1;

export interface Fit {
  /** Strength per candidate relative to the anchor (1); null when not rated. */
  strengths: Array<number | null>;
  iterations: number;
}

function ratedSet(n: number, outcomes: readonly Outcome[]): boolean[] {
  const rated = new Array<boolean>(n).fill(false);
  for (const o of outcomes) {
    rated[o.i] = true;
    rated[o.j] = true;
  }
  return rated;
}

/** Bradley–Terry strengths by MM iterations with the anchor prior. */
export function fitBradleyTerry(n: number, outcomes: readonly Outcome[], options: FitOptions = {}): Fit {
  const prior = options.prior ?? DEFAULT_PRIOR_GAMES;
  const maxIterations = options.maxIterations ?? 10_000;
  const tolerance = options.tolerance ?? 1e-10;
  const rated = ratedSet(n, outcomes);
  const wins = new Float64Array(n);
  const add = (array: Float64Array, k: number, x: number): void => {
    array[k] = (array[k] ?? 0) + x;
  };
  for (const o of outcomes) {
    if (o.winner === 'i') add(wins, o.i, 1);
    else if (o.winner === 'j') add(wins, o.j, 1);
    else {
      add(wins, o.i, 0.5);
      add(wins, o.j, 0.5);
    }
  }
  for (let k = 0; k < n; k++) if (rated[k] === true) add(wins, k, prior / 2);
  let p = new Float64Array(n).fill(1);
  let iterations = 0;
  for (; iterations < maxIterations; iterations++) {
    const denominators = new Float64Array(n);
    for (const o of outcomes) {
      const d = 1 / ((p[o.i] ?? 1) + (p[o.j] ?? 1));
      add(denominators, o.i, d);
      add(denominators, o.j, d);
    }
    const next = new Float64Array(n).fill(1);
    let change = 0;
    for (let k = 0; k < n; k++) {
      if (rated[k] !== true) continue;
      const pk = p[k] ?? 1;
      const denominator = (denominators[k] ?? 0) + prior / (pk + 1);
      // With prior 0 a candidate that never won has strength 0; keep it positive so ratios stay defined.
      const value = Math.max(1e-12, (wins[k] ?? 0) / denominator);
      next[k] = value;
      change = Math.max(change, Math.abs(Math.log(value / pk)));
    }
    p = next;
    if (change < tolerance) break;
  }
  return { strengths: Array.from(p, (v, k) => (rated[k] === true ? v : null)), iterations };
}

/** Elo options: K factor and initial rating (defaults 32 and 1000). */
export interface EloOptions {
  k?: number | undefined;
  initial?: number | undefined;
}

/**
 * Elo ratings updated through the outcomes in their order (order-dependent, unlike Bradley–Terry), turned into
 * strengths 10^(R/400) relative to the initial rating, so scores are computed as for Bradley–Terry.
 */
export function fitElo(n: number, outcomes: readonly Outcome[], options: EloOptions = {}): Fit {
  const k = options.k ?? 32;
  const initial = options.initial ?? 1000;
  const rated = ratedSet(n, outcomes);
  const r = new Float64Array(n).fill(initial);
  for (const o of outcomes) {
    const ri = r[o.i] ?? initial;
    const rj = r[o.j] ?? initial;
    const expected = 1 / (1 + 10 ** ((rj - ri) / 400));
    const actual = o.winner === 'i' ? 1 : o.winner === 'j' ? 0 : 0.5;
    r[o.i] = ri + k * (actual - expected);
    r[o.j] = rj - k * (actual - expected);
  }
  return {
    strengths: Array.from(r, (v, i) => (rated[i] === true ? 10 ** ((v - initial) / 400) : null)),
    iterations: outcomes.length,
  };
}

/** Expected win rate of each rated candidate against the other rated ones; null when not rated. */
export function expectedWinRates(strengths: ReadonlyArray<number | null>): Array<number | null> {
  return strengths.map((pi, i) => {
    if (pi === null) return null;
    let sum = 0;
    let count = 0;
    strengths.forEach((pj, j) => {
      if (j === i || pj === null) return;
      sum += pi / (pi + pj);
      count += 1;
    });
    return count === 0 ? 0.5 : sum / count;
  });
}

export type ScoreMethod = 'bradley_terry' | 'elo';

/** Scores in [0, 1] (null = not rated) by the chosen method. */
export function scoreOutcomes(
  n: number,
  outcomes: readonly Outcome[],
  method: ScoreMethod = 'bradley_terry',
): Array<number | null> {
  const fit = method === 'elo' ? fitElo(n, outcomes) : fitBradleyTerry(n, outcomes);
  return expectedWinRates(fit.strengths);
}

/** Deterministic PRNG (mulberry32), floats in [0, 1). */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Linear-interpolation quantile (R type 7) of an ascending array. */
function quantile(sorted: readonly number[], q: number): number {
  const position = (sorted.length - 1) * q;
  const below = Math.floor(position);
  const lo = sorted[below] ?? Number.NaN;
  const hi = sorted[Math.ceil(position)] ?? lo;
  return lo + (hi - lo) * (position - below);
}

export interface BootstrapOptions {
  /** Default 200. */
  resamples?: number | undefined;
  /** Default 1: the same outcomes always give the same intervals. */
  seed?: number | undefined;
  /** Default 0.95. */
  level?: number | undefined;
  method?: ScoreMethod | undefined;
}

export const DEFAULT_SCORE_RESAMPLES = 200;

/**
 * Percentile bootstrap of the scores: resample the outcomes with replacement, refit, take the quantiles. A
 * resample in which a candidate does not appear is skipped for it. Null for unrated candidates.
 */
export function bootstrapScores(
  n: number,
  outcomes: readonly Outcome[],
  options: BootstrapOptions = {},
): Array<[number, number] | null> {
  const resamples = options.resamples ?? DEFAULT_SCORE_RESAMPLES;
  const level = options.level ?? 0.95;
  const rng = seededRandom(options.seed ?? 1);
  const draws: number[][] = Array.from({ length: n }, () => []);
  const sample: Outcome[] = new Array<Outcome>(outcomes.length);
  for (let r = 0; r < resamples && outcomes.length > 0; r++) {
    for (let k = 0; k < outcomes.length; k++) {
      const o = outcomes[Math.floor(rng() * outcomes.length)];
      if (o !== undefined) sample[k] = o;
    }
    scoreOutcomes(n, sample, options.method).forEach((s, i) => {
      if (s !== null) draws[i]?.push(s);
    });
  }
  const rated = ratedSet(n, outcomes);
  return draws.map((values, i) => {
    if (rated[i] !== true || values.length === 0) return null;
    const sorted = values.sort((a, b) => a - b);
    return [quantile(sorted, (1 - level) / 2), quantile(sorted, 1 - (1 - level) / 2)];
  });
}
