import { z } from 'zod';
import {
  clip,
  Confidence,
  CONFIDENCE_FIELD,
  REASONING_FIELD,
  Stance,
  STANCE_FIELD,
  roleInstruction,
  strictJsonSchema,
} from './common.js';
import { renderPrompt } from './fence.js';
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
    'the algorithmic or experimental mechanism, its components, how they are',
    'combined and what each is used for. Compare the two methods at that level.',
  ].join('\n'),
  statistics: [
    'the statistical and modelling core: the objective or loss, the estimator, the probabilistic',
    'or physical model, the inference or optimisation procedure, and the assumptions they rest on. Not the',
    'metrics or the data used to evaluate it: those stay out of scope.',
  ].join('\n'),
  novelty: [
    'what the ground truth adds beyond standard practice in its field. A match needs',
    'the candidate to propose that same new element, not only the standard parts the two share.',
  ].join('\n'),
};

export const REVIEWER_FOCI: readonly Focus[] = ['methodology', 'statistics', 'novelty'];

/**
 * The reviewer's candidate-independent instruction. Its focus is not in it: parallel reviewers differ only
 * by focus, which comes after the candidate (`member`), so they share their whole prompt up to the candidate.
 */
export const REVIEWER_INSTRUCTION = roleInstruction(
  [
    'You are a reviewer on a committee of independent reviewers. Each reviewer judges from one focus; yours',
    'is stated after the candidate, at the end of this message.',
  ].join('\n'),
  'review the candidate from your focus and take your stance.',
  [REASONING_FIELD, STANCE_FIELD, CONFIDENCE_FIELD],
);

/** The member line per focus (a reviewer node without a focus reviews methodology). */
export const REVIEWER_FOCUS: Readonly<Record<Focus, string>> = {
  methodology: `Your focus (methodology): ${FOCUS_TEXT.methodology}`,
  statistics: `Your focus (statistics): ${FOCUS_TEXT.statistics}`,
  novelty: `Your focus (novelty): ${FOCUS_TEXT.novelty}`,
};

export const reviewer = {
  name: 'reviewer',
  kind: 'llm',
  output: ReviewerOutput,
  jsonSchema: strictJsonSchema(ReviewerOutput),
  canDecide: false,
  render: (ctx) =>
    renderPrompt(ctx, {
      instruction: REVIEWER_INSTRUCTION,
      member: REVIEWER_FOCUS[ctx.node.focus ?? 'methodology'],
    }),
  stance: (o) => o.stance,
  confidence: (o) => o.confidence,
  summarize: (o) => `Reasoning: ${clip(o.reasoning, 600)}`,
} satisfies Role<typeof ReviewerOutput>;
