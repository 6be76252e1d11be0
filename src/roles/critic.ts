import { z } from 'zod';
import {
  clip,
  clipList,
  Confidence,
  CONFIDENCE_FIELD,
  REASONING_FIELD,
  Stance,
  roleInstruction,
  strictJsonSchema,
} from './common.js';
import { renderPrompt } from './fence.js';
import type { Role } from './types.js';

/** The Critic looks for reasons the candidate does not match; stance `match` means it concedes. */
export const CriticOutput = z.object({
  reasoning: z.string(),
  objections: z.array(z.string()),
  stance: Stance,
  confidence: Confidence,
});
export type CriticOutput = z.infer<typeof CriticOutput>;

/** The Critic's candidate-independent instruction (part of the shared prompt prefix). */
export const CRITIC_INSTRUCTION = roleInstruction(
  [
    'You are the Critic on a review committee. Your job is to find reasons the candidate does NOT match:',
    'the key mechanism is missing, only named without being specified, used differently or for another',
    'purpose; the method rests on a different critical assumption; the overlap is only topical.',
    'Object only on methodology, novelty and critical assumptions, never on datasets, metrics or setup.',
    'If other members argued for a match, answer their arguments specifically.',
    'Then take a stance: "no_match" if at least one objection is decisive; "match" if, after an honest',
    'attempt, you concede that the core method is the same (your remaining objections are minor).',
  ].join('\n'),
  'raise your objections, then concede or hold your stance.',
  [
    REASONING_FIELD,
    'objections (array of strings): concrete objections, most decisive first; empty if none holds',
    'stance ("match" to concede that the core method matches, or "no_match")',
    CONFIDENCE_FIELD,
  ],
);

export const critic = {
  name: 'critic',
  kind: 'llm',
  output: CriticOutput,
  jsonSchema: strictJsonSchema(CriticOutput),
  canDecide: false,
  render: (ctx) => renderPrompt(ctx, { instruction: CRITIC_INSTRUCTION }),
  stance: (o) => o.stance,
  confidence: (o) => o.confidence,
  summarize: (o) =>
    `Objections: ${o.objections.length === 0 ? 'none' : clipList(o.objections, 6, 200)}. Reasoning: ${clip(o.reasoning, 600)}`,
} satisfies Role<typeof CriticOutput>;
