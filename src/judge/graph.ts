import { createHash } from 'node:crypto';
import { z } from 'zod';

const NodeId = z
  .string()
  .regex(/^[a-z][a-z0-9_-]{0,39}$/, 'node id: lowercase letters, digits, "_" or "-", starting with a letter');

export const GraphNode = z.strictObject({
  id: NodeId,
  role: z.string().min(1),
  model: z.string().min(1).optional(),
  temperature: z.number().min(0).max(2).optional(),
  top_p: z.number().gt(0).max(1).optional(),
  max_tokens: z.number().int().min(16).max(32_768).optional(),
  /** Sampling seed; parallel members of one role must differ by seed (with temperature > 0) or by focus. */
  seed: z.number().int().min(0).optional(),
  focus: z.enum(['methodology', 'statistics', 'novelty']).optional(),
  /**
   * Same-round inputs: ids (or "all") whose output in the current round this node waits for and reads.
   * "all" means every debate node for a `final` node, and every debate node declared earlier for a debate node.
   * Earlier rounds of every debate node are always visible (a debate is public).
   */
  sees: z.union([z.literal('all'), z.array(NodeId)]).optional(),
  /** `debate` nodes run every round; `final` nodes run once, after the last round (e.g. the Evaluator). */
  stage: z.enum(['debate', 'final']).optional(),
  /** Track-record weight for `confidence_weighted` (default 1). */
  weight: z.number().gt(0).max(10).optional(),
});
export type GraphNode = z.infer<typeof GraphNode>;

export const Decision = z.discriminatedUnion('rule', [
  z.strictObject({ rule: z.literal('evaluator'), node: NodeId }),
  z.strictObject({ rule: z.literal('majority'), nodes: z.array(NodeId).min(1).optional() }),
  z.strictObject({ rule: z.literal('unanimous'), nodes: z.array(NodeId).min(1).optional() }),
  z.strictObject({ rule: z.literal('confidence_weighted'), nodes: z.array(NodeId).min(1).optional() }),
]);
export type Decision = z.infer<typeof Decision>;

export const EarlyStop = z.strictObject({
  /** Stop after a round in which every stance-bearing debate node holds the same stance. */
  kind: z.literal('unanimous'),
});

export const GraphSpec = z.strictObject({
  name: z.string().min(1).max(64).optional(),
  description: z.string().max(500).optional(),
  rounds: z.number().int().min(1).max(5).default(1),
  early_stop: EarlyStop.optional(),
  decision: Decision,
  nodes: z.array(GraphNode).min(0).max(16),
});
export type GraphSpec = z.infer<typeof GraphSpec>;
export type GraphSpecInput = z.input<typeof GraphSpec>;

/** Canonical JSON: object keys sorted, no whitespace. Stable across key order in the source. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** A graph's stable hash: sha256 of the canonical JSON of its parsed spec without name/description, 16 hex. */
export function graphHash(spec: GraphSpec): string {
  const { name: _name, description: _description, ...rest } = spec;
  return createHash('sha256').update(canonicalJson(rest)).digest('hex').slice(0, 16);
}
