/**
 * `npm run evaluate -- --input ideas.jsonl --out DIR [--criteria …] [--protocols …] [--limit N]`
 * The paper's absolute (1–5) and pairwise protocols over generated ideas on the configured backend (offline
 * unless JUDGE_BASE_URL is set); writes units.jsonl, results.json, report.md and evaluation.svg. Resumable.
 */
import { parseArgs } from 'node:util';

import { loadConfig } from '../../config.js';
import { CriterionName, PAPER_CRITERIA } from '../../roles/criteria.js';
import {
  finishResumable,
  intOption,
  listOption,
  listSkipped,
  openRouter,
  runMain,
  withInterrupts,
} from '../cli-common.js';
import { DEFAULT_EVALUATE_DEADLINE_MS, runEvaluation } from './run.js';
import { limitQuestions, loadEvaluateInput } from './input.js';
import { renderTable2 } from './report.js';
import { PROTOCOLS, type Protocol } from './stats.js';
import { DEFAULT_RESAMPLES } from '../stats/clustered.js';

const USAGE = `usage: npm run evaluate -- --input IDEAS.jsonl --out DIR [options]

  --input FILE         JSONL rows {question, system, idea, ground_truth?, human?, id?} (datasets/README.md)
  --out DIR            output directory; rerunning with the same DIR resumes
  --criteria a,b       of ${CriterionName.options.join(', ')} (default: ${PAPER_CRITERIA.join(',')}; match needs ground_truth)
  --protocols a,b      absolute, pairwise (default: both)
  --limit N            only the first N questions of the input (each with all its ideas)
  --concurrency C      units in flight (default 8)
  --seed S             bootstrap seed (default 1)
  --resamples R        bootstrap resamples (default ${DEFAULT_RESAMPLES}, minimum ${DEFAULT_RESAMPLES})
  --deadline-ms MS     per-unit deadline (default ${DEFAULT_EVALUATE_DEADLINE_MS})
  --skip-invalid       skip (and list) invalid input lines instead of stopping
  --retry-failed       re-run units whose stored result is a failure
Backend: JUDGE_BASE_URL / JUDGE_MODEL / REWARD_CONFIG as for the server (offline when unset).`;

function list<T extends string>(flag: string, value: string, allowed: readonly T[]): T[] {
  const out: T[] = [];
  for (const raw of listOption(value)) {
    const found = allowed.find((a) => a === raw);
    if (found === undefined) throw new Error(`--${flag}: unknown "${raw}" (known: ${allowed.join(', ')})`);
    if (!out.includes(found)) out.push(found);
  }
  return out;
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      input: { type: 'string' },
      out: { type: 'string' },
      criteria: { type: 'string', default: PAPER_CRITERIA.join(',') },
      protocols: { type: 'string', default: PROTOCOLS.join(',') },
      limit: { type: 'string' },
      concurrency: { type: 'string' },
      seed: { type: 'string' },
      resamples: { type: 'string' },
      'deadline-ms': { type: 'string' },
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
  if (values.input === undefined || values.out === undefined) {
    console.error(USAGE);
    return 2;
  }
  const out = values.out;
  const criteria = list('criteria', values.criteria, CriterionName.options);
  const protocols: Protocol[] = list('protocols', values.protocols, PROTOCOLS);
  const config = loadConfig();
  const limit = values.limit === undefined ? undefined : intOption('limit', values.limit, 0);
  const loaded = await loadEvaluateInput(values.input, { skipInvalid: values['skip-invalid'] });
  listSkipped(values.input, loaded.invalid);
  const input = limitQuestions(loaded, limit);
  const router = openRouter(config);
  console.error(
    `ideas: ${input.ideas.length} · questions: ${input.questions.length} · systems: ${input.systems.join(', ')} · out: ${out}`,
  );
  return withInterrupts('units', router, async (signal) => {
    const run = await runEvaluation({
      input,
      router,
      outDir: out,
      criteria,
      protocols,
      concurrency: intOption('concurrency', values.concurrency, 8),
      seed: intOption('seed', values.seed, 1, 0),
      resamples: intOption('resamples', values.resamples, DEFAULT_RESAMPLES, DEFAULT_RESAMPLES),
      deadlineMs: intOption('deadline-ms', values['deadline-ms'], DEFAULT_EVALUATE_DEADLINE_MS),
      limits: config.candidateLimits,
      retryFailed: values['retry-failed'],
      signal,
      progress: process.stderr,
    });
    if (run.badLines.length > 0) console.error(`ignored ${run.badLines.length} unreadable units.jsonl lines`);
    for (const w of run.results?.stats.warnings ?? []) console.error(`WARNING: ${w}`);
    return finishResumable(
      run,
      { unit: 'units', verb: 'judged', records: `${out}/units.jsonl` },
      renderTable2,
    );
  });
}

runMain(main);
