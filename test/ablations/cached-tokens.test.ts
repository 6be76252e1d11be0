/** Issue 14 item 3: backend-reported cached prompt tokens in an ablation's cost columns. */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { loadDataset } from '../../src/ablations/dataset.js';
import { resolveGraphs, runAblation } from '../../src/ablations/ablate/runner.js';
import { createOfflineBackend } from '../../src/judge/backends/offline.js';
import { createRouter } from '../../src/judge/routing.js';
import type { Router } from '../../src/judge/types.js';
import { universalReply } from '../fakes/openai.js';
import { useFakeRouter } from '../judge/helpers.js';
import { useTempDirs } from '../support/temp-dirs.js';

const startFake = useFakeRouter();
const tempDir = useTempDirs('ablate-cached-');

async function ablate(r: Router, limit: number) {
  const dir = await tempDir();
  const { entries } = await resolveGraphs(['single-judge']);
  const run = await runAblation({
    dataset: await loadDataset('datasets/sample.jsonl'),
    entries,
    reference: null,
    router: r,
    outDir: dir,
    concurrency: 2,
    limit,
    resamples: 50,
  });
  expect(run.completed).toBe(true);
  const graph = run.results!.graphs.find((g) => g.name === 'single-judge')!;
  return { usage: graph.usage, report: await readFile(join(dir, 'report.md'), 'utf8') };
}

describe('ablation cost columns: cached vs uncached prompt tokens', () => {
  it('shows what the backend reported as cached, per judgment', async () => {
    const { router } = await startFake(
      { fallback: { kind: 'json', body: universalReply('no_match') }, blockCache: true },
      { model: 'fake' },
    );
    const { usage, report } = await ablate(router, 12);
    const cached = usage.cachedPromptTokensPerJudgment;
    const uncached = usage.uncachedPromptTokensPerJudgment;
    expect(cached).not.toBeNull();
    expect(cached!).toBeGreaterThan(0); // at least the shared system text is reused
    expect(cached! + uncached!).toBeCloseTo(usage.promptTokensPerJudgment!, 6);
    expect(uncached!).toBeGreaterThan(0);
    expect(report).toContain('prompt tokens cached / uncached');
    expect(report).toContain(`${cached!.toFixed(0)} / ${uncached!.toFixed(0)}`);
  });

  it('says unknown, not 0, when the backend does not report cached tokens', async () => {
    const router = createRouter({ default: 'offline', offline: createOfflineBackend });
    const { usage, report } = await ablate(router, 6);
    expect(usage.cachedPromptTokensPerJudgment).toBeNull();
    expect(usage.uncachedPromptTokensPerJudgment).toBeNull();
    expect(report).toMatch(/\| single-judge \|[^\n]*\| unknown \|/);
  });
});
