/**
 * Condorcet predictions: what a committee of calibrated members will do under a vote rule.
 * - `independent`: members err independently given the label (the jury theorem's assumption).
 * - `joint`: the measured joint distribution of the members' votes on the same items (captures every
 *   correlation, but only for members measured together on one dataset).
 * - `beta_binomial`: n exchangeable members with the mean per-class error rate and the mean per-class pairwise
 *   error correlation ρ (errors ~ BetaBinomial(n, p, ρ)); any size, from two numbers per class.
 * Pure functions.
 */

export type VoteRule = 'majority' | 'unanimous' | 'confidence_weighted';
export const VOTE_RULES: readonly VoteRule[] = ['majority', 'unanimous', 'confidence_weighted'];

export interface Voter {
  /** P(match | positive) and P(no_match | negative). */
  tpr: number;
  tnr: number;
  /** Track-record weight (graph `weight`, default 1). */
  weight?: number | undefined;
  /** Mean confidence when saying match / no_match (confidence_weighted; default 1). */
  confidence?: { match: number | null; no_match: number | null } | undefined;
}

export interface Prediction {
  tpr: number;
  tnr: number;
  /** At the given prevalence of positives. */
  accuracy: number;
  precision: number | null;
  recall: number;
  f1: number | null;
  prevalence: number;
}

/** The committee's verdict (true = match) under the engine's rules (src/judge/decision.ts): ties → no_match. */
export function ruleSaysMatch(
  rule: VoteRule,
  votes: readonly (0 | 1)[],
  confidences: readonly number[],
  weights: readonly number[],
): boolean {
  const matches = votes.reduce<number>((s, v) => s + v, 0);
  switch (rule) {
    case 'majority':
      return matches * 2 > votes.length;
    case 'unanimous':
      return matches === votes.length;
    case 'confidence_weighted': {
      let total = 0;
      let sum = 0;
      votes.forEach((v, i) => {
        const c = confidences[i] ?? 1;
        const w = c * (weights[i] ?? 1);
        total += w;
        sum += w * (v === 1 ? c : 1 - c);
      });
      const score = total > 0 ? sum / total : matches / votes.length;
      return score > 0.5;
    }
    default: {
      const exhaustive: never = rule;
      return exhaustive;
    }
  }
}

/** Turns per-class rates into the committee's precision/recall/accuracy at a prevalence. */
export function toPrediction(tpr: number, tnr: number, prevalence: number): Prediction {
  const tp = prevalence * tpr;
  const fp = (1 - prevalence) * (1 - tnr);
  const precision = tp + fp === 0 ? null : tp / (tp + fp);
  const f1 = precision === null || precision + tpr === 0 ? null : (2 * precision * tpr) / (precision + tpr);
  return { tpr, tnr, accuracy: tp + (1 - prevalence) * tnr, precision, recall: tpr, f1, prevalence };
}

/** Largest committee the enumeration accepts (2^n vote patterns). */
export const MAX_ENUMERATED_VOTERS = 16;

/** Independence prediction by enumerating every vote pattern (exact for any rule, n ≤ 16). */
export function independentPrediction(
  rule: VoteRule,
  voters: readonly Voter[],
  prevalence: number,
): Prediction {
  const n = voters.length;
  if (n === 0 || n > MAX_ENUMERATED_VOTERS) throw new RangeError(`committee size ${n} outside 1..16`);
  const weights = voters.map((v) => v.weight ?? 1);
  let matchGivenPos = 0;
  let matchGivenNeg = 0;
  const votes: (0 | 1)[] = new Array<0 | 1>(n).fill(0);
  const conf: number[] = new Array<number>(n).fill(1);
  for (let pattern = 0; pattern < 1 << n; pattern++) {
    let pPos = 1;
    let pNeg = 1;
    for (let i = 0; i < n; i++) {
      const v = voters[i];
      if (v === undefined) continue;
      const says = (pattern >> i) & 1;
      votes[i] = says === 1 ? 1 : 0;
      conf[i] = (says === 1 ? v.confidence?.match : v.confidence?.no_match) ?? 1;
      pPos *= says === 1 ? v.tpr : 1 - v.tpr;
      pNeg *= says === 1 ? 1 - v.tnr : v.tnr;
    }
    if (ruleSaysMatch(rule, votes, conf, weights)) {
      matchGivenPos += pPos;
      matchGivenNeg += pNeg;
    }
  }
  return toPrediction(matchGivenPos, 1 - matchGivenNeg, prevalence);
}

