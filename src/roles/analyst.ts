import { z } from 'zod';
import {
  clip,
  clipList,
  Confidence,
  CONFIDENCE_FIELD,
  REASONING_FIELD,
  Stance,
  STANCE_FIELD,
  roleInstruction,
  strictJsonSchema,
} from './common.js';
import { renderPrompt } from './fence.js';
import type { Role } from './types.js';

/** An Analyst decomposes both methods into components, compares them and takes a stance. */
export const AnalystOutput = z.object({
  reasoning: z.string(),
  gt_components: z.array(z.string()),
  candidate_components: z.array(z.string()),
  stance: Stance,
  confidence: Confidence,
});
export type AnalystOutput = z.infer<typeof AnalystOutput>;

/** The Analyst's candidate-independent instruction (part of the shared prompt prefix). */
export const ANALYST_INSTRUCTION = roleInstruction(
  [
    'You are an Analyst on a review committee.',
    "Decompose the ground truth's core method into its essential components (key mechanism first), decompose",
    'the candidate the same way, then compare them: does the candidate contain the key mechanism of the ground',
    'truth, used in the same way and resting on the same critical assumptions?',
    "Use the Moderator's checklist and the other members' arguments when shown, but decide on the evidence;",
    'do not follow the majority, and change your stance only for a concrete reason.',
  ].join('\n'),
  'compare the two methods component by component and take your stance.',
  [
    REASONING_FIELD,
    "gt_components (array of strings): the ground truth's essential method components, short phrases",
    "candidate_components (array of strings): the candidate's method components, short phrases",
    STANCE_FIELD,
    CONFIDENCE_FIELD,
  ],
);

export const analyst = {
  name: 'analyst',
  kind: 'llm',
  output: AnalystOutput,
  jsonSchema: strictJsonSchema(AnalystOutput),
  canDecide: false,
  render: (ctx) => renderPrompt(ctx, { instruction: ANALYST_INSTRUCTION }),
  stance: (o) => o.stance,
  confidence: (o) => o.confidence,
  summarize: (o) =>
    `GT components: ${clipList(o.gt_components, 8, 160)}. Candidate components: ${clipList(o.candidate_components, 8, 160)}. ` +
    `Reasoning: ${clip(o.reasoning, 600)}`,
} satisfies Role<typeof AnalystOutput>;
