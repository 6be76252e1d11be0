/** Issue 14 item 4: the ablation report shows a cascade beside its two stages. */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { matchedVoteSize } from '../../src/ablations/ablate/baselines.js';
import { loadDataset } from '../../src/ablations/dataset.js';
import { resolveGraphs, runAblation } from '../../src/ablations/ablate/runner.js';
import { createOfflineBackend } from '../../src/judge/backends/offline.js';
import { createRouter } from '../../src/judge/routing.js';
import { useTempDirs } from '../support/temp-dirs.js';

const tempDir = useTempDirs('ablate-cascade-');

describe('ablating a cascade', () => {
  it('adds both stages and reports calls, tokens, P/R and stop counts beside them', async () => {
    const { entries, reference } = await resolveGraphs(['cascade']);
    // The stages; the budget-matched vote baselines are added by the run, once the calls are measured.
    expect(entries.map((e) => e.label)).toEqual(['cascade', 'default', 'single-judge']);
    expect(reference).toBe('default');
    const dir = await tempDir();
    const run = await runAblation({
      dataset: await loadDataset('datasets/sample.jsonl'),
      entries,
      reference,
      router: createRouter({ default: 'offline', offline: createOfflineBackend }),
      outDir: dir,
      concurrency: 4,
      resamples: 50,
    });
    expect(run.completed).toBe(true);
    const byName = new Map(run.results!.graphs.map((g) => [g.name, g]));
    const cascade = byName.get('cascade')!;
    const committee = byName.get('default')!;
    const single = byName.get('single-judge')!;
    expect(cascade.cascade!.stops + cascade.cascade!.escalations).toBe(cascade.items);
    expect(committee.cascade).toBeNull();
    // Calls per judgment: 1 per stopped item, 1 + 3 per escalated one.
    const calls = (cascade.cascade!.stops + 4 * cascade.cascade!.escalations) / cascade.items;
    expect(cascade.usage.callsPerJudgment).toBeCloseTo(calls, 9);
    expect(single.usage.callsPerJudgment).toBe(1);
    // The cascade's baseline is sized by what it measurably spent, not by its 4-call maximum.
    expect(cascade.budget!.meanCalls).toBeLessThan(4);
    expect(cascade.budget!.byCalls!.baseline).toBe(`vote-${matchedVoteSize(cascade.budget!.meanCalls)}`);
    const report = await readFile(join(dir, 'report.md'), 'utf8');
    for (const name of ['cascade', 'default', 'single-judge'])
      expect(report).toMatch(new RegExp(`\\| ${name}\\*? \\|`));
    expect(report).toContain(
      `- Cascade: ${cascade.cascade!.stops} of ${cascade.items} judgments decided by the first stage`,
    );
  });
});
