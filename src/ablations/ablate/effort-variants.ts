/**
 * Reasoning effort as a dimension `ablate` varies (issue 37 item 3): `--reasoning-effort
 * analyst=low,evaluator=high` adds, for every graph asked for, a variant whose nodes carry those efforts
 * (`reasoning_effort` on the node, by node id, then role, then `all`), so P/R and the per-role tokens per
 * judgment of each effort mix come out in one table. Repeat the option for several mixes. The variant is
 * a graph spec of its own (its hash differs), so its judgments are keyed and resumed apart.
 */
import { RewardError } from '../../errors.js';
import type { CompiledGraph, GraphNode } from '../../judge/graph.js';
import { compileSpec } from '../../judge/presets.js';
import { ReasoningEffort } from '../../settings/routing-file.js';

/** One mix: effort by node id or role (`all` for every node), in the order given. */
export type EffortMix = ReadonlyArray<readonly [string, ReasoningEffort]>;

/** Parses `analyst=low,evaluator=high` (or `all=high`); throws RW_BAD_REQUEST naming the bad part. */
export function parseEffortMix(text: string): EffortMix {
  const mix: Array<[string, ReasoningEffort]> = [];
  for (const part of text.split(',').map((p) => p.trim())) {
    if (part === '') continue;
    const [target, value, extra] = part.split('=').map((s) => s.trim());
    const effort = ReasoningEffort.safeParse(value);
    if (target === undefined || target === '' || extra !== undefined || !effort.success) {
      throw new RewardError(
        'RW_BAD_REQUEST',
        `--reasoning-effort: "${part}" is not ROLE_OR_NODE=EFFORT (EFFORT: ${ReasoningEffort.options.join('|')})`,
      );
    }
    mix.push([target, effort.data]);
  }
  if (mix.length === 0) throw new RewardError('RW_BAD_REQUEST', '--reasoning-effort: empty');
  return mix;
}

/** The mix as a label suffix: `effort-analyst-low-evaluator-high`. */
export const mixLabel = (mix: EffortMix): string =>
  `effort-${mix.map(([target, effort]) => `${target}-${effort}`).join('-')}`;

function effortFor(node: GraphNode, mix: EffortMix): ReasoningEffort | undefined {
  const byTarget = new Map(mix);
  return byTarget.get(node.id) ?? byTarget.get(node.role) ?? byTarget.get('all') ?? node.reasoning_effort;
}

/**
 * `graph` with the mix's efforts on its nodes, named `<label>.<mixLabel>`. A target that matches no node
 * (id, role or `all`) is an error, so a typo does not run the unchanged graph under a new name. A cascade
 * is refused (its stages are graphs of their own: vary them by name).
 */
export function withEfforts(graph: CompiledGraph, label: string, mix: EffortMix): [string, CompiledGraph] {
  if (graph.spec.cascade !== undefined) {
    throw new RewardError('RW_BAD_REQUEST', `--reasoning-effort: "${label}" is a cascade; vary its stages`);
  }
  for (const [target] of mix) {
    if (target !== 'all' && !graph.spec.nodes.some((n) => n.id === target || n.role === target)) {
      throw new RewardError(
        'RW_BAD_REQUEST',
        `--reasoning-effort: graph "${label}" has no node or role "${target}"`,
      );
    }
  }
  const name = `${label}.${mixLabel(mix)}`;
  const nodes = graph.spec.nodes.map((node) => {
    const effort = effortFor(node, mix);
    return effort === undefined ? node : { ...node, reasoning_effort: effort };
  });
  return [name, compileSpec({ ...graph.spec, name, nodes }, name)];
}
