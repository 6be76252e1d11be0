/**
 * A calibration run: the graphs run over the dataset through the ablation runner (resumable, in
 * `OUT/runs/`), then every member is calibrated from the stored records; writes `calibration.json`
 * and `report.md` to OUT, and with `--plan` the chosen committee as `committee.graph.json` beside the
 * held-out items (`holdout.jsonl`) the printed `npm run ablate` command evaluates it on.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PROMPT_VERSION } from '../../roles/index.js';
import { clusterIndex, type Dataset, type DatasetItem } from '../dataset.js';
import type { GraphEntry, RunOptions } from '../types.js';
import { runAblation } from '../ablate/runner.js';
import { calibrate, type CalibrationResults, type EmittedGraph } from './analyze.js';
import { ablateCommand, COMMITTEE_EVAL_DIR, COMMITTEE_GRAPH_FILE, HOLDOUT_FILE } from './emit.js';
import { HOLDOUT_FRACTION, splitByCluster, type ItemSplit } from './holdout.js';
import { voteTable, type GraphRun } from './members.js';
import { renderCalibrationReport } from './report.js';

/** Bootstrap resamples for each pairwise φ interval (pairs grow as members², so fewer than the ablation's 2000). */
export const PHI_RESAMPLES = 1000;

export interface CalibrationOptions extends RunOptions {
  dataset: Dataset;
  entries: readonly GraphEntry[];
  /** Use only the first N items of the dataset. */
  limit?: number | undefined;
  costFp?: number | undefined;
  costFn?: number | undefined;
  usdPerMillionTokens?: number | undefined;
  plan?: { budget: number; size: number } | undefined;
  suggest?: boolean | undefined;
  /** Share of the ground-truth clusters held out from `plan` and `suggest` (default 0.5). */
  holdout?: number | undefined;
}

export interface CalibrationRun {
  completed: boolean;
  results: CalibrationResults | null;
  files: string[];
}

export async function runCalibration(options: CalibrationOptions): Promise<CalibrationRun> {
  const runsDir = join(options.outDir, 'runs');
  await mkdir(runsDir, { recursive: true });
  const ablation = await runAblation({
    dataset: options.dataset,
    entries: options.entries,
    router: options.router,
    outDir: runsDir,
    concurrency: options.concurrency,
    deadlineMs: options.deadlineMs,
    seed: options.seed,
    limit: options.limit,
    reference: null,
    baseline: false,
    limits: options.limits,
    signal: options.signal,
    progress: options.progress,
  });
  if (!ablation.completed) return { completed: false, results: null, files: ablation.files };
  const items =
    options.limit === undefined ? options.dataset.items : options.dataset.items.slice(0, options.limit);
  // The records runAblation already holds, aligned with `items` (no second read of items.jsonl).
  const runs: GraphRun[] = options.entries.map((entry) => {
    const records = ablation.outcomes.get(entry.label);
    if (records === undefined) throw new Error(`no result for ${entry.label}`);
    return { label: entry.label, graph: entry.graph, records };
  });
  const table = voteTable(runs, items, clusterIndex(items));
  const seed = options.seed ?? 1;
  // One split for the choice, its held-out scores and the held-out items written for the emitted graph.
  const split =
    options.plan === undefined && options.suggest !== true
      ? undefined
      : splitByCluster(items, seed, options.holdout ?? HOLDOUT_FRACTION);
  const results = calibrate({
    table,
    runs,
    backend: options.router.name,
    promptVersion: PROMPT_VERSION,
    datasetSha256: options.dataset.sha256,
    seed,
    resamples: options.resamples ?? PHI_RESAMPLES,
    costFp: options.costFp,
    costFn: options.costFn,
    usdPerMillionTokens: options.usdPerMillionTokens,
    plan: options.plan,
    suggest: options.suggest,
    split,
  });
  results.committeeGraph = await writeCommitteeGraph(results, items, split, options.outDir, seed);
  const files = { json: join(options.outDir, 'calibration.json'), report: join(options.outDir, 'report.md') };
  await writeFile(files.json, `${JSON.stringify(results, null, 2)}\n`);
  await writeFile(files.report, renderCalibrationReport(results));
  const emitted =
    results.committeeGraph === null ? [] : [results.committeeGraph.file, results.committeeGraph.dataset];
  return { completed: true, results, files: [...Object.values(files), ...emitted, ...ablation.files] };
}

/** Writes the plan's graph and the held-out items it is to be evaluated on; null without a planned committee. */
async function writeCommitteeGraph(
  results: CalibrationResults,
  items: readonly DatasetItem[],
  split: ItemSplit | undefined,
  outDir: string,
  seed: number,
): Promise<EmittedGraph | null> {
  const graph = results.plan?.graph;
  if (graph == null || split === undefined) return null;
  const { heldOut } = split;
  const paths = {
    graph: join(outDir, COMMITTEE_GRAPH_FILE),
    dataset: join(outDir, HOLDOUT_FILE),
    out: join(outDir, COMMITTEE_EVAL_DIR),
  };
  await writeFile(paths.graph, `${JSON.stringify(graph.spec, null, 2)}\n`);
  await writeFile(paths.dataset, heldOut.map((i) => `${JSON.stringify(items[i])}\n`).join(''));
  return { file: paths.graph, dataset: paths.dataset, command: ablateCommand(paths, seed) };
}
