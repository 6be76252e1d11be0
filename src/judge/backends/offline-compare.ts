/**
 * The offline backend's answers for the comparative roles (comparison, pick, rating): deterministic, from the
 * same term-overlap library as the other offline roles. Not a judge: it exists so the comparative flow runs
 * end to end with no LLM.
 *
 * Each idea gets a criterion value in [0, 1]:
 * - `match`, `effectiveness`: cosine (sublinear-tf, stemmed content words) to the ground truth, or to the
 *   question when none is given;
 * - `feasibility`: cosine to the question (an idea that stays on the question's terms);
 * - `novelty`: the share of the idea's distinct content terms found neither in the question nor in the ground
 *   truth.
 * A pair's winner is the higher value; |difference| < 0.02 is a tie (`toss-up`), ≥ 0.10 `clear`, else
 * `slight`; confidence = logistic(15·|difference|). It looks only at values, never at positions, so it has
 * no position bias. A rating is 1 + ⌊5·value⌋ capped at 5; a pick is the highest value (first on ties).
 */
import { cosine, marginConfidence, round4, termSet, termVector } from '../../text/similarity.js';
import type { ComparativeContext, PairContext, PickContext, RatingContext } from '../../roles/types.js';

/** Below this difference of criterion values two ideas are a tie. */
export const OFFLINE_TIE_BAND = 0.02;
/** From this difference on, a win is `clear`. */
export const OFFLINE_CLEAR_MARGIN = 0.1;

type Base = Pick<ComparativeContext, 'question' | 'groundTruth' | 'criterion'>;

/** The offline criterion value of one idea, in [0, 1]. */
export function offlineCriterionValue(ctx: Base, idea: string): number {
  switch (ctx.criterion) {
    case 'match':
    case 'effectiveness':
      return round4(cosine(termVector(idea), termVector(ctx.groundTruth ?? ctx.question)));
    case 'feasibility':
      return round4(cosine(termVector(idea), termVector(ctx.question)));
    case 'novelty': {
      const terms = termSet(idea);
      if (terms.size === 0) return 0;
      const known = termSet(`${ctx.question}\n${ctx.groundTruth ?? ''}`);
      let fresh = 0;
      for (const t of terms) if (!known.has(t)) fresh += 1;
      return round4(fresh / terms.size);
    }
  }
}

function pairAnswer(ctx: PairContext): Record<string, unknown> {
  const a = offlineCriterionValue(ctx, ctx.a);
  const b = offlineCriterionValue(ctx, ctx.b);
  const d = a - b;
  const tie = Math.abs(d) < OFFLINE_TIE_BAND;
  return {
    reasoning:
      `Offline heuristic (not an LLM): ${ctx.criterion} value ${a.toFixed(4)} (A) vs ${b.toFixed(4)} (B)` +
      (tie ? ' → tie.' : ` → ${d > 0 ? 'A' : 'B'}.`),
    winner: tie ? 'tie' : d > 0 ? 'A' : 'B',
    margin: tie ? 'toss-up' : Math.abs(d) >= OFFLINE_CLEAR_MARGIN ? 'clear' : 'slight',
    confidence: round4(marginConfidence(d)),
  };
}

function pickAnswer(ctx: PickContext): Record<string, unknown> {
  const values = ctx.candidates.map((idea) => offlineCriterionValue(ctx, idea));
  let best = 0;
  for (let i = 1; i < values.length; i++) if ((values[i] ?? 0) > (values[best] ?? 0)) best = i;
  const runnerUp = Math.max(0, ...values.filter((_, i) => i !== best));
  return {
    reasoning: `Offline heuristic (not an LLM): ${ctx.criterion} values ${values.map((v) => v.toFixed(4)).join(', ')}.`,
    best: best + 1,
    confidence: round4(marginConfidence((values[best] ?? 0) - runnerUp)),
  };
}

function ratingAnswer(ctx: RatingContext): Record<string, unknown> {
  const value = offlineCriterionValue(ctx, ctx.idea);
  return {
    reasoning: `Offline heuristic (not an LLM): ${ctx.criterion} value ${value.toFixed(4)}.`,
    score: Math.min(5, 1 + Math.floor(5 * value)),
  };
}

/** The offline answer of a comparative role, as a plain object in schema field order. */
export function offlineComparativeAnswer(ctx: ComparativeContext): Record<string, unknown> {
  switch (ctx.kind) {
    case 'pair':
      return pairAnswer(ctx);
    case 'pick':
      return pickAnswer(ctx);
    case 'rating':
      return ratingAnswer(ctx);
  }
}
