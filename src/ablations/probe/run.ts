/** Runs the probe cases through one graph (bounded pool, per-case deadline) and scores them. */
import type { CompiledGraph } from '../../judge/graph.js';
import type { Judgment, Router } from '../../judge/types.js';
import type { DatasetItem } from '../dataset.js';
import { DEFAULT_DEADLINE_MS, judgeOnce, runPool, toInput } from '../pool.js';
import { createProgress, type ProgressStream } from '../progress.js';
import { buildCases, type ProbeCase, type ProbeName } from './catalogue.js';
import { DEFAULT_GATES, scoreProbes, type ProbeResults } from './scoring.js';

export interface ProbeOptions {
  items: readonly DatasetItem[];
  graph: CompiledGraph;
  router: Router;
  gates?: Readonly<Record<ProbeName, number | null>> | undefined;
  concurrency?: number | undefined;
  deadlineMs?: number | undefined;
  limits?: { minChars: number; maxChars: number } | undefined;
  signal?: AbortSignal | undefined;
  progress?: ProgressStream | undefined;
  /** Every judged case, for `probe-cases.jsonl`. */
  onCase?: ((c: ProbeCase, judgment: Judgment) => void) | undefined;
}

/** Runs the original items and every probe through one graph and scores each probe against its gate. */
export async function runProbes(options: ProbeOptions): Promise<ProbeResults> {
  const { items, graph } = options;
  const gates = options.gates ?? DEFAULT_GATES;
  const cases = buildCases(items);
  const judgments: (Judgment | undefined)[] = new Array<Judgment | undefined>(cases.length);
  const progress =
    options.progress === undefined
      ? undefined
      : createProgress({ total: cases.length, label: 'probe', stream: options.progress });
  await runPool(
    cases.map((c, i) => ({ c, i })),
    options.concurrency ?? 8,
    async ({ c, i }) => {
      const item = items[c.index];
      if (item === undefined) return;
      const judgment = await judgeOnce(graph, { ...toInput(item), candidate: c.candidate }, options.router, {
        deadlineMs: options.deadlineMs ?? DEFAULT_DEADLINE_MS,
        signal: options.signal,
        limits: options.limits,
      });
      judgments[i] = judgment;
      options.onCase?.(c, judgment);
      progress?.tick();
    },
    options.signal,
  );
  progress?.done();
  if (options.signal?.aborted === true) throw new Error('probe run interrupted');

  return scoreProbes({
    items,
    cases,
    outcomes: judgments,
    gates,
    graph: { name: graph.name, hash: graph.hash },
    backend: options.router.name,
  });
}
