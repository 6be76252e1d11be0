/** Issue 14 item 3: backend-reported cached prompt tokens in an ablation's cost columns. */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

import { loadDataset } from '../../src/ablations/dataset.js';
import { resolveGraphs, runAblation } from '../../src/ablations/runner.js';
import { createOfflineBackend } from '../../src/judge/backends/offline.js';
import { createRouter } from '../../src/judge/routing.js';
import type { Router } from '../../src/judge/types.js';
import { BackendSettings } from '../../src/settings/routing-file.js';
import { startFakeOpenAI, universalReply, type FakeOpenAI } from '../fakes/openai.js';

let fake: FakeOpenAI | undefined;
let router: Router | undefined;
const dirs: string[] = [];
afterEach(async () => {
  for (const b of router?.backends() ?? []) await b.close?.();
  await fake?.close();
  fake = undefined;
  router = undefined;
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function ablate(r: Router, limit: number) {
  const dir = await mkdtemp(join(tmpdir(), 'ablate-cached-'));
  dirs.push(dir);
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
    fake = await startFakeOpenAI({
      fallback: { kind: 'json', body: universalReply('no_match') },
      blockCache: true,
    });
    router = createRouter({
      default: BackendSettings.parse({ base_url: fake.baseURL, model: 'fake', max_retries: 0 }),
      offline: createOfflineBackend,
    });
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
    router = createRouter({ default: 'offline', offline: createOfflineBackend });
    const { usage, report } = await ablate(router, 6);
    expect(usage.cachedPromptTokensPerJudgment).toBeNull();
    expect(usage.uncachedPromptTokensPerJudgment).toBeNull();
    expect(report).toMatch(/\| single-judge \|[^\n]*\| unknown \|/);
  });
});
