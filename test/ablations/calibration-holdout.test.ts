/**
 * Issue 40 item 8 (`calibrate`): the committee plan and the strictness suggestions are chosen on one part of
 * the ground-truth clusters and scored on the disjoint rest, and the plan is written as a runnable graph
 * with the `npm run ablate` command that evaluates it.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { CalibrationResults } from '../../src/ablations/calibrate/analyze.js';
import { splitByCluster } from '../../src/ablations/calibrate/holdout.js';
import { runCalibration } from '../../src/ablations/calibrate/run.js';
import { clusterKey, loadDataset, type DatasetItem } from '../../src/ablations/dataset.js';
import { resolveGraphs } from '../../src/ablations/ablate/runner.js';
import { FEW_CLUSTERS } from '../../src/ablations/stats/clustered.js';
import type { AblationResults } from '../../src/ablations/types.js';
import { compileSpec } from '../../src/judge/presets.js';
import { universalReply } from '../fakes/openai.js';
import { useFakeRouter } from '../judge/helpers.js';
import { runCli, type CliResult } from '../support/cli.js';
import { useTempDirs } from '../support/temp-dirs.js';

const tempDir = useTempDirs('calibrate-holdout-');
const startFake = useFakeRouter();

/** `clusters` ground truths of `perCluster` items each, alternating labels. */
function synthetic(clusters: number, perCluster: number): DatasetItem[] {
  return Array.from({ length: clusters * perCluster }, (_, i) => ({
    id: `i${i}`,
    question: 'q',
    candidate: `c${i}`,
    ground_truth: `gt${Math.floor(i / perCluster)}`,
    label: i % 2 === 0 ? 1 : 0,
    kind: i % 2 === 0 ? 'positive' : 'hard_negative',
    source: 's',
    venue: 'v',
    area: 'a',
  }));
}

describe('splitByCluster', () => {
  const items = synthetic(60, 4);

  it('keeps every ground truth on one side, holds out the asked share, and depends only on the seed', () => {
    const split = splitByCluster(items, 7, 0.25);
    const held = new Set(split.heldOut.map((i) => clusterKey(items[i]!)));
    const chosen = new Set(split.selection.map((i) => clusterKey(items[i]!)));
    expect([...held].filter((k) => chosen.has(k))).toEqual([]);
    expect(split.selection.length + split.heldOut.length).toBe(items.length);
    expect(split.summary.heldOut).toEqual({ items: 60, clusters: 15, positives: 30, negatives: 30 });
    expect(split.summary.selection.clusters).toBe(45);
    // Same seed, same split, whatever the item order; another seed, another split.
    const reversed = [...items].reverse();
    const again = splitByCluster(reversed, 7, 0.25);
    expect(again.heldOut.map((i) => reversed[i]!.id).sort()).toEqual(
      split.heldOut.map((i) => items[i]!.id).sort(),
    );
    expect(splitByCluster(items, 8, 0.25).heldOut).not.toEqual(split.heldOut);
    // 15 held-out clusters: intervals exist but are wide, and the summary says so.
    expect(split.summary.scored).toBe(true);
    expect(split.summary.warnings).toEqual([expect.stringContaining(`< ${FEW_CLUSTERS}`)]);
    expect(splitByCluster(synthetic(120, 2), 1, 0.5).summary.warnings).toEqual([]);
  });

  it('warns and scores nothing when the held-out part is too small for an interval', () => {
    const one = splitByCluster(synthetic(3, 4), 1, 0.1);
    expect(one.summary.heldOut.clusters).toBe(1);
    expect(one.summary.scored).toBe(false);
    expect(one.summary.warnings[0]).toMatch(/held-out part too small for an interval: 1 cluster/);
    // Never all clusters held out: something is left to choose on.
    expect(splitByCluster(synthetic(3, 4), 1, 0.99).summary.selection.clusters).toBe(1);
  });
});

