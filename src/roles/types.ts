import type { z } from 'zod';
import type { Strictness } from './strictness.js';

export type Verdict = 'match' | 'no_match';

/** Reviewer focus for the round-robin preset and for diversifying parallel members. */
export type Focus = 'methodology' | 'statistics' | 'novelty';

/** One earlier message a node is allowed to read (same round per `sees`, all debate nodes of earlier rounds). */
export interface VisibleMessage {
  nodeId: string;
  role: string;
  round: number;
  stance: Verdict | null;
  confidence: number | null;
  /** The role's own summary of its output (role.summarize); never the raw completion text. */
  summary: string;
}

/** Everything a role needs to render its prompt. Rollout text is untrusted. */
export interface RoleContext {
  question: string;
  candidate: string;
  groundTruth: string;
  /** Per-judgment random nonce used in the fence delimiters. */
  nonce: string;
  /** 1-based round number and the graph's maximum. */
  round: number;
  rounds: number;
  node: { id: string; focus?: Focus | undefined; strictness?: Strictness | undefined };
  visible: readonly VisibleMessage[];
}

export interface RenderedPrompt {
  system: string;
  user: string;
}

/**
 * A role is data plus pure functions: no I/O, no env, no metrics.
 * `output` is the contract with the prompt; `jsonSchema` is its JSON Schema (computed once at load).
 */
export interface Role<S extends z.ZodType = z.ZodType> {
  readonly name: string;
  /** `local` roles are computed in-process without any LLM call (e.g. `lexical`). */
  readonly kind: 'llm' | 'local';
  readonly output: S;
  readonly jsonSchema: Record<string, unknown>;
  /** True if this role's verdict can decide a judgment (`decision.rule: evaluator`). */
  readonly canDecide: boolean;
  render(ctx: RoleContext): RenderedPrompt;
  /** The node's stance, or null for roles without one (Moderator). */
  stance(output: z.infer<S>): Verdict | null;
  /** Confidence in its own stance in [0,1], or null. */
  confidence(output: z.infer<S>): number | null;
  /** Short text other nodes see of this output. */
  summarize(output: z.infer<S>): string;
  /** Only for kind `local`: compute the output directly. */
  compute?(ctx: RoleContext): z.infer<S>;
}
