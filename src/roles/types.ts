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

/**
 * What comparative and absolute judging judge on: `match` (closeness to the ground truth's core method; needs a
 * ground truth) or one of the paper's evaluation criteria.
 */
export type Criterion = 'match' | 'novelty' | 'feasibility' | 'effectiveness';

interface ComparativeBase {
  question: string;
  /** The published paper's abstract / golden idea; null when judging on the criterion alone. */
  groundTruth: string | null;
  criterion: Criterion;
  /** Per-judgment random nonce fencing the candidates. */
  nonce: string;
}

/** Two candidates in the order they are shown: `a` in position A, `b` in position B. */
export interface PairContext extends ComparativeBase {
  kind: 'pair';
  a: string;
  b: string;
}

/** One idea scored on an absolute 1–5 scale. */
export interface RatingContext extends ComparativeBase {
  kind: 'rating';
  idea: string;
}

/** N candidates shown together; the judge names the best one (1-based). */
export interface PickContext extends ComparativeBase {
  kind: 'pick';
  candidates: readonly string[];
}

export type ComparativeContext = PairContext | RatingContext | PickContext;

/**
 * A role of comparative judging: data plus a pure prompt builder, like `Role`, but over a comparative context.
 * These roles are not graph nodes: the comparison engine (`judge/compare.ts`) calls them directly.
 */
export interface ComparativeRole<S extends z.ZodType, C extends ComparativeContext> {
  readonly name: string;
  readonly kind: C['kind'];
  readonly output: S;
  readonly jsonSchema: Record<string, unknown>;
  render(ctx: C): RenderedPrompt;
}
