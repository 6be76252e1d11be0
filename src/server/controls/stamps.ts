/**
 * What a result says about who judged it (issue 21): the committee's `votes`, the `judge_model` (the model
 * id the backend reported in its replies, else the configured one; a list when a committee mixes models),
 * the `prompt_version` and the graph hash. A cached or shared result replays the stamps of the judgment
 * it stores (the transcript keeps each reply's reported model), so a resumed run or a bisect can tell
 * verdicts of different judges apart; the cache key holds the configured models and the prompt version.
 */
import { comparisonNodeId } from '../../judge/compare.js';
import { allNodes, type CompiledGraph } from '../../judge/graph.js';
import type { Judgment, Router, Verdict } from '../../judge/types.js';
import { PROMPT_VERSION } from '../../roles/index.js';

/** One member's position in one round: every stance-bearing message of the debate and of the decision. */
export interface Vote {
  node: string;
  role: string;
  round: number;
  stance: Verdict;
  confidence: number | null;
}

export function votesOf(judgment: Pick<Judgment, 'transcript'>): Vote[] {
  const votes: Vote[] = [];
  for (const m of judgment.transcript) {
    if (m.stance === null) continue;
    votes.push({ node: m.nodeId, role: m.role, round: m.round, stance: m.stance, confidence: m.confidence });
  }
  return votes;
}

/** A single model id, the distinct ids in order of first appearance, or null when no LLM is involved. */
type JudgeModel = string | string[] | null;

function collapse(models: ReadonlySet<string>): JudgeModel {
  const list = [...models];
  return list.length === 0 ? null : list.length === 1 ? (list[0] ?? null) : list;
}

/** The configured models of a graph's LLM nodes, through the router (the routing file may override). */
export function configuredModels(graph: CompiledGraph, router: Router): Set<string> {
  const models = new Set<string>();
  for (const r of allNodes(graph)) if (r.role.kind === 'llm') models.add(router.route(r.node).model);
  return models;
}

/**
 * The judge model of some judgments of one graph: the models their replies reported (the configured one for
 * a node that got no reply), or, when none of them called an LLM (cached rejections, a lexical graph),
 * the graph's configured models.
 */
export function judgeModelOf(
  judgments: readonly Judgment[],
  graph: CompiledGraph,
  router: Router,
): JudgeModel {
  const models = new Set<string>();
  for (const j of judgments)
    for (const m of j.transcript) if (m.model !== 'local') models.add(m.servedModel ?? m.model);
  return collapse(models.size > 0 ? models : configuredModels(graph, router));
}

/** The answer-level stamps of a route's answer over judgments of one graph. */
export function stampsOf(judgments: readonly Judgment[], graph: CompiledGraph, router: Router) {
  return {
    judge_model: judgeModelOf(judgments, graph, router),
    prompt_version: judgments[0]?.promptVersion ?? PROMPT_VERSION,
    graph_hash: graph.hash,
  };
}

/** The judge model of comparisons: the models their votes name, else the configured comparison route's. */
export function comparisonModelOf(
  votes: ReadonlyArray<{ model?: string | undefined }>,
  router: Router,
): JudgeModel {
  const models = new Set<string>();
  for (const v of votes) if (v.model !== undefined && v.model !== '') models.add(v.model);
  if (models.size === 0) models.add(router.route({ id: comparisonNodeId(1), role: 'comparison' }).model);
  return collapse(models);
}
