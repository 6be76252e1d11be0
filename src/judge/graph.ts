import { createHash } from 'node:crypto';
import { z } from 'zod';

import { RewardError } from '../errors.js';
import { ReasoningEffort } from '../settings/routing-file.js';
import { getRole, ROLES } from '../roles/index.js';
import type { Role } from '../roles/types.js';

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
  /** `reasoning_effort` of this node's calls (a routing-file override wins; else the backend's). */
  reasoning_effort: ReasoningEffort.optional(),
  /** Sampling seed; parallel members of one role must differ by seed (with temperature > 0) or by focus. */
  seed: z.number().int().min(0).optional(),
  focus: z.enum(['methodology', 'statistics', 'novelty']).optional(),
  /** Prompt variant from calibration (src/roles/strictness.ts): `lenient` for a strict member, `strict` for a permissive one. */
  strictness: z.enum(['lenient', 'neutral', 'strict']).optional(),
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

const DecisionObject = z.discriminatedUnion('rule', [
  z.strictObject({ rule: z.literal('evaluator'), node: NodeId }),
  z.strictObject({ rule: z.literal('majority'), nodes: z.array(NodeId).min(1).optional() }),
  z.strictObject({ rule: z.literal('unanimous'), nodes: z.array(NodeId).min(1).optional() }),
  z.strictObject({ rule: z.literal('confidence_weighted'), nodes: z.array(NodeId).min(1).optional() }),
]);
const VOTING_RULES: readonly string[] = ['majority', 'unanimous', 'confidence_weighted'];
/**
 * `{"rule": …}`; a voting rule's name alone (`"decision": "majority"`) is shorthand for `{"rule": "majority"}`
 * (every stance-bearing node votes). Any other string is refused with the object form named (issue 40).
 */
export const Decision = z.unknown().transform((input, ctx): z.infer<typeof DecisionObject> => {
  if (typeof input === 'string' && !VOTING_RULES.includes(input)) {
    ctx.addIssue({
      code: 'custom',
      message:
        `"${input}" is not a decision: write {"rule": "evaluator", "node": ID}, or {"rule": R, "nodes"?: [IDs]} ` +
        `with R one of ${VOTING_RULES.join(', ')} (a voting rule's name alone is shorthand for {"rule": R})`,
    });
    return z.NEVER;
  }
  const parsed = DecisionObject.safeParse(typeof input === 'string' ? { rule: input } : input);
  if (parsed.success) return parsed.data;
  for (const issue of parsed.error.issues)
    ctx.addIssue({ code: 'custom', message: issue.message, path: issue.path });
  return z.NEVER;
});
export type Decision = z.infer<typeof Decision>;

export const EarlyStop = z.discriminatedUnion('kind', [
  /** Stop after a round in which every stance-bearing debate node holds the same stance. */
  z.strictObject({ kind: z.literal('unanimous') }),
  /**
   * Stop when the debate repeats itself: after a round in which every debate node kept its stance and its
   * turn is at least `similarity` alike to its previous one (src/judge/monitor.ts), or once the judgment
   * has spent `budget_tokens` (prompt + completion). The transcript's `debate` records each round.
   */
  z.strictObject({
    kind: z.literal('converged'),
    similarity: z.number().gt(0).max(1).default(0.9),
    budget_tokens: z.number().int().min(1).optional(),
  }),
]);

const GraphFields = {
  name: z.string().min(1).max(64).optional(),
  description: z.string().max(500).optional(),
  rounds: z.number().int().min(1).max(5).default(1),
  early_stop: EarlyStop.optional(),
  decision: Decision,
  nodes: z.array(GraphNode).min(0).max(16),
};

/** A plain graph (the escalation target of a cascade cannot itself be a cascade). */
const PlainGraphSpec = z.strictObject(GraphFields);

/**
 * A cascade: this graph's own nodes are the cheap first stage. When its verdict is `stop_on` with a
 * confidence in that verdict ≥ `threshold`, the judgment stops there (stop reason `cascade_stop`); anything
 * else — the other verdict, lower confidence, a failed first stage — runs `escalate_to` (stop reason
 * `escalated`), whose verdict is the judgment's. Pick `stop_on` as the direction where an error is cheap:
 * for a reward, a wrong `no_match` costs one missed reward, a wrong `match` teaches the policy a hack.
 */
