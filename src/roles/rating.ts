import { z } from 'zod';

import { REASONING_FIELD, strictJsonSchema } from './common.js';
import { comparativeSystem, comparativeUser, perCriterion } from './criteria.js';
import type { ComparativeRole, Criterion, RatingContext } from './types.js';

/** Absolute rating: one idea, an integer score 1–5 on one criterion (the paper's absolute protocol). */
export const RatingOutput = z.object({
  reasoning: z.string(),
  score: z.number().int().min(1).max(5),
});
export type RatingOutput = z.infer<typeof RatingOutput>;

const SCALE = [
  'Scale: 1 = very poor, 2 = weak, 3 = adequate, 4 = strong, 5 = excellent. Use the whole scale; 3 is an',
  'ordinary, competent idea.',
].join('\n');

function ratingSystem(criterion: Criterion): string {
  return comparativeSystem(
    [
      'You are an expert reviewer rating one candidate research idea for a research question.',
      `Analyse it against the criterion below, then give an integer score from 1 to 5.\n${SCALE}`,
    ].join('\n'),
    criterion,
    [REASONING_FIELD, 'score (integer from 1 to 5): your rating of the idea on the criterion'],
  );
}

export const RATING_SYSTEM = perCriterion(ratingSystem);

export const rating = {
  name: 'rating',
  kind: 'rating',
  output: RatingOutput,
  jsonSchema: strictJsonSchema(RatingOutput),
  render: (ctx: RatingContext) => ({
    system: RATING_SYSTEM[ctx.criterion],
    user: comparativeUser(
      ctx,
      `rate the candidate on ${ctx.criterion === 'match' ? 'closeness to the ground truth' : ctx.criterion} from 1 to 5.`,
      [{ label: 'idea', idea: ctx.idea }],
    ),
  }),
} satisfies ComparativeRole<typeof RatingOutput, RatingContext>;
