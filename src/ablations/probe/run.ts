/**
 * Runs the probe cases through one graph (bounded pool, per-case deadline) and scores them. With a records
 * file (`probe-cases.jsonl`) every judged case is appended as it arrives, so an interrupted or spend-capped
 * run resumes: the same command judges only the cases not in the file.
 */
import { mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import { z } from 'zod';
import type { ReasoningFormat } from '../../judge/candidate.js';
import type { CompiledGraph } from '../../judge/graph.js';
import { judgmentKey, keySettingsOf } from '../../judge/key.js';
import type { Judgment, Router } from '../../judge/types.js';
import type { DatasetItem } from '../dataset.js';
import { DEFAULT_DEADLINE_MS, judgeOnce, runResumable, toInput } from '../pool.js';
import type { ProgressStream } from '../progress.js';
import { isFailure, ItemRecord, loadJsonl } from '../records.js';
import { recordingRouter, type ResponseCache, type SpendMeter } from '../recording.js';
import type { ResumableRun } from '../types.js';
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
  /** REASONING_FORMAT, as serving has it (default `auto`). */
  reasoningFormat?: ReasoningFormat | undefined;
  signal?: AbortSignal | undefined;
  progress?: ProgressStream | undefined;
  /** Every case judged in this session. */
  onCase?: ((c: ProbeCase, judgment: Judgment) => void) | undefined;
  /** `probe-cases.jsonl`: judged cases are appended here and a rerun reuses them; none = in memory. */
  recordsPath?: string | undefined;
  /** Polled before each new case: true stops taking cases (a spend cap); cases in flight are kept. */
  stop?: (() => boolean) | undefined;
  /** Counts the tokens every call spends (the spend cap reads it). */
  meter?: SpendMeter | undefined;
  /** Answer repeated requests from this cache (shared across output folders; opt-in). */
  cache?: ResponseCache | undefined;
}

/** One line of `probe-cases.jsonl`: a judged case, what scoring reads of it and how to find it again. */
export const ProbeCaseRecord = z.object({
  v: z.literal(1),
  /** `caseId`: judgment key (graph, routes, prompt version, texts), probe, variant, item. */
  id: z.string(),
  probe: z.string(),
  variant: z.number().int().min(0),
  item: z.string(),
  label: z.union([z.literal(0), z.literal(1)]),
  candidate: z.string(),
  status: ItemRecord.shape.status,
  verdict: ItemRecord.shape.verdict,
  reward: ItemRecord.shape.reward,
  score: z.number().nullable(),
  reason: z.string().optional(),
  usage: z.object({
    calls: z.number().int().min(0),
    promptTokens: z.number().min(0),
    completionTokens: z.number().min(0),
  }),
});
export type ProbeCaseRecord = z.infer<typeof ProbeCaseRecord>;

/** A case's identity in `probe-cases.jsonl`: a resumed run reuses it only for the same graph, routes and texts. */
export function caseId(key: string, c: ProbeCase, itemId: string): string {
  return `${key}|${c.probe}|${c.variant}|${itemId}`;
}

interface Task {
  c: ProbeCase;
  item: DatasetItem;
  id: string;
}

async function judgeCase({ c, item, id }: Task, options: ProbeOptions): Promise<ProbeCaseRecord> {
  const router = recordingRouter(options.router, { calls: [], cache: options.cache, meter: options.meter });
  const judgment = await judgeOnce(options.graph, { ...toInput(item), candidate: c.candidate }, router, {
    deadlineMs: options.deadlineMs ?? DEFAULT_DEADLINE_MS,
    signal: options.signal,
    limits: options.limits,
    reasoningFormat: options.reasoningFormat,
  });
  options.onCase?.(c, judgment);
  const { calls, promptTokens, completionTokens } = judgment.usage;
  return {
    v: 1,
    id,
    probe: c.probe,
    variant: c.variant,
    item: item.id,
    label: item.label,
    candidate: c.candidate,
    status: judgment.status,
    verdict: judgment.verdict,
    reward: judgment.reward,
    score: judgment.score,
    ...(judgment.reason === undefined ? {} : { reason: judgment.reason }),
    usage: { calls, promptTokens, completionTokens },
  };
}

/**
 * Runs the original items, their placebos and every probe through one graph, appending each judged case to
 * `recordsPath` (when given) and reusing the cases already there; scores each probe against its gate once
 * every case is judged. `completed` is false when interrupted or stopped by the spend cap.
 */
export async function runProbeCases(options: ProbeOptions): Promise<ResumableRun<ProbeResults>> {
  const { items, graph } = options;
  const cases = buildCases(items);
  const settings = keySettingsOf(options);
  const tasks = cases.flatMap((c): Task[] => {
    const item = items[c.index];
    if (item === undefined) return [];
    const input = { ...toInput(item), candidate: c.candidate };
    return [{ c, item, id: caseId(judgmentKey(graph, input, options.router, settings, 'raw'), c, item.id) }];
  });
  const idOfCase = new Map(tasks.map((t) => [t.c, t.id]));
  const path = options.recordsPath;
  if (path !== undefined) await mkdir(dirname(path), { recursive: true });
  const loaded =
    path === undefined
      ? { records: new Map<string, ProbeCaseRecord>(), badLines: [] }
      : await loadJsonl(path, ProbeCaseRecord, (r) => r.id);
  const stored = loaded.records;
  const session = await runResumable(
    {
      tasks,
      idOf: (t) => t.id,
      stored,
      isFailure,
      path,
      label: 'probe',
      run: (task) => judgeCase(task, options),
    },
    options,
  );
  const files = path === undefined ? [] : [path];
  const run = { ...session, badLines: loaded.badLines, files };
  if (!session.completed) return { ...run, results: null };
  const results = scoreProbes({
    items,
    cases,
    outcomes: cases.map((c) => stored.get(idOfCase.get(c) ?? '')),
    gates: options.gates ?? DEFAULT_GATES,
    graph: { name: graph.name, hash: graph.hash },
    backend: options.router.name,
  });
  return { ...run, results };
}

/** Runs every probe case in memory and scores them; throws when interrupted. */
export async function runProbes(options: ProbeOptions): Promise<ProbeResults> {
  const run = await runProbeCases({ ...options, recordsPath: undefined });
  if (run.results === null) throw new Error('probe run interrupted');
  return run.results;
}
