import { z } from 'zod';
import {
  clip,
  Confidence,
  CONFIDENCE_FIELD,
  REASONING_FIELD,
  Stance,
  STANCE_FIELD,
  strictJsonSchema,
  systemPrompt,
} from './common.js';
import { fenceSections } from './fence.js';
import type { Focus, Role } from './types.js';

/** A focused reviewer (round-robin review): one stance from one angle. */
export const ReviewerOutput = z.object({
  reasoning: z.string(),
  stance: Stance,
  confidence: Confidence,
});
export type ReviewerOutput = z.infer<typeof ReviewerOutput>;

const FOCUS_TEXT: Readonly<Record<Focus, string>> = {
  methodology: [
    'Your focus is methodology: the algorithmic or experimental mechanism, its components, how they are',
    'combined and what each is used for. Compare the two methods at that level.',
  ].join('\n'),
  statistics: [
    'Your focus is the statistical and modelling core: the objective or loss, the estimator, the probabilistic',
    'or physical model, the inference or optimisation procedure, and the assumptions they rest on. Not the',
    'metrics or the data used to evaluate it: those stay out of scope.',
  ].join('\n'),
  novelty: [
    'Your focus is novelty: what the ground truth adds beyond standard practice in its field. A match needs',
    'the candidate to propose that same new element, not only the standard parts the two share.',
  ].join('\n'),
};

export const REVIEWER_FOCI: readonly Focus[] = ['methodology', 'statistics', 'novelty'];

/** System prompt per focus (a reviewer node without a focus reviews methodology). */
export const REVIEWER_SYSTEM: Readonly<Record<Focus, string>> = {
  methodology: reviewerSystem('methodology'),
  statistics: reviewerSystem('statistics'),
  novelty: reviewerSystem('novelty'),
};

function reviewerSystem(focus: Focus): string {
  return systemPrompt(`You are a reviewer on a committee of independent reviewers.\n${FOCUS_TEXT[focus]}`, [
    REASONING_FIELD,
    STANCE_FIELD,
    CONFIDENCE_FIELD,
  ]);
}

export const reviewer = {
  name: 'reviewer',
  kind: 'llm',
  output: ReviewerOutput,
  jsonSchema: strictJsonSchema(ReviewerOutput),
  canDecide: false,
  render: (ctx) => {
    const focus = ctx.node.focus ?? 'methodology';
    return {
      system: REVIEWER_SYSTEM[focus],
      user: `${fenceSections(ctx)}\n\nTask: review the candidate from your ${focus} focus and take your stance.`,
    };
  },
  stance: (o) => o.stance,
  confidence: (o) => o.confidence,
  summarize: (o) => `Reasoning: ${clip(o.reasoning, 600)}`,
} satisfies Role<typeof ReviewerOutput>;