describe('calibrate --plan chooses on the selection items and scores on the held-out ones', () => {
  it('a member perfect where it was chosen and always wrong elsewhere is reported as such', async () => {
    const dataset = await loadDataset('datasets/sample.jsonl');
    const split = splitByCluster(dataset.items, 1, 0.5);
    const heldOut = new Set(split.heldOut.map((i) => dataset.items[i]!.candidate));
    // The judge answers right on the selection items and wrong on every held-out one.
    const { router } = await startFake(
      {
        fallback: (body) => {
          const text = (body.messages ?? []).map((m) => m.content).join('\n');
          const item = dataset.items.find((i) => text.includes(i.candidate))!;
          const right = item.label === 1 ? 'match' : 'no_match';
          const wrong = item.label === 1 ? 'no_match' : 'match';
          return { kind: 'json', body: universalReply(heldOut.has(item.candidate) ? wrong : right) };
        },
      },
      { api_key: 'test', model: 'fake' },
    );
    const { entries } = await resolveGraphs(['single-judge', 'lexical'], { reference: null });
    const out = await tempDir();
    const run = await runCalibration({
      dataset,
      entries,
      router,
      outDir: out,
      resamples: 100,
      seed: 1,
      plan: { budget: 1e9, size: 1 },
      suggest: true,
    });
    const r = run.results!;
    expect(r.split).toMatchObject({
      method: 'cluster_holdout',
      seed: 1,
      selection: { items: split.selection.length, clusters: 4 },
      heldOut: { items: split.heldOut.length, clusters: 4 },
    });
    const plan = r.plan!;
    expect(plan.best?.members).toEqual(['single-judge/judge']);
    expect(plan.best?.predicted.accuracy).toBe(1);
    expect(plan.heldOut.best).toMatchObject({ n: split.heldOut.length, accuracy: { rate: 0 } });
    expect(plan.heldOut.optimism).toBe(1);
    // The suggestion is made on the selection items (there the judge has no bias to show) …
    expect(r.suggestions?.some((s) => s.member === 'single-judge/judge')).toBe(false);
    const written = JSON.parse(await readFile(join(out, 'calibration.json'), 'utf8')) as CalibrationResults;
    expect(written.split?.heldOut.items).toBe(split.heldOut.length);
    const report = await readFile(join(out, 'report.md'), 'utf8');
    expect(report).toContain(`- held out: ${split.heldOut.length} items (4 ground-truth clusters`);
    expect(report).toContain('**warning:** only 4 held-out ground-truth clusters');
    expect(report).toMatch(/\| best \| single-judge\/judge \| .* \| 100\.0 \(.*\) \| 0\.0 \[/);
    // … and the held-out items are written as a dataset the emitted graph is evaluated on.
    const holdout = (await readFile(join(out, 'holdout.jsonl'), 'utf8')).trim().split('\n');
    expect(holdout.map((l) => (JSON.parse(l) as DatasetItem).candidate).sort()).toEqual([...heldOut].sort());
  }, 30_000);

  it('skips committees the engine refuses (the same node measured in two graphs)', async () => {
    const { router } = await startFake(
      { fallback: () => ({ kind: 'json', body: universalReply('match') }) },
      { api_key: 'test', model: 'fake' },
    );
    const dir = await tempDir();
    const copy = join(dir, 'judge-copy.json');
    await writeFile(
      copy,
      JSON.stringify({ decision: 'majority', nodes: [{ id: 'judge', role: 'judge', temperature: 0 }] }),
    );
    const { entries } = await resolveGraphs(['single-judge', copy], { reference: null });
    const run = await runCalibration({
      dataset: await loadDataset('datasets/sample.jsonl'),
      entries,
      router,
      outDir: join(dir, 'out'),
      resamples: 100,
      plan: { budget: 1e9, size: 2 },
    });
    const plan = run.results!.plan!;
    expect(plan.candidates).toHaveLength(2);
    expect(plan.considered).toBe(0);
    expect(plan.graph).toBeNull();
    expect(run.results!.committeeGraph).toBeNull();
  }, 30_000);
});

const cli = (script: string, args: string[]): Promise<CliResult> => runCli(script, args);

describe('npm run calibrate -- --plan (offline backend)', () => {
  it('writes committee.graph.json, which compiles, and the printed ablate command runs it to the held-out score', async () => {
    const out = join(await tempDir(), 'cal');
    const cal = await cli('src/ablations/calibrate/cli.ts', [
      ...['--dataset', 'datasets/sample.jsonl', '--graphs', 'vote-3,round-robin-3', '--out', out],
      ...['--plan', '--budget', '1000000', '--seed', '3', '--resamples', '100'],
    ]);
    expect(cal.code).toBe(0);
    expect(cal.stdout).toMatch(
      /split by ground-truth cluster \(seed 3\): chosen on \d+ items \(4 clusters\)/,
    );
    expect(cal.stderr).toContain('warning: only 4 held-out ground-truth clusters');
    const file = join(out, 'committee.graph.json');
    const spec: unknown = JSON.parse(await readFile(file, 'utf8'));
    const graph = compileSpec(spec);
    expect(graph.name).toBe('calibrated-committee');
    expect(graph.spec.decision).toEqual({ rule: 'majority' });
    expect(graph.voters).toHaveLength(3);
    const results = JSON.parse(await readFile(join(out, 'calibration.json'), 'utf8')) as CalibrationResults;
    expect(results.committeeGraph?.file).toBe(file);
    const command = results.committeeGraph!.command;
    expect(cal.stdout).toContain(`  ${command}\n`);
    expect(command).toBe(
      `npm run ablate -- --dataset ${join(out, 'holdout.jsonl')} --graphs ${file} --out ${join(out, 'committee-eval')} --seed 3 --reference none --no-baseline`,
    );
    const argv = command.replace(/^npm run ablate -- /, '').split(' ');
    const ablate = await cli('src/ablations/ablate/cli.ts', argv);
    expect(ablate.code).toBe(0);
    const run = JSON.parse(
      await readFile(join(out, 'committee-eval', 'results.json'), 'utf8'),
    ) as AblationResults;
    expect(run.graphs).toHaveLength(1);
    // The offline judge is deterministic: the run reproduces calibrate's held-out replay verdict for verdict.
    const held = results.plan!.heldOut.best!;
    const cm = run.graphs[0]!.metrics.confusion;
    expect(run.dataset.items).toBe(results.split!.heldOut.items);
    expect(cm.tp + cm.tn).toBe(held.accuracy.x);
    expect(cm.tp).toBe(held.tpr.x);
    expect(cm.tn).toBe(held.tnr.x);
  }, 60_000);
});
