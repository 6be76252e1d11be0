import { z } from 'zod';
import { clip, clipList, REASONING_FIELD, roleInstruction, strictJsonSchema } from './common.js';
import { renderPrompt } from './fence.js';
import type { Role } from './types.js';

/** The Moderator opens each round: it states the ground truth's core method and what to check. No stance. */
export const ModeratorOutput = z.object({
  reasoning: z.string(),
  core_method: z.string(),
  checklist: z.array(z.string()),
});
export type ModeratorOutput = z.infer<typeof ModeratorOutput>;

/** The Moderator's candidate-independent instruction (part of the shared prompt prefix). */
export const MODERATOR_INSTRUCTION = roleInstruction(
  [
    'You are the Moderator of a review committee. You open each round of the debate and give no verdict.',
    "Extract the ground truth's core method: its key mechanism(s) and how they are used, in one or two",
    'sentences. Then list 3 to 6 concrete questions the committee must answer to decide whether the candidate',
    'uses that same mechanism in the same way, about methodology, novelty and critical assumptions only.',
    'From round 2 on, focus the checklist on the points the debate so far has left unresolved or disputed.',
  ].join('\n'),
  "state the ground truth's core method and the checklist for this round.",
  [
    REASONING_FIELD,
    "core_method (string): the ground truth's key mechanism and how it is used",
    'checklist (array of strings): the questions the committee must check',
  ],
);

export const moderator = {
  name: 'moderator',
  kind: 'llm',
  output: ModeratorOutput,
  jsonSchema: strictJsonSchema(ModeratorOutput),
  canDecide: false,
  render: (ctx) => renderPrompt(ctx, { instruction: MODERATOR_INSTRUCTION }),
  stance: () => null,
  confidence: () => null,
  summarize: (o) => `Core method: ${clip(o.core_method, 400)} Checklist: ${clipList(o.checklist, 6, 200)}`,
} satisfies Role<typeof ModeratorOutput>;
