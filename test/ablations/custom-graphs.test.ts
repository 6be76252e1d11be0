/**
 * Custom graphs in the research CLIs (issue 40 item 8): a graph file is labelled by its `name` (else its file
 * name), never its path, in every output, and resume still finds its judgments; a majority over an even number
 * of voters is flagged where the user meets it.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { resolveGraphs, runAblation } from '../../src/ablations/ablate/runner.js';
import { renderReport } from '../../src/ablations/ablate/report.js';
import { loadDataset } from '../../src/ablations/dataset.js';
import { createOfflineBackend } from '../../src/judge/backends/offline.js';
import { compileSpec } from '../../src/judge/presets.js';
import { graphWarnings } from '../../src/judge/graph.js';
import { createRouter } from '../../src/judge/routing.js';
import { useTempDirs } from '../support/temp-dirs.js';

const tempDir = useTempDirs('custom-graphs-');
const offline = () => createRouter({ default: 'offline', offline: createOfflineBackend });

const judges = (n: number) =>
  Array.from({ length: n }, (_, i) => ({
    id: `judge_${i + 1}`,
    role: 'judge',
    seed: i + 1,
    temperature: 0.7,
  }));
const vote = (n: number, extra: Record<string, unknown> = {}) => ({
  decision: 'majority',
  nodes: judges(n),
  ...extra,
});

describe('a graph file is labelled by its name', () => {
  it('uses the name field (else the file name) in the report, results.json, items.jsonl and plots; resume reuses', async () => {
    const dir = await tempDir();
    const named = join(dir, 'graphs', 'my-experiment-v2.json');
    const unnamed = join(dir, 'graphs', 'one-judge.json');
    const files = new Map([
      [named, JSON.stringify(vote(3, { name: 'committee-3' }))],
      [unnamed, JSON.stringify(vote(1))],
    ]);
    const readGraphFile = (path: string) => Promise.resolve(files.get(path) ?? '');
    const { entries } = await resolveGraphs([named, unnamed], { reference: named, readGraphFile });
    expect(entries.map((e) => e.label)).toEqual(['committee-3', 'one-judge']);
    // The path stays findable (--reference FILE, --canary-graph FILE) as an alias.
    expect(entries[0]!.aliases).toEqual([named]);

    const dataset = await loadDataset('datasets/sample.jsonl');
    const out = join(dir, 'out');
    const options = {
      dataset,
      entries,
      reference: 'committee-3',
      router: offline(),
      outDir: out,
      baseline: false,
      limit: 8,
    };
    const first = await runAblation(options);
    expect(first.completed).toBe(true);
    const results = await readFile(join(out, 'results.json'), 'utf8');
    const report = await readFile(join(out, 'report.md'), 'utf8');
    const items = await readFile(join(out, 'items.jsonl'), 'utf8');
    const plots = (await readFile(join(out, 'precision-recall.svg'), 'utf8')).concat(
      await readFile(join(out, 'f1-vs-tokens.svg'), 'utf8'),
    );
    expect(JSON.parse(results).graphs.map((g: { name: string }) => g.name)).toEqual([
      'committee-3',
      'one-judge',
    ]);
    const graphsOfItems = new Set(
      items
        .trim()
        .split('\n')
        .map((l) => (JSON.parse(l) as { graph: string }).graph),
    );
    expect([...graphsOfItems].sort()).toEqual(['committee-3', 'one-judge']);
    for (const text of [report, plots]) {
      expect(text).toContain('committee-3');
      expect(text).toContain('one-judge');
    }
    // Only the alias line of the graph's own section names the file; no label, table or plot does.
    for (const text of [items, plots]) expect(text).not.toContain('my-experiment-v2');
    expect(report.split(named).length - 1).toBe(1);
    expect(report).toContain(`also asked for as \`${named}\``);

    // The same command again: every judgment is found by its key, none is run again.
    const again = await runAblation(options);
    expect(again).toMatchObject({ completed: true, ran: 0, reused: 16 });
    expect(await readFile(join(out, 'results.json'), 'utf8')).toBe(results);
  });

  it('refuses two different graph files with the same name, naming both', async () => {
    const files = new Map([
      ['a.json', JSON.stringify(vote(3, { name: 'same' }))],
      ['b.json', JSON.stringify(vote(1, { name: 'same' }))],
    ]);
    await expect(
      resolveGraphs(['a.json', 'b.json'], {
        reference: null,
        readGraphFile: (p) => Promise.resolve(files.get(p) ?? ''),
      }),
    ).rejects.toThrow(/two different graphs are both named "same" \(b\.json and a\.json\)/);
  });
});

describe('a majority over an even number of voters', () => {
  it('gets a warning at compile time that explains the tie rule; odd voters and other rules do not', () => {
    expect(graphWarnings(compileSpec(vote(4)))).toEqual([
      'majority over 4 voters: a 2–2 tie is no_match (a reward must be earned), so a match needs 3 of 4 votes; ' +
        'use an odd number of voters, or confidence_weighted, for a plain majority',
    ]);
    expect(graphWarnings(compileSpec(vote(3)))).toEqual([]);
    expect(graphWarnings(compileSpec({ ...vote(4), decision: 'confidence_weighted' }))).toEqual([]);
    // Only the voters named by the decision count.
    const two = { ...vote(3), decision: { rule: 'majority', nodes: ['judge_1', 'judge_2'] } };
    expect(graphWarnings(compileSpec(two))[0]).toMatch(/^majority over 2 voters: a 1–1 tie/);
  });

  it('is in the ablation report and results.json warnings', async () => {
    const dir = await tempDir();
    const path = join(dir, 'four.json');
    await writeFile(path, JSON.stringify(vote(4, { name: 'vote-four' })));
    const { entries } = await resolveGraphs([path], { reference: null });
    const run = await runAblation({
      dataset: await loadDataset('datasets/sample.jsonl'),
      entries,
      reference: null,
      router: offline(),
      outDir: join(dir, 'out'),
      baseline: false,
      limit: 4,
    });
    expect(run.results?.warnings).toContainEqual(
      expect.stringMatching(/^vote-four: majority over 4 voters: a 2–2 tie/),
    );
    expect(renderReport(run.results!)).toContain('> **Warning**: vote-four: majority over 4 voters');
  });
});
