/**
 * `npm run ablate -- --dataset F.jsonl --graphs a,b --out DIR [--limit N] [--concurrency C] [--seed S]`
 * Runs judge graphs over a labelled set on the configured backend (offline unless JUDGE_BASE_URL is set)
 * and writes items.jsonl, results.json (with its manifest), timing.json, report.md, transcripts.html and SVG
 * plots to DIR — or to DIR/run-N when DIR holds a finished run. Resumable; `--max-tokens` caps a session.
 * `--canary-reference FILE` also writes the serving graph's per-row outcomes as a CANARY_REFERENCE.
 */
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { loadConfig } from '../../config.js';
import {
  finishResumable,
  intOption,
  listOption,
  loadDatasetListingSkips,
  openRouter,
  RUN_OPTIONS,
  RUN_USAGE,
  runMain,
  runSettings,
  withInterrupts,
} from '../cli-common.js';
import { RESEARCH_OPTIONS, RESEARCH_USAGE, researchSession } from '../cli-session.js';
import { writeCanaryReference } from './canary-reference.js';
import { parseEffortMix } from './effort-variants.js';
import { renderSummary } from './report.js';
import { resolveGraphs, runAblation } from './runner.js';
import { DEFAULT_RESAMPLES } from '../stats/clustered.js';

const USAGE = `usage: npm run ablate -- --dataset FILE.jsonl --out DIR [options]

  --graphs a,b,c       presets or graph JSON files (default: default)
  --reasoning-effort M a variant of every graph with these efforts, e.g. analyst=low,evaluator=high
                       (by node id, role, or all=EFFORT); repeat for several mixes
  --out DIR            output directory; rerunning with the same DIR resumes
${RUN_USAGE}
${RESEARCH_USAGE}
  --seed S             seeds the fence nonces (same seed, same prompts) and the bootstrap (default 1)
  --epochs N           judge every item N times, each with its own nonce; reports between-epoch spread
  --resamples R        bootstrap resamples (default ${DEFAULT_RESAMPLES}, minimum ${DEFAULT_RESAMPLES})
  --reference NAME     graph for paired comparisons, added if missing (default: default; "none" to skip)
  --no-baseline        do not add the equal-budget vote-N baseline
  --retry-failed       re-run items whose stored result is a failure
  --canary-reference F write the canary graph's per-row outcomes to F, for the server's CANARY_REFERENCE
                       (run it on the CANARY_DATASET file, against the judge that will serve)
  --canary-graph NAME  the graph the server's canaries judge (default: DEFAULT_GRAPH, as the server reads it)
Backend: JUDGE_BASE_URL / JUDGE_MODEL / REWARD_CONFIG as for the server (offline when unset).`;

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      ...RUN_OPTIONS,
      ...RESEARCH_OPTIONS,
      seed: { type: 'string' },
      epochs: { type: 'string' },
      resamples: { type: 'string' },
      graphs: { type: 'string', default: 'default' },
      reference: { type: 'string', default: 'default' },
      'no-baseline': { type: 'boolean', default: false },
      'retry-failed': { type: 'boolean', default: false },
      'canary-reference': { type: 'string' },
      'canary-graph': { type: 'string' },
      'reasoning-effort': { type: 'string', multiple: true },
    },
    strict: true,
    allowPositionals: false,
  });
  const settings = runSettings(values, USAGE);
  if (typeof settings === 'number') return settings;
  const { limit } = settings;
  const seed = intOption('seed', values.seed, 1, 0);
  const epochs = intOption('epochs', values.epochs, 1);
  const resamples = intOption('resamples', values.resamples, DEFAULT_RESAMPLES, DEFAULT_RESAMPLES);
  const config = loadConfig();
  const dataset = await loadDatasetListingSkips(settings.dataset, settings.skipInvalid);
  const asked = listOption(values.graphs);
  const canaryGraph = values['canary-graph'] ?? config.defaultGraph;
  const canaryOut = values['canary-reference'];
  const names = canaryOut === undefined || asked.includes(canaryGraph) ? asked : [...asked, canaryGraph];
  const { entries, reference } = await resolveGraphs(names, {
    reference: values.reference === 'none' ? null : values.reference,
    efforts: (values['reasoning-effort'] ?? []).map(parseEffortMix),
  });
  const items = limit === undefined ? dataset.items : dataset.items.slice(0, limit);
  const session = await researchSession(values, {
    script: 'ablate',
    out: settings.out,
    graphs: entries,
    items,
    judgmentsPerGraph: items.length * epochs,
    concurrency: settings.concurrency,
    baselines: !values['no-baseline'],
    transcriptsPath: config.transcriptsPath,
    manifest: {
      limit: limit ?? null,
      epochs,
      seed,
      dataset: settings.dataset,
      dataset_sha256: dataset.sha256,
    },
  });
  if (session === null) return 0;
  const router = openRouter(config);
  console.error(
    `graphs: ${entries.map((e) => `${e.label}${e.auto ? '*' : ''}`).join(', ')} · items: ${items.length}` +
      `${epochs > 1 ? ` × ${epochs} epochs` : ''} · out: ${session.out}`,
  );

  return withInterrupts('judgments', router, async (signal) => {
    const run = await runAblation({
      dataset,
      entries,
      router,
      outDir: session.out,
      concurrency: settings.concurrency,
      deadlineMs: settings.deadlineMs,
      seed,
      epochs,
      resamples,
      limit,
      reference,
      baseline: !values['no-baseline'],
      limits: config.candidateLimits,
      reasoningFormat: config.reasoningFormat,
      retryFailed: values['retry-failed'],
      signal,
      stop: session.stop,
      meter: session.meter,
      cache: session.cache,
      onRecord: session.onRecord,
      manifest: (all, records) => session.manifest(all, router, config.judge, records),
      progress: process.stderr,
    });
    await session.close(run.completed ? join(session.out, 'transcripts.html') : null, run.files);
    if (run.badLines.length > 0) {
      console.error(
        `ignored ${run.badLines.length} unreadable items.jsonl lines: ${run.badLines.slice(0, 10).join(', ')}`,
      );
    }
    const canaryEntry = entries.find((e) => e.label === canaryGraph || e.aliases.includes(canaryGraph));
    const records = canaryEntry === undefined ? undefined : run.outcomes.get(canaryEntry.label);
    if (canaryOut !== undefined && canaryEntry !== undefined && records !== undefined && run.completed) {
      console.error(
        await writeCanaryReference(canaryOut, {
          graph: canaryEntry.graph,
          router,
          items,
          records,
          dataset: { path: settings.dataset, sha256: dataset.sha256 },
        }),
      );
    }
    return session.finish(
      finishResumable(
        run,
        { unit: 'judgments', verb: 'run', records: join(session.out, 'items.jsonl') },
        renderSummary,
      ),
    );
  });
}

runMain(main);