export const Cascade = z.strictObject({
  /** A preset name or an inline (non-cascade) graph spec. */
  escalate_to: z.union([z.string().min(1).max(64), PlainGraphSpec]),
  stop_on: z.enum(['match', 'no_match']).default('no_match'),
  /** Minimum confidence of the first stage in `stop_on` (its score, turned towards that verdict). */
  threshold: z.number().min(0.5).max(1),
});
export type Cascade = z.infer<typeof Cascade>;

export const GraphSpec = z.strictObject({ ...GraphFields, cascade: Cascade.optional() });
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

/** A validated graph ready to run. Presets and inline specs both compile to this. */
export interface CompiledGraph {
  /** Preset name, else the spec's `name`, else `custom`. */
  name: string;
  hash: string;
  spec: GraphSpec;
  /** Most LLM calls one judgment makes (no re-asks, no early stop). */
  llmCallsPerJudgment: number;
  /** Longest chain of sequential LLM calls: the latency floor in call latencies. */
  criticalPathCalls: number;
  /** Nodes in execution order per stage, with `sees` resolved to ids. */
  debate: ResolvedNode[];
  final: ResolvedNode[];
  /** Every node by id (debate then final order in `debate`/`final`). */
  byId: ReadonlyMap<string, ResolvedNode>;
  /** Stance-bearing node ids: the voters of a vote rule that names none. */
  voters: readonly string[];
  /** Track-record weight per node id (`weight`, default 1) for `confidence_weighted`. */
  weights: ReadonlyMap<string, number>;
  /**
   * Set for a cascade: `first` is this graph's own nodes as a plain graph (what `debate`/`final` describe),
   * `then` the escalation graph. Call counts above are first + then (the most a judgment can spend).
   */
  cascade?: CompiledCascade | undefined;
}

export interface CompiledCascade {
  first: CompiledGraph;
  then: CompiledGraph;
  stopOn: 'match' | 'no_match';
  threshold: number;
}

/** Every node a judgment of this graph may run: a cascade's escalation nodes too. */
export function allNodes(graph: CompiledGraph): ResolvedNode[] {
  const own = graph.debate.concat(graph.final);
  return graph.cascade === undefined ? own : own.concat(allNodes(graph.cascade.then));
}

/**
 * What a graph's author should know though the graph is valid: a `majority` over an even number of voters can
 * tie, and a tie is `no_match` (a reward must be earned), so a match needs more than half — 3 of 4, not 2.
 * A cascade's stages are checked too. Empty for most graphs.
 */
export function graphWarnings(graph: CompiledGraph): string[] {
  const cascade = graph.cascade;
  if (cascade !== undefined) {
    return [cascade.first, cascade.then].flatMap((stage) =>
      graphWarnings(stage).map((w) => `cascade stage ${stage.name}: ${w}`),
    );
  }
  const decision = graph.spec.decision;
  if (decision.rule !== 'majority') return [];
  const n = (decision.nodes ?? graph.voters).length;
  if (n % 2 !== 0) return [];
  return [
    `majority over ${n} voters: a ${n / 2}–${n / 2} tie is no_match (a reward must be earned), so a match ` +
      `needs ${n / 2 + 1} of ${n} votes; use an odd number of voters, or confidence_weighted, for a plain majority`,
  ];
}

export interface CompileOptions {
  /** Resolves a preset name (a cascade's `escalate_to`); without it only inline escalation specs compile. */
  resolve?: ((name: string) => CompiledGraph | undefined) | undefined;
}

export interface ResolvedNode {
  node: GraphNode;
  role: Role;
  stage: 'debate' | 'final';
  /** Same-round dependencies (resolved from `sees`). */
  deps: string[];
  hasStance: boolean;
}

function invalid(message: string, details: string[] = [message]): RewardError {
  return new RewardError('RW_INVALID_GRAPH', message, { details });
}

function hasStance(role: Role): boolean {
  const props = role.jsonSchema['properties'];
  return typeof props === 'object' && props !== null && ('stance' in props || 'verdict' in props);
}

/**
 * Parses and validates a graph spec. Throws RewardError RW_INVALID_GRAPH whose message names the offending
 * node: unknown role, duplicate id, dangling or self `sees`, cycles, no deciding node, identical parallel members.
 */
