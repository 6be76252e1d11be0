/**
 * `npm run ablate -- --canary-reference FILE`: the serving judge's offline accuracy on the canary set, per
 * row, as CANARY_REFERENCE reads it (`settings/canary-reference.ts`). Run it against the judge that will
 * serve (same JUDGE_* / REWARD_CONFIG, same DEFAULT_GRAPH) on the file that will be CANARY_DATASET, before
 * training: the fleet-level canary test then measures the fleet against this, not against itself.
 */
import { writeFile } from 'node:fs/promises';

import { allNodes, type CompiledGraph } from '../../judge/graph.js';
import type { Router } from '../../judge/types.js';
import { exactInterval } from '../../math/binomial.js';
import { PROMPT_VERSION } from '../../roles/index.js';
import { CanaryReferenceFile, judgeRoutes } from '../../settings/canary-reference.js';
import type { DatasetItem } from '../dataset.js';
import type { ItemRecord } from '../records.js';

export interface CanaryReferenceInput {
  graph: CompiledGraph;
  router: Router;
  items: readonly DatasetItem[];
  /** The graph's records, aligned with `items`. */
  records: readonly ItemRecord[];
  dataset: { path: string; sha256: string };
  now?: Date | undefined;
}

/** The reference file's content: each decided row's outcome (failed judgments are no evidence). */
export function canaryReference(input: CanaryReferenceInput): CanaryReferenceFile {
  const rows: NonNullable<CanaryReferenceFile['rows']> = [];
  input.items.forEach((item, i) => {
    const verdict = input.records[i]?.verdict ?? null;
    if (verdict === null) return;
    const label = item.label === 1 ? 'match' : 'no_match';
    rows.push({ id: item.id, label, verdict, correct: verdict === label });
  });
  const correct = rows.filter((r) => r.correct).length;
  const ci = exactInterval(correct, rows.length);
  const nodes = allNodes(input.graph)
    .filter((r) => r.role.kind === 'llm')
    .map((r) => {
      const route = input.router.route(r.node);
      return { id: r.node.id, backend: route.backend.name, model: route.model };
    });
  return CanaryReferenceFile.parse({
    kind: 'canary-reference',
    version: 1,
    written_at: (input.now ?? new Date()).toISOString(),
    tool: 'ablate',
    judge: {
      graph: { name: input.graph.name, hash: input.graph.hash },
      prompt_version: PROMPT_VERSION,
      routes: judgeRoutes(nodes),
    },
    dataset: input.dataset,
    rows,
    overall: {
      n: rows.length,
      correct,
      accuracy: ci.rate ?? 0,
      ci95: [ci.lo ?? 0, ci.hi ?? 1],
    },
  });
}

/** Writes the reference; throws when no row was decided (nothing to refer to). */
export async function writeCanaryReference(path: string, input: CanaryReferenceInput): Promise<string> {
  if (!input.records.some((r) => r.verdict !== null)) {
    throw new Error(`--canary-reference: no judgment of ${input.graph.name} decided; nothing written`);
  }
  const file = canaryReference(input);
  await writeFile(path, `${JSON.stringify(file, null, 2)}\n`);
  const acc = file.overall.ci95 ?? [0, 1];
  return `canary reference: ${file.judge.graph.name} right on ${file.overall.correct} of ${file.overall.n} rows (${(
    (file.overall.accuracy ?? 0) * 100
  ).toFixed(1)} %, 95 % CI ${(acc[0] * 100).toFixed(1)}–${(acc[1] * 100).toFixed(1)} %) → ${path}`;
}
