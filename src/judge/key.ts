import { createHash } from 'node:crypto';

import { PROMPT_VERSION } from '../roles/index.js';
import { allNodes, type CompiledGraph } from './graph.js';
import type { JudgmentInput, Router } from './types.js';

/**
 * Identity of a judgment for coalescing and caching: graph hash, every node's route (backend, model,
 * sampling), prompt version and the three texts. Length-prefixed so no two inputs collide by concatenation.
 */
export function judgmentKey(graph: CompiledGraph, input: JudgmentInput, router: Router): string {
  const h = createHash('sha256');
  h.update(routePrefix(graph, router));
  for (const text of [input.question, input.candidate, input.groundTruth]) {
    h.update(`|${text.length}:`);
    h.update(text);
  }
  return h.digest('hex');
}

/** Routes are fixed for a router's life, so the key's graph-and-routes part is built once per pair. */
const prefixes = new WeakMap<Router, WeakMap<CompiledGraph, string>>();

function routePrefix(graph: CompiledGraph, router: Router): string {
  let byGraph = prefixes.get(router);
  if (byGraph === undefined) {
    byGraph = new WeakMap();
    prefixes.set(router, byGraph);
  }
  let prefix = byGraph.get(graph);
  if (prefix === undefined) {
    prefix = graph.hash + PROMPT_VERSION;
    for (const r of allNodes(graph)) {
      if (r.role.kind !== 'llm') continue;
      const route = router.route(r.node);
      prefix += `|${r.node.id}=${route.backend.name}/${route.model}/${route.temperature ?? ''}/${route.topP ?? ''}/${route.maxTokens ?? ''}`;
    }
    byGraph.set(graph, prefix);
  }
  return prefix;
}
