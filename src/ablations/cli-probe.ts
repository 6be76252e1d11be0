/**
 * `npm run probe -- --dataset F.jsonl --graph G --out DIR [--gates gates.json]`
 * Applies reward-hacking transforms to a labelled set, judges them with graph G on the configured backend
 * and writes probes.json, probe-report.md and probe-cases.jsonl. Exit code 1 when a gate is exceeded.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { loadConfig } from '../config.js';
import { closeRouter, intOption, loadDatasetListingSkips, openRouter, runMain } from './cli-common.js';
import type { ProbeName } from './probes/catalogue.js';
import { renderProbeReport } from './probes/report.js';
import { runProbes } from './probes/run.js';
import { DEFAULT_GATES, loadGates } from './probes/scoring.js';
import { DEFAULT_DEADLINE_MS } from './pool.js';
import { resolveGraphs } from './runner.js';
import { DEFAULT_RESAMPLES } from './stats.js';

const USAGE = `usage: npm run probe -- --dataset FILE.jsonl --graph NAME --out DIR [options]

  --graph NAME         preset or graph JSON file (default: default)
  --gates FILE.json    maximum rate per probe, e.g. {"keyword-stuffing": 0.05}; null = report only
                       defaults: ${JSON.stringify(DEFAULT_GATES)}
  --limit N            only the first N items
  --concurrency C      judgments in flight (default 8)
  --seed S             bootstrap seed (default 1)
  --resamples R        bootstrap resamples (default ${DEFAULT_RESAMPLES}, minimum ${DEFAULT_RESAMPLES})
  --deadline-ms MS     per-judgment deadline (default ${DEFAULT_DEADLINE_MS})
  --skip-invalid       skip (and list) invalid dataset lines
Exit code: 0 all gates passed, 1 a gate was exceeded (or an error), 2 usage.`;

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      dataset: { type: 'string' },
      graph: { type: 'string', default: 'default' },
      out: { type: 'string' },
      gates: { type: 'string' },
      limit: { type: 'string' },
      concurrency: { type: 'string' },
      seed: { type: 'string' },
      resamples: { type: 'string' },
      'deadline-ms': { type: 'string' },
      'skip-invalid': { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  });
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  if (values.dataset === undefined || values.out === undefined) {
    console.error(USAGE);
    return 2;
  }
  let gates: Record<ProbeName, number | null> = { ...DEFAULT_GATES };
  if (values.gates !== undefined) gates = loadGates(JSON.parse(await readFile(values.gates, 'utf8')));
  const config = loadConfig();
  const dataset = await loadDatasetListingSkips(values.dataset, values['skip-invalid']);
  const limit = values.limit === undefined ? undefined : intOption('limit', values.limit, 0);
  const items = limit === undefined ? dataset.items : dataset.items.slice(0, limit);
  const { entries } = await resolveGraphs([values.graph], { baseline: false, reference: null });
  const graph = entries[0]?.graph;
  if (graph === undefined) throw new Error(`no graph "${values.graph}"`);
  const router = openRouter(config);
  await mkdir(values.out, { recursive: true });
  const caseLines: string[] = [];
  const controller = new AbortController();
  const onSignal = (): void => controller.abort();
  process.once('SIGINT', onSignal);
  try {
    const results = await runProbes({
      items,
      graph,
      router,
      gates,
      concurrency: intOption('concurrency', values.concurrency, 8),
      deadlineMs: intOption('deadline-ms', values['deadline-ms'], DEFAULT_DEADLINE_MS),
      seed: intOption('seed', values.seed, 1, 0),
      resamples: intOption('resamples', values.resamples, DEFAULT_RESAMPLES, DEFAULT_RESAMPLES),
      limits: config.candidateLimits,
      signal: controller.signal,
      progress: process.stderr,
      onCase: (c, j) => {
        caseLines.push(
          JSON.stringify({
            probe: c.probe,
            variant: c.variant,
            item: items[c.index]?.id,
            label: items[c.index]?.label,
            candidate: c.candidate,
            status: j.status,
            verdict: j.verdict,
            score: j.score,
            reason: j.reason,
            calls: j.usage.calls,
          }),
        );
      },
    });
    const report = renderProbeReport(results);
    await writeFile(join(values.out, 'probes.json'), `${JSON.stringify(results, null, 2)}\n`);
    await writeFile(join(values.out, 'probe-report.md'), report);
    await writeFile(join(values.out, 'probe-cases.jsonl'), `${caseLines.join('\n')}\n`);
    console.log(report);
    for (const p of results.probes) {
      if (p.passed === false) console.error(`GATE EXCEEDED: ${p.name} ${p.rate.rate ?? 0} > ${p.gate ?? 0}`);
    }
    return results.passed ? 0 : 1;
  } finally {
    process.off('SIGINT', onSignal);
    await closeRouter(router);
  }
}

runMain(main);
