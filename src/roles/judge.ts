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

/** A single LLM-as-judge: one call, the verdict directly (the baseline and the vote member). */
export const JudgeOutput = z.object({
  reasoning: z.string(),
  verdict: Stance,
  confidence: Confidence,
});
export type JudgeOutput = z.infer<typeof JudgeOutput>;

export const JUDGE_SYSTEM = systemPrompt(
  [
    'You are an expert reviewer judging alone.',
    "Identify the ground truth's key mechanism and critical assumptions, identify the candidate's, compare",
    'them, and give your verdict.',
  ].join('\n'),
  [REASONING_FIELD, VERDICT_FIELD, VERDICT_CONFIDENCE_FIELD],
);

export const judge = {
  name: 'judge',
  kind: 'llm',
  output: JudgeOutput,
  jsonSchema: strictJsonSchema(JudgeOutput),
  canDecide: true,
  render: (ctx) => ({
    system: JUDGE_SYSTEM,
    user: `${fenceSections(ctx)}\n\nTask: decide whether the candidate matches the ground truth's core method.`,
  }),
  stance: (o) => o.verdict,
  confidence: (o) => o.confidence,
  summarize: (o) => `Reasoning: ${clip(o.reasoning, 600)}`,
} satisfies Role<typeof JudgeOutput>;
