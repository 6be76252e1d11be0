import { z } from 'zod';

import { Confidence, REASONING_FIELD, strictJsonSchema } from './common.js';
import { comparativeSystem, comparativeUser, perCriterion } from './criteria.js';
import type { ComparativeRole, PairContext, PickContext } from './types.js';

/**
 * Pairwise comparison: which of two candidates is better on a criterion (against the ground truth for
 * `match`). The engine asks every pair in both orders; only `winner` is read (margin and confidence are
 * reported, never used to decide).
 */
export const ComparisonOutput = z.object({
  reasoning: z.string(),
  winner: z.enum(['A', 'B', 'tie']),
  margin: z.enum(['clear', 'slight', 'toss-up']),
  confidence: Confidence,
});
export type ComparisonOutput = z.infer<typeof ComparisonOutput>;

const COMPARISON_FIELDS = [
  REASONING_FIELD,
  'winner ("A", "B" or "tie"): the better candidate on the criterion; "tie" only if you cannot separate them',
  'margin ("clear", "slight" or "toss-up"): how far apart they are',
  'confidence (number from 0 to 1): your probability that your winner is right',
];

/** System prompt per criterion (static: the first part of every comparison prompt). */
export const COMPARISON_SYSTEM = perCriterion((criterion) =>
  comparativeSystem(
    [
      'You are an expert reviewer comparing two candidate research ideas for the same research question.',
      'Analyse both against the criterion below, compare them, then name the better one. The order in which',
      'the candidates are shown carries no information: do not prefer the first or the second.',
    ].join('\n'),
    criterion,
    COMPARISON_FIELDS,
  ),
);

const COMPARISON_TASK = perCriterion((criterion) =>
  criterion === 'match'
    ? "decide which candidate's core method is closer to the ground truth's core method (A or B), or tie."
    : `decide which candidate is better on ${criterion} (A or B), or tie.`,
);

export const comparison = {
  name: 'comparison',
  kind: 'pair',
  output: ComparisonOutput,
  jsonSchema: strictJsonSchema(ComparisonOutput),
  render: (ctx: PairContext) => ({
    system: COMPARISON_SYSTEM[ctx.criterion],
    user: comparativeUser(ctx, COMPARISON_TASK[ctx.criterion], [
      { label: 'A', idea: ctx.a },
      { label: 'B', idea: ctx.b },
    ]),
  }),
} satisfies ComparativeRole<typeof ComparisonOutput, PairContext>;

/**
 * Best-of-N in one call (the paper's "pick the most novel idea" protocol with criterion `novelty`): all N
 * candidates in one prompt, numbered from 1; `best` must be one of them (checked by the engine).
 */
export const PickOutput = z.object({
  reasoning: z.string(),
  best: z.number().int().min(1),
  confidence: Confidence,
});
export type PickOutput = z.infer<typeof PickOutput>;

export const PICK_SYSTEM = perCriterion((criterion) =>
  comparativeSystem(
    [
      'You are an expert reviewer choosing the best of several candidate research ideas for the same research',
      'question. Analyse each against the criterion below, compare them, then name the single best one by its',
      'number. The order in which the candidates are shown carries no information.',
    ].join('\n'),
    criterion,
    [
      REASONING_FIELD,
      'best (integer): the number of the best candidate on the criterion',
      'confidence (number from 0 to 1): your probability that it is the best',
    ],
  ),
);

export const pick = {
  name: 'pick',
  kind: 'pick',
  output: PickOutput,
  jsonSchema: strictJsonSchema(PickOutput),
  render: (ctx: PickContext) => ({
    system: PICK_SYSTEM[ctx.criterion],
    user: comparativeUser(
      ctx,
      ctx.criterion === 'match'
        ? "name the candidate whose core method is closest to the ground truth's core method."
        : `name the candidate that is best on ${ctx.criterion}.`,
      ctx.candidates.map((idea, i) => ({ label: String(i + 1), idea })),
    ),
  }),
} satisfies ComparativeRole<typeof PickOutput, PickContext>;
