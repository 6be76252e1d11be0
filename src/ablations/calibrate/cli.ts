/**
 * `npm run calibrate -- --dataset F.jsonl --graphs a,b --out DIR [--cost-fp X --cost-fn Y] [...]`
 * Runs the graphs over a labelled set (resumable, in DIR/runs) and calibrates every member alone, their
 * pairwise error correlation and Condorcet predictions beside the observed committees; writes
 * DIR/calibration.json and DIR/report.md. `--plan` chooses a committee on part of the ground-truth clusters,
 * scores it on the rest, writes it as DIR/committee.graph.json and prints the `ablate` command that runs it.
 */
import { parseArgs } from 'node:util';
import { loadConfig } from '../../config.js';
import {
  intOption,
  listOption,
  loadDatasetListingSkips,
  openRouter,
  RUN_OPTIONS,
  RUN_USAGE,
  runMain,
  runSettings,
  warnGraphs,
  withInterrupts,
} from '../cli-common.js';
import type { CalibrationResults } from './analyze.js';
import { HOLDOUT_FRACTION } from './holdout.js';
import { PHI_RESAMPLES, runCalibration } from './run.js';
import { resolveGraphs } from '../ablate/runner.js';

const USAGE = `usage: npm run calibrate -- --dataset FILE.jsonl --out DIR [options]

  --graphs a,b,c       presets or graph JSON files (default: vote-3,round-robin-3,proposer-critic)
  --out DIR            output directory; rerunning with the same DIR resumes
${RUN_USAGE}
  --seed S             seeds the fence nonces, the bootstrap and the held-out split (default 1)
  --resamples R        bootstrap resamples per pairwise φ interval (default ${PHI_RESAMPLES})
  --cost-fp USD        cost of acting on a false match (review impact)
  --cost-fn USD        cost of missing a true match (review impact)
  --usd-per-mtok USD   price per million tokens (money per correct judgment)
  --plan               propose the majority committee with the best predicted accuracy under --budget
  --budget X           budget per judgment (USD with --usd-per-mtok, else tokens)
  --plan-size K        seats in the planned committee (default 3)
  --suggest            name the strictness variant that moves each biased member toward balance
  --holdout F          share of the ground-truth clusters --plan and --suggest hold out: they choose on
                       the rest and are scored on these (default ${HOLDOUT_FRACTION})
Backend: JUDGE_BASE_URL / JUDGE_MODEL / REWARD_CONFIG as for the server (offline when unset).`;

function fractionOption(value: string | undefined): number {
  if (value === undefined) return HOLDOUT_FRACTION;
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0 || n >= 1)
    throw new Error(`--holdout must be between 0 and 1, got "${value}"`);
  return n;
}

function moneyOption(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0) throw new Error(`--${name} must be a number ≥ 0, got "${value}"`);
  return n;
}

function fixed3(x: number | null | undefined): string {
  return x == null ? '—' : x.toFixed(3);
}

function printPlan(r: CalibrationResults): void {
  const split = r.split;
  if (split !== null) {
    console.log(
      `split by ground-truth cluster (seed ${split.seed}): chosen on ${split.selection.items} items (${split.selection.clusters} clusters), scored on ${split.heldOut.items} held-out items (${split.heldOut.clusters} clusters)`,
    );
    for (const w of split.warnings) console.error(`warning: ${w}`);
  }
  const plan = r.plan;
  if (plan?.best == null) return;
  const held = plan.heldOut.best?.accuracy;
  console.log(
    `plan: ${plan.best.members.join(' + ')} (accuracy ${plan.best.predicted.accuracy.toFixed(3)} on the items it was chosen on; held-out ${fixed3(held?.rate)} [${fixed3(held?.lo)}, ${fixed3(held?.hi)}]; held-out decorrelation gain ${fixed3(plan.heldOut.decorrelationGain)})`,
  );
  if (r.committeeGraph != null) {
    console.log(`committee graph: ${r.committeeGraph.file}; evaluate it on the held-out items with:`);
    console.log(`  ${r.committeeGraph.command}`);
  }
}

function printResults(r: CalibrationResults): void {
  for (const c of r.committees) {
    const i = c.check.independent;
    const b = c.check.beta_binomial;
    console.log(
      `${c.graph}: observed accuracy ${c.observed.accuracy.rate?.toFixed(3) ?? '—'} [${c.observed.accuracy.lo?.toFixed(3) ?? '—'}, ${c.observed.accuracy.hi?.toFixed(3) ?? '—'}]; independent ${i.accuracy?.toFixed(3) ?? '—'}${i.overPromises === true ? ' (over-promises)' : ''}; beta-binomial ${b.accuracy?.toFixed(3) ?? '—'}${b.inside === true ? ' (inside CI)' : ''}`,
    );
  }
  printPlan(r);
  for (const s of r.suggestions ?? []) {
    const held =
      s.heldOut === null
        ? ''
        : `; held out: ${s.heldOut.bias ?? '—'}${s.heldOut.confirmed ? ' (confirmed)' : ''}`;
    console.log(`suggest: ${s.member} (${s.bias}) → strictness "${s.suggested}"${held}`);
  }
  if (r.cheapest !== null) console.log(`cheapest overall (review impact): ${r.cheapest}`);
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      ...RUN_OPTIONS,
      graphs: { type: 'string', default: 'vote-3,round-robin-3,proposer-critic' },
      seed: { type: 'string' },
      resamples: { type: 'string' },
      'cost-fp': { type: 'string' },
      'cost-fn': { type: 'string' },
      'usd-per-mtok': { type: 'string' },
      plan: { type: 'boolean', default: false },
      suggest: { type: 'boolean', default: false },
      budget: { type: 'string' },
      'plan-size': { type: 'string' },
      holdout: { type: 'string' },
    },
    strict: true,
    allowPositionals: false,
  });
  const settings = runSettings(values, USAGE);
  if (typeof settings === 'number') return settings;
  const budget = moneyOption('budget', values.budget);
  if (values.plan && budget === undefined) {
    console.error('--plan needs --budget');
    return 2;
  }
  const plan =
    values.plan && budget !== undefined
      ? { budget, size: intOption('plan-size', values['plan-size'], 3) }
      : undefined;
  const config = loadConfig();
  const dataset = await loadDatasetListingSkips(settings.dataset, settings.skipInvalid);
  const names = listOption(values.graphs);
  const { entries } = await resolveGraphs(names, { reference: null });
  warnGraphs(entries);
  const router = openRouter(config);
  return withInterrupts('judgments', router, async (signal) => {
    const run = await runCalibration({
      dataset,
      entries,
      router,
      outDir: settings.out,
      concurrency: settings.concurrency,
      deadlineMs: settings.deadlineMs,
      seed: intOption('seed', values.seed, 1, 0),
      resamples: intOption('resamples', values.resamples, PHI_RESAMPLES, 100),
      limit: settings.limit,
      limits: config.candidateLimits,
      costFp: moneyOption('cost-fp', values['cost-fp']),
      costFn: moneyOption('cost-fn', values['cost-fn']),
      usdPerMillionTokens: moneyOption('usd-per-mtok', values['usd-per-mtok']),
      plan,
      suggest: values.suggest,
      holdout: fractionOption(values.holdout),
      signal,
      progress: process.stderr,
    });
    if (!run.completed || run.results === null) {
      console.error('stopped before every judgment finished; rerun the same command to resume.');
      return 130;
    }
    printResults(run.results);
    console.log(`written: ${run.files.slice(0, 2).join(', ')}`);
    return 0;
  });
}

runMain(main);
