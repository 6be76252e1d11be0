/**
 * What the ablation CLIs (ablate, probe, evaluate, calibrate) share: options and their parsing, dataset and
 * backend set-up, interrupts, the exit path.
 */
import type { Config } from '../config.js';
import { createOfflineBackend } from '../judge/backends/offline.js';
import { graphWarnings, type CompiledGraph } from '../judge/graph.js';
import { createRouter } from '../judge/routing.js';
import type { Router } from '../judge/types.js';
import { loadDataset, type Dataset, type InvalidLine } from './dataset.js';
import { DEFAULT_DEADLINE_MS } from './pool.js';
import type { ResumableRun } from './types.js';

/** The options `ablate` and `probe` both take (node:util parseArgs format). */
export const RUN_OPTIONS = {
  dataset: { type: 'string' },
  out: { type: 'string' },
  limit: { type: 'string' },
  concurrency: { type: 'string' },
  'deadline-ms': { type: 'string' },
  'skip-invalid': { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false },
} as const;

/** Usage lines of RUN_OPTIONS (without --dataset and --out, which each usage line names). */
export const RUN_USAGE = `  --limit N            only the first N items of the dataset
  --concurrency C      judgments in flight (default 8)
  --deadline-ms MS     per-judgment deadline (default ${DEFAULT_DEADLINE_MS})
  --skip-invalid       skip (and list) invalid dataset lines instead of stopping`;

export interface RunSettings {
  dataset: string;
  out: string;
  limit: number | undefined;
  concurrency: number;
  deadlineMs: number;
  skipInvalid: boolean;
}

/**
 * The validated RUN_OPTIONS, or the exit code when there is nothing to run: 0 after printing `usage`
 * for --help, 2 after printing it to stderr when --dataset or --out is missing.
 */
export function runSettings(
  values: {
    dataset?: string | undefined;
    out?: string | undefined;
    limit?: string | undefined;
    concurrency?: string | undefined;
    'deadline-ms'?: string | undefined;
    'skip-invalid'?: boolean | undefined;
    help?: boolean | undefined;
  },
  usage: string,
): RunSettings | number {
  if (values.help === true) {
    console.log(usage);
    return 0;
  }
  if (values.dataset === undefined || values.out === undefined) {
    console.error(usage);
    return 2;
  }
  return {
    dataset: values.dataset,
    out: values.out,
    limit: values.limit === undefined ? undefined : intOption('limit', values.limit, 0),
    concurrency: intOption('concurrency', values.concurrency, 8),
    deadlineMs: intOption('deadline-ms', values['deadline-ms'], DEFAULT_DEADLINE_MS),
    skipInvalid: values['skip-invalid'] === true,
  };
}

/** An integer CLI option ≥ `min`, or `fallback` when absent; throws a message naming the flag. */
export function intOption(name: string, value: string | undefined, fallback: number, min = 1): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < min)
    throw new Error(`--${name} must be an integer ≥ ${min}, got "${value}"`);
  return n;
}

/** A comma-separated option's entries, trimmed, empty ones dropped. */
export function listOption(value: string): string[] {
  return value
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/** Lists on stderr every line of `path` skipped under `--skip-invalid`. */
export function listSkipped(path: string, invalid: readonly InvalidLine[]): void {
  for (const bad of invalid) {
    console.error(`skipped ${path}:${bad.line}: field "${bad.field}": ${bad.message}`);
  }
}

/** Loads a labelled set; every skipped line (with `--skip-invalid`) is listed on stderr. */
export async function loadDatasetListingSkips(path: string, skipInvalid: boolean): Promise<Dataset> {
  const dataset = await loadDataset(path, { skipInvalid });
  listSkipped(path, dataset.invalid);
  return dataset;
}

/** Prints on stderr, before a run, what each graph's author should know (e.g. a majority that can tie). */
export function warnGraphs(graphs: readonly { label: string; graph: CompiledGraph }[]): void {
  for (const { label, graph } of graphs) {
    for (const w of graphWarnings(graph)) console.error(`WARNING: ${label}: ${w}`);
  }
}

/** The configured backend (offline unless JUDGE_BASE_URL is set), saying so loudly when offline. */
export function openRouter(config: Config): Router {
  const router = createRouter({ ...config.judge, offline: createOfflineBackend });
  if (router.name === 'offline') {
    console.error('backend: offline (deterministic term-overlap heuristic, NOT an LLM judge)');
  }
  return router;
}

/**
 * SIGINT/SIGTERM handling for the resumable CLIs: the first signal aborts `signal` (in-flight work
 * finishes and is kept, so rerunning the command resumes), a second exits 130 at once. `dispose` removes
 * the handlers.
 */
export function handleInterrupts(unit: string): { signal: AbortSignal; dispose(): void } {
  const controller = new AbortController();
  const onSignal = (): void => {
    if (controller.signal.aborted) process.exit(130);
    console.error(`\ninterrupted: finishing in-flight ${unit} (Ctrl-C again to quit now)`);
    controller.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return {
    signal: controller.signal,
    dispose: () => {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    },
  };
}

/**
 * Runs `body` under `handleInterrupts(unit)` (its signal is the one `body` gets) and closes the router's
 * backends once it ends, however it ends.
 */
export async function withInterrupts<T>(
  unit: string,
  router: Router,
  body: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const interrupts = handleInterrupts(unit);
  try {
    return await body(interrupts.signal);
  } finally {
    interrupts.dispose();
    await closeRouter(router);
  }
}

/**
 * The exit of a resumable CLI: 130 and how to resume when the run was interrupted; else the counts on
 * stderr (`N <unit> <verb>, M reused from <records>`), `render(results)` and the files written on stdout, 0.
 */
export function finishResumable<R>(
  run: ResumableRun<R>,
  words: { unit: string; verb: string; records: string },
  render: (results: R) => string,
): number {
  if (!run.completed || run.results === null) {
    console.error(`stopped after ${run.ran} new ${words.unit}; rerun the same command to resume.`);
    return 130;
  }
  console.error(`${run.ran} ${words.unit} ${words.verb}, ${run.reused} reused from ${words.records}`);
  console.log(render(run.results));
  console.log(`written: ${run.files.join(', ')}`);
  return 0;
}

export async function closeRouter(router: Router): Promise<void> {
  for (const backend of router.backends()) await backend.close?.();
}

/** Runs a CLI's main: its result is the exit code; an error prints its message and exits 1. */
export function runMain(main: () => Promise<number>): void {
  main().then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      console.error(err instanceof Error ? err.message : String(err));
      process.exitCode = 1;
    },
  );
}
