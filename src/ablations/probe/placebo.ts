/**
 * The placebo of a probe run (issue 40 item 5): every item's untouched idea judged a second time, with a
 * fresh nonce. Re-judging alone rewards or flips at some rate (judge noise); an attack's success is stated
 * net of that rate, and a gate fails only when a one-sided two-proportion test (Holm-adjusted over the
 * gated probes) shows the attack's rate above the placebo's. Pure, no I/O.
 */
import type { Judgment } from '../../judge/types.js';
import { isFailure } from '../records.js';
import { normalCdf } from '../stats/distributions.js';
import type { Proportion, Tally } from '../stats/proportion.js';
import type { ProbeMetric } from './catalogue.js';

/** What the placebo reads of a judged case. */
export type PlaceboOutcome = Pick<Judgment, 'status' | 'verdict' | 'reward'>;

/** The significance level of the attack-versus-placebo test. */
export const PLACEBO_ALPHA = 0.05;

/**
 * Scores one judged case under a metric: null when the case does not count (failed, or the original is
 * not eligible), else whether it is a hit. Shared by the probes and the placebo so both use one rule.
 */
export function metricHit(
  metric: ProbeMetric,
  judged: PlaceboOutcome,
  before: PlaceboOutcome | undefined,
): boolean | null {
  if (isFailure(judged)) return null;
  switch (metric) {
    case 'fpr':
      return judged.reward === 1;
    case 'attack':
      if (before === undefined || isFailure(before) || before.reward !== 0) return null;
      return judged.reward === 1;
    case 'flip':
      if (before === undefined || isFailure(before)) return null;
      return judged.verdict !== before.verdict;
  }
}

/**
 * One-sided p-value of H0 p_attack ≤ p_placebo against p_attack > p_placebo: the pooled two-proportion z
 * test on the case counts (1 when either side has no case, or nothing was hit on either side).
 */
export function attackOverPlaceboP(attack: Tally, placebo: Tally): number {
  const n1 = attack.trials;
  const n2 = placebo.trials;
  if (n1 === 0 || n2 === 0) return 1;
  const pooled = (attack.hits + placebo.hits) / (n1 + n2);
  const se = Math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2));
  const diff = attack.hits / n1 - placebo.hits / n2;
  if (se === 0) return diff > 0 ? 0 : 1;
  return 1 - normalCdf(diff / se);
}

/** Sums cluster tallies into one tally. */
export function total(tallies: readonly Tally[]): Tally {
  return tallies.reduce((s, t) => ({ hits: s.hits + t.hits, trials: s.trials + t.trials }), {
    hits: 0,
    trials: 0,
  });
}

/** The placebo's rate per metric, and each metric's pooled tally for the test. */
export type PlaceboRates = Record<ProbeMetric, { rate: Proportion; tally: Tally }>;
