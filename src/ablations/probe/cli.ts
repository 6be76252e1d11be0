/**
 * `npm run probe -- --dataset F.jsonl --graph G --out DIR [--gates gates.json]`
 * Applies reward-hacking transforms to a labelled set, judges them with graph G on the configured backend
 * and writes probes.json (with its manifest), probe-report.md and probe-cases.jsonl (appended as cases are
 * judged: rerunning the same command resumes) to DIR — or to DIR/run-N when DIR holds a finished run.
 * `--max-tokens` / `--max-usd` cap a session, `--dry-run` prints the estimate. Exit code 1 when a gate is
 * exceeded, 3 when the spend cap stopped the run.
 */
import { writeFile, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { loadConfig, type Config } from '../../config.js';
import type { Router } from '../../judge/types.js';
import {
  finishResumable,
  loadDatasetListingSkips,
  openRouter,
  RUN_OPTIONS,
  RUN_USAGE,
  runMain,
  runSettings,
  withInterrupts,
} from '../cli-common.js';
import { RESEARCH_OPTIONS, RESEARCH_USAGE, researchSession, type ResearchSession } from '../cli-session.js';
import type { DatasetItem } from '../dataset.js';
import type { GraphEntry, ResumableRun } from '../types.js';
import { buildCases, type ProbeCase, type ProbeName } from './catalogue.js';
import { renderProbeReport, resultText } from './report.js';
import { runProbeCases } from './run.js';
import { DEFAULT_GATES, loadGates, type ProbeResults } from './scoring.js';
import { resolveGraphs } from '../ablate/runner.js';

const USAGE = `usage: npm run probe -- --dataset FILE.jsonl --graph NAME --out DIR [options]

  --graph NAME         preset or graph JSON file (default: default)
  --gates FILE.json    maximum rate per probe, e.g. {"keyword-stuffing": 0.05}; null = report only
                       defaults: ${JSON.stringify(DEFAULT_GATES)}
  --out DIR            output directory; rerunning with the same DIR resumes (a finished run is kept)
${RUN_USAGE}
${RESEARCH_USAGE}
Exit code: 0 every gate passed, 1 a gate failed or was inconclusive, a probe had no decided case, or an
error; 2 usage; 3 the spend cap stopped the run (rerun to resume); 130 interrupted. A gate passes only when
the upper bound of the rate's exact 95% interval is ≤ the gate.`;

/** Every judged case, appended as it arrives (a rerun resumes from it). */
const CASES_FILE = 'probe-cases.jsonl';

/** Cases the dry-run estimate judges offline: spread over the catalogue (probes differ in length and calls). */
const ESTIMATE_SAMPLE = 20;

/** `ESTIMATE_SAMPLE` cases spread evenly over `cases`, each as the item it judges. */
function estimateItems(items: readonly DatasetItem[], cases: readonly ProbeCase[]): DatasetItem[] {
  const step = Math.max(1, Math.floor(cases.length / ESTIMATE_SAMPLE));
  return cases
    .filter((_, i) => i % step === 0)
    .slice(0, ESTIMATE_SAMPLE)
    .flatMap((c) => {
      const item = items[c.index];
      return item === undefined ? [] : [{ ...item, candidate: c.candidate }];
    });
}

/** Writes the finished run's files, prints the report and the gates; the exit code of the gates. */
async function finishProbe(
  run: ResumableRun<ProbeResults> & { results: ProbeResults },
  out: string,
  records: string,
  manifest: Record<string, unknown>,
): Promise<number> {
  const results: ProbeResults = {
    ...run.results,
    manifest: { ...manifest, finished_at: new Date().toISOString() },
  };
  const files = { json: join(out, 'probes.json'), report: join(out, 'probe-report.md') };
  await writeFile(files.json, `${JSON.stringify(results, null, 2)}\n`);
  await writeFile(files.report, renderProbeReport(results));
  finishResumable(
    { ...run, results, files: [...run.files, files.json, files.report] },
    { unit: 'cases', verb: 'judged', records },
    renderProbeReport,
  );
  for (const p of results.probes) {
    if (p.passed === false)
      console.error(`GATE NOT PASSED: ${p.name}: ${resultText(p).replace(/\*\*/g, '')}`);
  }
  return results.passed ? 0 : 1;
}

/** Judges the cases under the session (cap, cache, run directory) and finishes the run. */
async function judge(
  session: ResearchSession,
  entry: GraphEntry,
  items: readonly DatasetItem[],
  gates: Record<ProbeName, number | null>,
  settings: { concurrency: number; deadlineMs: number },
  config: Config,
  router: Router,
): Promise<number> {
  const records = join(session.out, CASES_FILE);
  return withInterrupts('cases', router, async (signal) => {
    const run = await runProbeCases({
      items,
      graph: entry.graph,
      router,
      gates,
      concurrency: settings.concurrency,
      deadlineMs: settings.deadlineMs,
      limits: config.candidateLimits,
      reasoningFormat: config.reasoningFormat,
      signal,
      progress: process.stderr,
      recordsPath: records,
      stop: session.stop,
      meter: session.meter,
      cache: session.cache,
    });
    await session.close(null, run.files);
    if (run.badLines.length > 0) {
      console.error(`ignored ${run.badLines.length} unreadable ${CASES_FILE} lines`);
    }
    if (run.results === null) {
      return session.finish(
        finishResumable(run, { unit: 'cases', verb: 'judged', records }, renderProbeReport),
      );
    }
    const manifest = session.manifest([entry], router, config.judge, []);
    return finishProbe({ ...run, results: run.results }, session.out, records, manifest);
  });
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      ...RUN_OPTIONS,
      ...RESEARCH_OPTIONS,
      graph: { type: 'string', default: 'default' },
      gates: { type: 'string' },
    },
    strict: true,
  });
  const settings = runSettings(values, USAGE);
  if (typeof settings === 'number') return settings;
  let gates: Record<ProbeName, number | null> = { ...DEFAULT_GATES };
  if (values.gates !== undefined) gates = loadGates(JSON.parse(await readFile(values.gates, 'utf8')));
  const config = loadConfig();
  const dataset = await loadDatasetListingSkips(settings.dataset, settings.skipInvalid);
  const items = settings.limit === undefined ? dataset.items : dataset.items.slice(0, settings.limit);
  const { entries } = await resolveGraphs([values.graph], { reference: null });
  const entry = entries[0];
  if (entry === undefined) throw new Error(`no graph "${values.graph}"`);
  const cases = buildCases(items);
  const session = await researchSession(values, {
    script: 'probe',
    out: settings.out,
    finished: 'probes.json',
    graphs: [entry],
    items: estimateItems(items, cases),
    sample: ESTIMATE_SAMPLE,
    judgmentsPerGraph: cases.length,
    concurrency: settings.concurrency,
    baselines: false,
    manifest: {
      limit: settings.limit ?? null,
      epochs: 1,
      seed: null,
      dataset: settings.dataset,
      dataset_sha256: dataset.sha256,
    },
  });
  if (session === null) return 0;
  const router = openRouter(config);
  console.error(
    `graph: ${entry.label} · items: ${items.length} · cases: ${cases.length} · out: ${session.out}`,
  );
  return judge(session, entry, items, gates, settings, config, router);
}

runMain(main);
