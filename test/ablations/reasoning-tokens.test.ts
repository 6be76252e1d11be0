/** Issue 37 item 6: reasoning tokens per judgment per graph and per role in an ablation's report. */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { loadDataset } from '../../src/ablations/dataset.js';
import { resolveGraphs, runAblation } from '../../src/ablations/ablate/runner.js';
import type { Router } from '../../src/judge/types.js';
import { universalReply } from '../fakes/openai.js';
import { createThinkingJudge } from '../fakes/thinking.js';
import { useFakeRouter } from '../judge/helpers.js';
import { useTempDirs } from '../support/temp-dirs.js';

const startFake = useFakeRouter();
const tempDir = useTempDirs('ablate-reasoning-');

async function ablate(r: Router) {
  const dir = await tempDir();
  const { entries } = await resolveGraphs(['default']);
  const run = await runAblation({
    dataset: await loadDataset('datasets/sample.jsonl'),
    entries,
    reference: null,
    router: r,
    outDir: dir,
    concurrency: 2,
    limit: 6,
    resamples: 50,
  });
  expect(run.completed).toBe(true);
  const graph = run.results!.graphs.find((g) => g.name === 'default')!;
  return { usage: graph.usage, report: await readFile(join(dir, 'report.md'), 'utf8') };
}

describe('ablation cost columns: reasoning tokens', () => {
  it('per graph and per role, from the reported counts', async () => {
    const judge = createThinkingJudge({ shape: 'reasoning_content', answer: () => universalReply('match') });
    const { router } = await startFake({ fallback: (b) => judge.reply(b) });
    const { usage, report } = await ablate(router);
    // The sample's items reach the LLM: 3 calls of 800 reasoning tokens per judgment.
    expect(usage.reasoningTokensPerJudgment).toBe(2_400);
    expect(usage.perRole['analyst']?.reasoningTokensPerJudgment).toBe(1_600);
    expect(usage.perRole['evaluator']?.reasoningTokensPerJudgment).toBe(800);
    expect(report).toContain('reasoning tokens/judgment');
    expect(report).toMatch(/\| analyst \|[^\n]*\| 1600 \|/);
  });

  it('marks estimated counts with ~, and shows no column for a judge that does not reason', async () => {
    const judge = createThinkingJudge({
      shape: 'inline:think',
      answer: () => universalReply('match'),
      usage: 'none',
    });
    const { router } = await startFake({ fallback: (b) => judge.reply(b) });
    const { usage, report } = await ablate(router);
    expect(usage.reasoningTokensEstimated).toBe(true);
    expect(report).toMatch(/\| evaluator \|[^\n]*\| ~\d+ \|/);
    const plain = await startFake({ fallback: { kind: 'json', body: universalReply('match') } });
    expect((await ablate(plain.router)).report).not.toContain('reasoning tokens');
  });
});