export function compileGraph(input: unknown, name?: string, options: CompileOptions = {}): CompiledGraph {
  const parsed = GraphSpec.safeParse(input);
  if (!parsed.success) {
    const details = parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`);
    throw invalid(`invalid graph spec: ${details.join('; ')}`, details);
  }
  const spec = parsed.data;
  if (spec.cascade !== undefined) return compileCascade(spec, spec.cascade, name, options);
  if (spec.nodes.length === 0) throw invalid('graph has no nodes');

  const resolved = resolveNodes(spec.nodes);
  resolveDeps(resolved);

  const debate = topoOrder([...resolved.values()].filter((r) => r.stage === 'debate'));
  const final = topoOrder([...resolved.values()].filter((r) => r.stage === 'final'));
  const ordered = [...debate, ...final];
  const voters = ordered.filter((r) => r.hasStance).map((r) => r.node.id);
  checkDecision(spec, resolved, voters);
  checkParallelMembers([...resolved.values()]);

  return {
    name: name ?? spec.name ?? 'custom',
    hash: graphHash(spec),
    spec,
    llmCallsPerJudgment: llmCount(debate) * spec.rounds + llmCount(final),
    criticalPathCalls: criticalPath(debate) * spec.rounds + criticalPath(final),
    debate,
    final,
    byId: resolved,
    voters,
    weights: new Map(ordered.map((r) => [r.node.id, r.node.weight ?? 1])),
  };
}

/**
 * Each node with its role and stage, in declaration order, deps still empty. Throws on a duplicate id (any,
 * before the roles are looked up) or an unknown role.
 */
function resolveNodes(nodes: readonly GraphNode[]): Map<string, ResolvedNode> {
  const ids = new Set<string>();
  for (const node of nodes) {
    if (ids.has(node.id)) throw invalid(`node '${node.id}': duplicate node id`);
    ids.add(node.id);
  }
  const resolved = new Map<string, ResolvedNode>();
  for (const node of nodes) {
    const role = getRole(node.role);
    if (role === undefined) {
      throw invalid(
        `node '${node.id}': unknown role '${node.role}' (known: ${[...ROLES.keys()].join(', ')})`,
      );
    }
    const stage = node.stage ?? (node.role === 'evaluator' ? 'final' : 'debate');
    resolved.set(node.id, { node, role, stage, deps: [], hasStance: hasStance(role) });
  }
  return resolved;
}

/**
 * Sets each node's same-round deps from its `sees` ("all": the debate nodes, and for a debate node only those
 * declared before it). Throws on a node that sees itself, an unknown node, or (from debate) a final node.
 */
function resolveDeps(resolved: ReadonlyMap<string, ResolvedNode>): void {
  const declared = [...resolved.keys()];
  for (const [index, id] of declared.entries()) {
    const entry = resolved.get(id);
    if (entry === undefined) continue;
    const sees = entry.node.sees ?? [];
    if (sees === 'all') {
      entry.deps = declared.filter((other, j) => {
        const o = resolved.get(other);
        if (o === undefined || other === id) return false;
        return entry.stage === 'final'
          ? o.stage === 'debate' || j < index
          : o.stage === 'debate' && j < index;
      });
      continue;
    }
    for (const dep of sees) {
      const target = resolved.get(dep);
      if (dep === id) throw invalid(`node '${id}': sees itself`);
      if (target === undefined) throw invalid(`node '${id}': sees unknown node '${dep}'`);
      if (entry.stage === 'debate' && target.stage === 'final') {
        throw invalid(`node '${id}': a debate node cannot see final node '${dep}'`);
      }
    }
    entry.deps = [...new Set(sees)];
  }
}

/** LLM calls on the longest dependency chain of one pass over `nodes` (in topological order). */
function criticalPath(nodes: readonly ResolvedNode[]): number {
  const depth = new Map<string, number>();
  let longest = 0;
  for (const r of nodes) {
    const own = r.role.kind === 'llm' ? 1 : 0;
    const d = own + Math.max(0, ...r.deps.map((dep) => depth.get(dep) ?? 0));
    depth.set(r.node.id, d);
    longest = Math.max(longest, d);
  }
  return longest;
}

/** LLM calls of one pass over `nodes`. */
function llmCount(nodes: readonly ResolvedNode[]): number {
  return nodes.filter((r) => r.role.kind === 'llm').length;
}

function compileCascade(
  spec: GraphSpec,
  cascade: Cascade,
  name: string | undefined,
  options: CompileOptions,
): CompiledGraph {
  const { cascade: _cascade, ...plain } = spec;
  const first = compileGraph(plain, name);
  let then: CompiledGraph | undefined;
  if (typeof cascade.escalate_to === 'string') {
    then = options.resolve?.(cascade.escalate_to);
    if (then === undefined) throw invalid(`cascade.escalate_to: unknown graph '${cascade.escalate_to}'`);
    if (then.cascade !== undefined)
      throw invalid('cascade.escalate_to: a cascade cannot escalate to a cascade');
  } else {
    then = compileGraph(cascade.escalate_to, cascade.escalate_to.name);
  }
  if (first.llmCallsPerJudgment === 0 && then.llmCallsPerJudgment === 0) {
    throw invalid('cascade: neither stage makes an LLM call');
  }
  // Both stages' messages go into one transcript: node ids must tell them apart.
  for (const id of first.byId.keys()) {
    if (then.byId.has(id)) throw invalid(`cascade: node id '${id}' is used by both stages`);
  }
  const own = graphHash(spec);
  return {
    ...first,
    name: name ?? spec.name ?? 'custom',
    // The escalation graph's own hash is part of the identity (a preset name alone is not).
    hash: createHash('sha256').update(`${own}>${then.hash}`).digest('hex').slice(0, 16),
    spec,
    llmCallsPerJudgment: first.llmCallsPerJudgment + then.llmCallsPerJudgment,
    criticalPathCalls: first.criticalPathCalls + then.criticalPathCalls,
    cascade: { first, then, stopOn: cascade.stop_on, threshold: cascade.threshold },
  };
}

/** Kahn's algorithm within one stage; deps on the other stage are already satisfied. Stable in declaration order. */
function topoOrder(nodes: ResolvedNode[]): ResolvedNode[] {
  const inStage = new Set(nodes.map((r) => r.node.id));
  const done = new Set<string>();
  const order: ResolvedNode[] = [];
  while (order.length < nodes.length) {
    const next = nodes.find(
      (r) => !done.has(r.node.id) && r.deps.every((d) => !inStage.has(d) || done.has(d)),
    );
    if (next === undefined) {
      const stuck = nodes.filter((r) => !done.has(r.node.id)).map((r) => `'${r.node.id}'`);
      throw invalid(`cycle in 'sees' among nodes ${stuck.join(', ')}`);
    }
    done.add(next.node.id);
    order.push(next);
  }
  return order;
}

function checkDecision(spec: GraphSpec, resolved: Map<string, ResolvedNode>, voters: string[]): void {
  const decision = spec.decision;
  switch (decision.rule) {
    case 'evaluator': {
      const target = resolved.get(decision.node);
      if (target === undefined) throw invalid(`decision: no deciding node '${decision.node}' in the graph`);
      if (!target.role.canDecide) {
        throw invalid(
          `decision: node '${decision.node}' has role '${target.role.name}', which cannot decide`,
        );
      }
      return;
    }
    case 'majority':
    case 'unanimous':
    case 'confidence_weighted': {
      const ids = decision.nodes ?? voters;
      if (ids.length === 0) throw invalid(`decision: no node with a stance to vote (${decision.rule})`);
      for (const id of ids) {
        const target = resolved.get(id);
        if (target === undefined) throw invalid(`decision: voter '${id}' is not a node of the graph`);
        if (!target.hasStance)
          throw invalid(`decision: voter '${id}' (role '${target.role.name}') has no stance`);
      }
      return;
    }
    default: {
      const exhaustive: never = decision;
      throw invalid(`decision: unknown rule ${String(exhaustive)}`);
    }
  }
}

/** Parallel members of one role must not be the same call: a vote would count one opinion N times. */
function checkParallelMembers(nodes: ResolvedNode[]): void {
  for (const [i, a] of nodes.entries()) {
    for (const b of nodes.slice(i + 1)) {
      if (a.role.kind !== 'llm' || a.node.role !== b.node.role || a.stage !== b.stage) continue;
      const sameInputs = canonicalJson([...a.deps].sort()) === canonicalJson([...b.deps].sort());
      if (!sameInputs || a.node.focus !== b.node.focus || a.node.model !== b.node.model) continue;
      const ta = a.node.temperature ?? 0;
      const tb = b.node.temperature ?? 0;
      const differBySeed = a.node.seed !== b.node.seed && ta > 0 && tb > 0;
      if (!differBySeed) {
        throw invalid(
          `nodes '${a.node.id}' and '${b.node.id}' are identical parallel '${a.node.role}' calls: ` +
            'give them distinct seeds with temperature > 0, or distinct focus',
        );
      }
    }
  }
}
