/** What the `ablate` and `probe` CLIs share: option parsing, dataset and backend set-up, the exit path. */
import type { Config } from '../config.js';
import { createOfflineBackend } from '../judge/backends/offline.js';
import { createRouter } from '../judge/routing.js';
import type { Router } from '../judge/types.js';
import { loadDataset, type Dataset } from './dataset.js';

/** An integer CLI option ≥ `min`, or `fallback` when absent; throws a message naming the flag. */
export function intOption(name: string, value: string | undefined, fallback: number, min = 1): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < min)
    throw new Error(`--${name} must be an integer ≥ ${min}, got "${value}"`);
  return n;
}

/** Loads a labelled set; every skipped line (with `--skip-invalid`) is listed on stderr. */
export async function loadDatasetListingSkips(path: string, skipInvalid: boolean): Promise<Dataset> {
  const dataset = await loadDataset(path, { skipInvalid });
  for (const bad of dataset.invalid) {
    console.error(`skipped ${path}:${bad.line}: field "${bad.field}": ${bad.message}`);
  }
  return dataset;
}

/** The configured backend (offline unless JUDGE_BASE_URL is set), saying so loudly when offline. */
export function openRouter(config: Config): Router {
  const router = createRouter({ ...config.judge, offline: createOfflineBackend });
  if (router.name === 'offline') {
    console.error('backend: offline (deterministic term-overlap heuristic, NOT an LLM judge)');
  }
  return router;
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
