/**
 * `probe` resumes like `ablate` (issue 40 item 6): judged cases are appended to probe-cases.jsonl as they
 * arrive; a run stopped part-way (a spend cap, Ctrl-C) and run again judges only the missing cases and scores
 * exactly what an uninterrupted run scores.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadDataset } from '../../../src/ablations/dataset.js';
import { buildCases } from '../../../src/ablations/probe/catalogue.js';
import { runProbeCases, runProbes } from '../../../src/ablations/probe/run.js';
import { createOfflineBackend } from '../../../src/judge/backends/offline.js';
import { getPreset } from '../../../src/judge/presets.js';
import { createRouter } from '../../../src/judge/routing.js';
import { useTempDirs } from '../../support/temp-dirs.js';

const tempDir = useTempDirs('probe-resume-');

describe('probe resume', () => {
  it('a run stopped after 40 cases, run again, judges only the rest and scores as an uninterrupted run', async () => {
    const items = (await loadDataset('datasets/sample.jsonl')).items.slice(0, 6);
    const graph = getPreset('single-judge')!;
    const router = createRouter({ default: 'offline', offline: createOfflineBackend });
    const total = buildCases(items).length;
    const recordsPath = join(await tempDir(), 'out', 'probe-cases.jsonl');
    let judged = 0;
    const first = await runProbeCases({
      items,
      graph,
      router,
      recordsPath,
      concurrency: 1,
      onCase: () => judged++,
      stop: () => judged >= 40,
    });
    expect(first).toMatchObject({ completed: false, results: null, ran: 40, reused: 0 });
    const lines = (await readFile(recordsPath, 'utf8')).trim().split('\n');
    expect(lines).toHaveLength(40);

    judged = 0;
    const second = await runProbeCases({ items, graph, router, recordsPath, onCase: () => judged++ });
    expect(second).toMatchObject({ completed: true, ran: total - 40, reused: 40 });
    expect(judged).toBe(total - 40);
    const ids = (await readFile(recordsPath, 'utf8'))
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as { id: string }).id);
    expect(new Set(ids).size).toBe(total);

    const uninterrupted = await runProbes({ items, graph, router });
    expect(second.results).toEqual(uninterrupted);

    // Another graph is another key: nothing is reused.
    const other = await runProbeCases({ items, graph: getPreset('lexical')!, router, recordsPath });
    expect(other).toMatchObject({ completed: true, reused: 0, ran: total });
  });
});
