/**
 * `npm run ablate -- --dataset F.jsonl --graphs a,b --out DIR [--limit N] [--concurrency C] [--seed S]`
 * Runs judge graphs over a labelled set on the configured backend (offline unless JUDGE_BASE_URL is set)
 * and writes items.jsonl, results.json, timing.json, report.md and SVG plots to DIR. Resumable.
 */
import { parseArgs } from 'node:util';
import { loadConfig } from '../config.js';
import { closeRouter, intOption, loadDatasetListingSkips, openRouter, runMain } from './cli-common.js';
import { renderSummary } from './report.js';
import { DEFAULT_DEADLINE_MS } from './pool.js';
import { resolveGraphs, runAblation } from './runner.js';
import { DEFAULT_RESAMPLES } from './stats.js';

const USAGE = `usage: npm run ablate -- --dataset FILE.jsonl --out DIR [options]

  --graphs a,b,c       presets or graph JSON files (default: default)
  --out DIR            output directory; rerunning with the same DIR resumes
  --limit N            only the first N items of the dataset
  --concurrency C      judgments in flight (default 8)
  --seed S             bootstrap seed (default 1)
  --resamples R        bootstrap resamples (default ${DEFAULT_RESAMPLES}, minimum ${DEFAULT_RESAMPLES})
  --deadline-ms MS     per-judgment deadline (default ${DEFAULT_DEADLINE_MS})
  --reference NAME     graph for paired comparisons, added if missing (default: default; "none" to skip)
  --no-baseline        do not add the equal-budget vote-N baseline
  --skip-invalid       skip (and list) invalid dataset lines instead of stopping
  --retry-failed       re-run items whose stored result is a failure
Backend: JUDGE_BASE_URL / JUDGE_MODEL / REWARD_CONFIG as for the server (offline when unset).`;

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      dataset: { type: 'string' },
      graphs: { type: 'string', default: 'default' },
      out: { type: 'string' },
      limit: { type: 'string' },
      concurrency: { type: 'string' },
      seed: { type: 'string' },
      resamples: { type: 'string' },
      'deadline-ms': { type: 'string' },
      reference: { type: 'string', default: 'default' },
      'no-baseline': { type: 'boolean', default: false },
      'skip-invalid': { type: 'boolean', default: false },
      'retry-failed': { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  if (values.dataset === undefined || values.out === undefined) {
    console.error(USAGE);
    return 2;
  }
  const limit = values.limit === undefined ? undefined : intOption('limit', values.limit, 0);
  const concurrency = intOption('concurrency', values.concurrency, 8);
  const seed = intOption('seed', values.seed, 1, 0);
  const resamples = intOption('resamples', values.resamples, DEFAULT_RESAMPLES, DEFAULT_RESAMPLES);
  const deadlineMs = intOption('deadline-ms', values['deadline-ms'], DEFAULT_DEADLINE_MS);

  const config = loadConfig();
  const dataset = await loadDatasetListingSkips(values.dataset, values['skip-invalid']);
  const names = values.graphs
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  const { entries, reference } = await resolveGraphs(names, {
    baseline: !values['no-baseline'],
    reference: values.reference === 'none' ? null : values.reference,
  });
  const router = openRouter(config);
  console.error(
    `graphs: ${entries.map((e) => `${e.label}${e.auto ? '*' : ''}`).join(', ')} · items: ${
      limit === undefined ? dataset.items.length : Math.min(limit, dataset.items.length)
    } · out: ${values.out}`,
  );

  const controller = new AbortController();
  const onSignal = (): void => {
    if (controller.signal.aborted) process.exit(130);
    console.error('\ninterrupted: finishing in-flight judgments (Ctrl-C again to quit now)');
    controller.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    const run = await runAblation({
      dataset,
      entries,
      router,
      outDir: values.out,
      concurrency,
      deadlineMs,
      seed,
      resamples,
      limit,
      reference,
      limits: config.candidateLimits,
      retryFailed: values['retry-failed'],
      signal: controller.signal,
      progress: process.stderr,
    });
    if (run.badLines.length > 0) {
      console.error(
        `ignored ${run.badLines.length} unreadable items.jsonl lines: ${run.badLines.slice(0, 10).join(', ')}`,
      );
    }
    if (!run.completed || run.results === null) {
      console.error(`stopped after ${run.ran} new judgments; rerun the same command to resume.`);
      return 130;
    }
    console.error(`${run.ran} judgments run, ${run.reused} reused from ${values.out}/items.jsonl`);
    console.log(renderSummary(run.results));
    console.log(`written: ${run.files.join(', ')}`);
    return 0;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await closeRouter(router);
  }
}

runMain(main);
