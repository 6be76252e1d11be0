/**
 * `npm run probe -- --dataset F.jsonl --graph G --out DIR [--gates gates.json]`
 * Applies reward-hacking transforms to a labelled set, judges them with graph G on the configured backend
 * and writes probes.json, probe-report.md and probe-cases.jsonl. Exit code 1 when a gate is exceeded.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { loadConfig } from '../../config.js';
import {
  closeRouter,
  loadDatasetListingSkips,
  openRouter,
  RUN_OPTIONS,
  RUN_USAGE,
  runMain,
  runSettings,
} from '../cli-common.js';
import type { ProbeName } from './catalogue.js';
import { renderProbeReport, resultText } from './report.js';
import { runProbes } from './run.js';
import { DEFAULT_GATES, loadGates } from './scoring.js';
import { resolveGraphs } from '../ablate/runner.js';

const USAGE = `usage: npm run probe -- --dataset FILE.jsonl --graph NAME --out DIR [options]

  --graph NAME         preset or graph JSON file (default: default)
  --gates FILE.json    maximum rate per probe, e.g. {"keyword-stuffing": 0.05}; null = report only
                       defaults: ${JSON.stringify(DEFAULT_GATES)}
${RUN_USAGE}
Exit code: 0 every gate passed, 1 a gate failed or was inconclusive, a probe had no decided case, or an\nerror; 2 usage. A gate passes only when the upper bound of the rate's exact 95% interval is ≤ the gate.`;

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      ...RUN_OPTIONS,
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
  const graph = entries[0]?.graph;
  if (graph === undefined) throw new Error(`no graph "${values.graph}"`);
  const router = openRouter(config);
  await mkdir(settings.out, { recursive: true });
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
      concurrency: settings.concurrency,
      deadlineMs: settings.deadlineMs,
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
    await writeFile(join(settings.out, 'probes.json'), `${JSON.stringify(results, null, 2)}\n`);
    await writeFile(join(settings.out, 'probe-report.md'), report);
    await writeFile(join(settings.out, 'probe-cases.jsonl'), `${caseLines.join('\n')}\n`);
    console.log(report);
    for (const p of results.probes) {
      if (p.passed === false)
        console.error(`GATE NOT PASSED: ${p.name}: ${resultText(p).replace(/\*\*/g, '')}`);
    }
    return results.passed ? 0 : 1;
  } finally {
    process.off('SIGINT', onSignal);
    await closeRouter(router);
  }
}

runMain(main);