/** One item as the members voted on it (every member gave a stance). */
export interface VotedItem {
  label: 0 | 1;
  votes: readonly (0 | 1)[];
  confidences: readonly number[];
}

/** Prediction from the measured joint distribution of votes; null when a class has no item. */
export function jointPrediction(
  rule: VoteRule,
  items: readonly VotedItem[],
  weights: readonly number[],
  prevalence: number,
): Prediction | null {
  let pos = 0;
  let neg = 0;
  let tp = 0;
  let tn = 0;
  for (const item of items) {
    const match = ruleSaysMatch(rule, item.votes, item.confidences, weights);
    if (item.label === 1) {
      pos++;
      if (match) tp++;
    } else {
      neg++;
      if (!match) tn++;
    }
  }
  if (pos === 0 || neg === 0) return null;
  return toPrediction(tp / pos, tn / neg, prevalence);
}

function logBeta(a: number, b: number): number {
  return logGammaPositive(a) + logGammaPositive(b) - logGammaPositive(a + b);
}

function logGammaPositive(x: number): number {
  // Stirling series after shifting x above 7; exact enough (1e-12) for pmf sums.
  let shift = 0;
  let y = x;
  while (y < 7) {
    shift -= Math.log(y);
    y += 1;
  }
  const inv = 1 / y;
  const inv2 = inv * inv;
  const series = inv * (1 / 12 - inv2 * (1 / 360 - inv2 * (1 / 1260 - inv2 / 1680)));
  return shift + (y - 0.5) * Math.log(y) - y + 0.5 * Math.log(2 * Math.PI) + series;
}

/**
 * P(K = k), k = 0..n, for K ~ BetaBinomial with mean p and intra-class correlation ρ (α + β = 1/ρ − 1).
 * ρ ≤ 0 is the binomial (a beta-binomial cannot express negative correlation); ρ ≥ 1 puts all mass on 0 and n.
 */
export function betaBinomialPmf(n: number, p: number, rho: number): number[] {
  const out = new Array<number>(n + 1).fill(0);
  if (p <= 0 || p >= 1 || rho >= 1) {
    const q = Math.min(1, Math.max(0, p));
    out[0] = 1 - q;
    out[n] = (out[n] ?? 0) + q;
    return out;
  }
  let logChoose = 0;
  for (let k = 0; k <= n; k++) {
    if (k > 0) logChoose += Math.log((n - k + 1) / k);
    out[k] =
      rho <= 0
        ? Math.exp(logChoose + k * Math.log(p) + (n - k) * Math.log(1 - p))
        : Math.exp(
            logChoose +
              logBeta(k + p * (1 / rho - 1), n - k + (1 - p) * (1 / rho - 1)) -
              logBeta(p * (1 / rho - 1), (1 - p) * (1 / rho - 1)),
          );
  }
  return out;
}

export interface ExchangeableClass {
  /** Mean member error rate on the class (FNR on positives, FPR on negatives) and mean pairwise error φ. */
  error: number;
  rho: number;
}

/**
 * Beta-binomial prediction for n exchangeable members. Equal weights and confidences make
 * `confidence_weighted` the majority rule (score = vote share, match iff > 0.5).
 */
export function betaBinomialPrediction(
  rule: VoteRule,
  n: number,
  positives: ExchangeableClass,
  negatives: ExchangeableClass,
  prevalence: number,
): Prediction {
  const pos = betaBinomialPmf(n, positives.error, positives.rho);
  const neg = betaBinomialPmf(n, negatives.error, negatives.rho);
  let tpr = 0;
  let tnr = 0;
  for (let errors = 0; errors <= n; errors++) {
    // On a positive the errors are no_match votes; on a negative they are match votes.
    const posMatch = rule === 'unanimous' ? errors === 0 : (n - errors) * 2 > n;
    const negMatch = rule === 'unanimous' ? errors === n : errors * 2 > n;
    if (posMatch) tpr += pos[errors] ?? 0;
    if (!negMatch) tnr += neg[errors] ?? 0;
  }
  return toPrediction(Math.min(1, tpr), Math.min(1, tnr), prevalence);
}
