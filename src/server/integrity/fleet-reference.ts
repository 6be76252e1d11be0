/**
 * The fleet test's reference and the judge it belongs to: the serving judge as a reference file names it,
 * a CANARY_REFERENCE of another judge refused at start-up, and a frozen reference shared through the canary
 * log so every process uses one.
 */
import { createHash } from 'node:crypto';

import { z } from 'zod';

import { allNodes, type CompiledGraph } from '../../judge/graph.js';
import type { Router } from '../../judge/types.js';
import { PROMPT_VERSION } from '../../roles/index.js';
import type { CanaryRow } from '../../settings/canary-dataset.js';
import {
  judgeMismatch,
  judgeRoutes,
  type CanaryJudge,
  type CanaryReference,
} from '../../settings/canary-reference.js';
import type { CanaryLedger, FleetReference } from './canary-ledger.js';
import type { IntegrityOptions } from './integrity-types.js';

/** A shared frozen reference (the canary log's), validated like an entry. */
const FleetReferenceSchema = z.object({
  source: z.literal('frozen'),
  n: z.number().int().min(1),
  wrong: z.number().int().min(0),
});

/** The serving judge as a reference file names it (graph, prompt version, every LLM node's route). */
export function servingJudge(graph: CompiledGraph, router: Router): CanaryJudge {
  const nodes = allNodes(graph)
    .filter((r) => r.role.kind === 'llm')
    .map((r) => {
      const route = router.route(r.node);
      return { id: r.node.id, backend: route.backend.name, model: route.model };
    });
  return {
    graph: { name: graph.name, hash: graph.hash },
    prompt_version: PROMPT_VERSION,
    routes: judgeRoutes(nodes),
  };
}

/** The shared name of a frozen reference: the same judge, canary set and size make the same reference. */
function referenceName(judge: CanaryJudge, rows: readonly CanaryRow[], size: number): string {
  const h = createHash('sha256');
  h.update(JSON.stringify(judge));
  for (const r of rows) h.update(`|${r.id}`);
  h.update(`|${size}`);
  return h.digest('hex').slice(0, 16);
}

/** A CANARY_REFERENCE measured on another judge (graph, prompt version, model) is refused at start-up. */
export function checkReference(file: CanaryReference | undefined, judge: CanaryJudge): void {
  if (file === undefined) return;
  const mismatch = judgeMismatch(file.judge, judge);
  if (mismatch === undefined) return;
  throw new Error(
    `CANARY_REFERENCE ${file.path} is not of this judge: ${mismatch}; write it again with \`npm run ablate -- --canary-reference\` against this judge`,
  );
}

/**
 * A frozen reference shared through the canary log: the first process to freeze one stores it under a
 * name of the judge, the canary set and the size; every process adopts the stored one (REDIS_URL).
 */
export function referenceSharing(options: IntegrityOptions, ledger: CanaryLedger, judge: CanaryJudge) {
  const name = referenceName(judge, options.canaries ?? [], options.fleet.referenceSize);
  const adopt = (stored: string | undefined): void => {
    if (stored === undefined) return;
    try {
      const parsed = FleetReferenceSchema.safeParse(JSON.parse(stored));
      if (parsed.success) ledger.adoptReference(parsed.data);
    } catch {
      // Not a reference (another version's): this process keeps its own.
    }
  };
  return {
    /** Adopts one another process stored (call after subscribing: the replay comes first). */
    readStored(): void {
      if (options.fleet.reference === undefined) void options.log.readReference(name).then(adopt);
    },
    share(reference: FleetReference): void {
      void options.log.shareReference(name, JSON.stringify(reference)).then(adopt);
    },
  };
}
