/** GET /v1/graphs (every preset with its spec) and GET /v1/graphs/:name. */
import type { FastifyInstance } from 'fastify';

import type { CompiledGraph } from '../../../judge/graph.js';
import { PRESETS } from '../../../judge/presets.js';
import { presetChoice, type ServerContext } from '../context.js';

function describe(key: string, graph: CompiledGraph) {
  return {
    name: key,
    graph_name: graph.name,
    hash: graph.hash,
    description: graph.spec.description ?? null,
    llm_calls_per_judgment: graph.llmCallsPerJudgment,
    critical_path_calls: graph.criticalPathCalls,
    spec: graph.spec,
  };
}

export function registerGraphRoutes(app: FastifyInstance, ctx: ServerContext): void {
  // Presets are immutable: build the listing once.
  const listing = {
    default: ctx.config.defaultGraph,
    graphs: [...PRESETS.entries()].map(([key, graph]) => describe(key, graph)),
  };

  app.get('/v1/graphs', () => listing);

  app.get<{ Params: { name: string } }>('/v1/graphs/:name', (request) => {
    const { name } = request.params;
    return describe(name, presetChoice(name).graph);
  });
}
