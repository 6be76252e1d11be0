import { z } from 'zod';
import {
  clip,
  Confidence,
  REASONING_FIELD,
  strictJsonSchema,
  systemPrompt,
  Stance,
  VERDICT_CONFIDENCE_FIELD,
  VERDICT_FIELD,
} from './common.js';
import { fenceSections } from './fence.js';
import type { Role } from './types.js';

/** The Evaluator reads the debate and gives the committee's verdict. */
export const EvaluatorOutput = z.object({
  reasoning: z.string(),
  verdict: Stance,
  confidence: Confidence,
});
export type EvaluatorOutput = z.infer<typeof EvaluatorOutput>;

export const EVALUATOR_SYSTEM = systemPrompt(
  [
    "You are the Evaluator, the committee's final decision-maker.",
    'Read the ground truth, the candidate and the debate so far, check the decisive arguments against the',
    'texts yourself, and give the verdict. Weigh arguments by their substance, not by how many members made',
    'them or how confident they sounded: the committee can be wrong.',
  ].join('\n'),
  [REASONING_FIELD, VERDICT_FIELD, VERDICT_CONFIDENCE_FIELD],
);

export const evaluator = {
  name: 'evaluator',
  kind: 'llm',
  output: EvaluatorOutput,
  jsonSchema: strictJsonSchema(EvaluatorOutput),
  canDecide: true,
  render: (ctx) => ({
    system: EVALUATOR_SYSTEM,
    user: `${fenceSections(ctx)}\n\nTask: give the final verdict.`,
  }),
  stance: (o) => o.verdict,
  confidence: (o) => o.confidence,
  summarize: (o) => `Reasoning: ${clip(o.reasoning, 600)}`,
} satisfies Role<typeof EvaluatorOutput>;
