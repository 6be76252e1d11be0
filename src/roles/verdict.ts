import { z } from 'zod';
import {
  clip,
  Confidence,
  REASONING_FIELD,
  roleInstruction,
  strictJsonSchema,
  Stance,
  VERDICT_CONFIDENCE_FIELD,
  VERDICT_FIELD,
} from './common.js';
import { renderPrompt } from './fence.js';
import type { Role } from './types.js';

/** The output of every role that answers a verdict directly (Evaluator, single judge). */
export const VerdictOutput = z.object({
  reasoning: z.string(),
  verdict: Stance,
  confidence: Confidence,
});
export type VerdictOutput = z.infer<typeof VerdictOutput>;

const VERDICT_JSON_SCHEMA = strictJsonSchema(VerdictOutput);

/** A deciding role: its own system prompt and task line, the shared verdict schema. */
export function verdictRole(
  name: string,
  intro: readonly string[],
  task: string,
): Role<typeof VerdictOutput> {
  const instruction = roleInstruction(intro.join('\n'), task, [
    REASONING_FIELD,
    VERDICT_FIELD,
    VERDICT_CONFIDENCE_FIELD,
  ]);
  return {
    name,
    kind: 'llm',
    output: VerdictOutput,
    jsonSchema: VERDICT_JSON_SCHEMA,
    canDecide: true,
    render: (ctx) => renderPrompt(ctx, { instruction }),
    stance: (o) => o.verdict,
    confidence: (o) => o.confidence,
    summarize: (o) => `Reasoning: ${clip(o.reasoning, 600)}`,
  };
}
