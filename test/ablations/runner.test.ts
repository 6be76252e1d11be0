import { appendFile, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadDataset, parseDataset, type Dataset } from '../../src/ablations/dataset.js';
import { matchedVoteSize } from '../../src/ablations/ablate/baselines.js';
import { resolveGraphs, runAblation, type AblationRun } from '../../src/ablations/ablate/runner.js';
import { createOfflineBackend } from '../../src/judge/backends/offline.js';
import { createRouter } from '../../src/judge/routing.js';
import type { Router } from '../../src/judge/types.js';
import { universalReply } from '../fakes/openai.js';
import { useFakeRouter } from '../judge/helpers.js';
import { useTempDirs } from '../support/temp-dirs.js';

const tempDir = useTempDirs('ablate-');
const startFake = useFakeRouter();

const offlineRouter = () => createRouter({ default: 'offline', offline: createOfflineBackend });

/** n items: every `positiveEvery`-th is a positive; `fail(i)` marks items whose candidate the fake rejects. */
function syntheticDataset(
  n: number,
  isPositive: (i: number) => boolean,
  fail: (i: number) => boolean,
): Dataset {
  const lines = Array.from({ length: n }, (_, i) => {
    const label = isPositive(i) ? 1 : 0;
    return JSON.stringify({
      id: `s${i}`,
      question: `question ${i % 7}`,
      candidate: `Candidate idea number ${i} about a method ${fail(i) ? 'zzfailzz' : 'plain'} and its evaluation.`,
      ground_truth: `Ground truth abstract ${i % 7} describing a specific method in detail.`,
      label,
      kind: label === 1 ? 'positive' : 'hard_negative',
      source: 'test',
      venue: 'test',
      area: 'test',
    });
  });
  return { ...parseDataset(lines.join('\n')), sha256: 'synthetic' };
}

/** The fake backend's settings in these tests (each judgment call bounded by 5 s). */
const FAKE_SETTINGS = { api_key: 'test', model: 'fake', timeout_ms: 5_000 };

/** Resolves `names` (no reference unless given) and runs them without baselines into a fresh directory. */
async function runGraphs(
  names: string[],
  dataset: Dataset,
  router: Router,
  options: Partial<Parameters<typeof runAblation>[0]> = {},
): Promise<AblationRun> {
  const { entries, reference } = await resolveGraphs(names, { reference: null });
  return runAblation({
    dataset,
    entries,
    reference,
    router,
    outDir: await tempDir(),
    baseline: false,
    ...options,
  });
}

describe('runAblation resume', () => {
  it('an interrupted run, resumed, writes the same results.json as an uninterrupted run', async () => {
    const dataset = await loadDataset('datasets/sample.jsonl');
    const { entries, reference } = await resolveGraphs(['default', 'proposer-critic', 'lexical']);
    expect(entries.map((e) => e.label)).toEqual(['default', 'proposer-critic', 'lexical']);

    const whole = await tempDir();
    const router = offlineRouter();
    const full = await runAblation({
      dataset,
      entries,
      reference,
      router,
      outDir: whole,
      seed: 7,
      concurrency: 4,
    });
    expect(full.completed).toBe(true);
    // The asked graphs, then their budget-matched vote baselines (at least vote-3 for default).
    const graphs = full.results!.graphs.map((g) => g.name);
    expect(graphs.slice(0, 3)).toEqual(['default', 'proposer-critic', 'lexical']);
    expect(graphs).toContain('vote-3');
    expect(full.ran).toBe(dataset.items.length * graphs.length);

    const split = await tempDir();
    const controller = new AbortController();
    let seen = 0;
    const first = await runAblation({
      dataset,
      entries,
      reference,
      router,
      outDir: split,
      seed: 7,
      concurrency: 4,
      signal: controller.signal,
      onRecord: () => {
        if (++seen === 40) controller.abort();
      },
    });
    expect(first.completed).toBe(false);
    expect(first.results).toBeNull();
    expect(first.ran).toBeGreaterThanOrEqual(40);
    expect(first.ran).toBeLessThan(full.ran);
    await expect(readFile(join(split, 'results.json'))).rejects.toThrow();
    // A writer killed mid-line leaves a partial record; the resumed run must cut it off, not choke on it.
    await appendFile(join(split, 'items.jsonl'), '{"v":1,"key":"trunc');

    const second = await runAblation({
      dataset,
      entries,
      reference,
      router,
      outDir: split,
      seed: 7,
      concurrency: 3,
    });
    expect(second.completed).toBe(true);
    expect(second.reused).toBe(first.ran);
    expect(second.ran + second.reused).toBe(full.ran);

    const a = await readFile(join(whole, 'results.json'), 'utf8');
    const b = await readFile(join(split, 'results.json'), 'utf8');
    expect(b).toBe(a);
    expect(await readFile(join(split, 'report.md'), 'utf8')).toContain('| default |');
    const lines = (await readFile(join(split, 'items.jsonl'), 'utf8')).trim().split('\n');
    expect(lines).toHaveLength(full.ran);
    expect(a).not.toMatch(/latency|startedAt|finishedAt/i);

    // Nothing left to do: a third run reuses everything and still writes the same results.
    const third = await runAblation({ dataset, entries, reference, router, outDir: split, seed: 7 });
    expect(third.ran).toBe(0);
    expect(await readFile(join(split, 'results.json'), 'utf8')).toBe(a);
  });

  it('uses only the first --limit items', async () => {
    const dataset = await loadDataset('datasets/sample.jsonl');
    const router = offlineRouter();
    const run = await runGraphs(['lexical'], dataset, router, { limit: 5, baseline: true });
    expect(run.ran).toBe(5);
    expect(run.results?.dataset.items).toBe(5);
    expect(run.results?.graphs.map((g) => g.name)).toEqual(['lexical']);
  });
});

describe('runAblation on the fake backend', () => {
  it('always-"match": precision = base rate, recall = 1, permissive; scripted failures are failures, not negatives', async () => {
    const { router } = await startFake(
      {
        fallback: (body) =>
          (body.messages ?? []).some((m) => m.content.includes('zzfailzz'))
            ? { kind: 'status', status: 500 }
            : { kind: 'json', body: universalReply('match') },
      },
      FAKE_SETTINGS,
    );
    // 40 items, 16 positive (i % 5 < 2); 4 failing items (10%): 2 positive, 2 negative.
    const failing = new Set([0, 2, 5, 7]);
    const dataset = syntheticDataset(
      40,
      (i) => i % 5 < 2,
      (i) => failing.has(i),
    );
    expect(dataset.items.filter((it, i) => failing.has(i) && it.label === 1)).toHaveLength(2);
    const run = await runGraphs(['default'], dataset, router, { concurrency: 6 });
    const g = run.results!.graphs[0]!;
    expect(g.statuses).toMatchObject({ ok: 36, judge_error: 4 });
    expect(g.failure.rate).toBeCloseTo(0.1, 12);
    expect(g.failureCodes).toEqual({ RW_JUDGE_UNAVAILABLE: 4 });
    // Failures are excluded, not counted as no_match: TN and FN stay 0.
    expect(g.metrics.confusion).toEqual({ tp: 14, fp: 22, tn: 0, fn: 0 });
    expect(g.metrics.point.precision).toBeCloseTo(14 / 36, 12);
    expect(g.metrics.point.recall).toBe(1);
    expect(g.calibration.bias).toBe('permissive');
    expect(g.calibration.fpr).toBe(1);
    expect(g.agreement[0]?.kappa).toBeNull(); // every analyst always says match: κ undefined, not 1
    expect(g.usage.callsPerJudgment).toBeGreaterThan(2);
  });

  it('without failures, always-"match" precision equals the base rate exactly', async () => {
    const { fake, router } = await startFake(
      { fallback: { kind: 'json', body: universalReply('match') }, latencyMs: 2 },
      FAKE_SETTINGS,
    );
    const dataset = syntheticDataset(
      30,
      (i) => i % 3 === 0,
      () => false,
    );
    const run = await runGraphs(['single-judge'], dataset, router, { concurrency: 3 });
    const g = run.results!.graphs[0]!;
    expect(g.metrics.point.precision).toBeCloseTo(10 / 30, 12);
    expect(g.metrics.point.recall).toBe(1);
    expect(g.metrics.point.specificity).toBe(0);
    expect(g.calibration.bias).toBe('permissive');
    // Bounded concurrency: one call per judgment, at most 3 judgments in flight.
    expect(fake.maxInflight).toBeLessThanOrEqual(3);
    expect(fake.calls).toHaveLength(30);
  });

  it('a hung backend ends in status timeout at the per-judgment deadline, reported as failure', async () => {
    const { router } = await startFake(
      {
        fallback: (body) =>
          (body.messages ?? []).some((m) => m.content.includes('zzfailzz'))
            ? { kind: 'hang' }
            : { kind: 'json', body: universalReply('no_match') },
      },
      FAKE_SETTINGS,
    );
    const dataset = syntheticDataset(
      10,
      (i) => i % 2 === 0,
      (i) => i === 3,
    );
    const run = await runGraphs(['single-judge'], dataset, router, { deadlineMs: 200 });
    const g = run.results!.graphs[0]!;
    expect(g.statuses).toMatchObject({ ok: 9, timeout: 1 });
    expect(g.metrics.confusion).toEqual({ tp: 0, fp: 0, tn: 4, fn: 5 });
    expect(g.calibration.bias).toBe('strict');
  });
});

describe('budget-matched vote baselines', () => {
  it('sizes vote-N by measured mean calls (odd N; an even mean takes the larger N)', () => {
    expect([0, 0.4, 1, 1.9, 2, 2.19, 3, 4, 4.9, 5.9, 6].map(matchedVoteSize)).toEqual([
      1, 1, 1, 1, 3, 3, 3, 5, 5, 5, 7,
    ]);
  });

  it("proposer-critic's baseline uses its measured calls, not its maximum of 6; a token-matched one too", async () => {
    const dataset = await loadDataset('datasets/sample.jsonl');
    const router = offlineRouter();
    const run = await runGraphs(['proposer-critic', 'lexical'], dataset, router, { baseline: true });
    const results = run.results!;
    const pc = results.graphs.find((g) => g.name === 'proposer-critic')!;
    expect(pc.llmCallsPerJudgment).toBe(6);
    const budget = pc.budget!;
    // Mean over judgments that reached the LLM (a rejected input makes no call).
    const reached = pc.items - pc.statuses.rejected_input;
    expect(budget.meanCalls).toBeCloseTo((pc.usage.callsPerJudgment! * pc.items) / reached, 9);
    expect(budget.meanCalls).toBeLessThan(6);
    expect(budget.byCalls).toEqual({
      baseline: `vote-${matchedVoteSize(budget.meanCalls)}`,
      n: matchedVoteSize(budget.meanCalls),
    });
    expect(budget.byCalls!.n).not.toBe(6);
    expect(budget.byTokens!.n).toBe(matchedVoteSize(budget.meanTokens / budget.byTokens!.tokensPerCall));
    const names = results.graphs.map((g) => g.name);
    expect(names).not.toContain('vote-6');
    expect(names).toContain(budget.byCalls!.baseline);
    // lexical makes no LLM call: no baseline. The table shows both sides' calls and tokens.
    expect(results.graphs.find((g) => g.name === 'lexical')!.budget).toBeNull();
    const row = results.baselines.find(
      (b) => b.graph === 'proposer-critic' && b.against === budget.byCalls!.baseline,
    )!;
    expect(row.matchedOn).toContain('calls');
    expect(row.graphCalls).toBeCloseTo(budget.meanCalls, 12);
    expect(row.baselineCalls).toBeCloseTo(budget.byCalls!.n, 12);
    expect(row.baselineTokens).toBeGreaterThan(0);
    const md = await readFile(join(run.files[0]!, '..', 'report.md'), 'utf8');
    expect(md).toContain('## Budget-matched vote baselines');
    expect(md).toMatch(
      new RegExp(`\\| proposer-critic \\| ${budget.meanCalls.toFixed(2)} \\| \\d+ \\| calls`),
    );
  });
});

describe('resolveGraphs', () => {
  it('adds the reference once and merges aliases by hash', async () => {
    const { entries, reference } = await resolveGraphs(['analysts-2', 'ordinary', 'vote-3', 'lexical']);
    expect(reference).toBe('analysts-2');
    expect(entries.map((e) => [e.label, e.auto])).toEqual([
      ['analysts-2', false],
      ['ordinary', false],
      ['vote-3', false],
      ['lexical', false],
    ]);
    expect(entries[0]!.aliases).toEqual(['default']);
    const none = await resolveGraphs(['lexical'], { reference: null });
    expect(none.entries.map((e) => e.label)).toEqual(['lexical']);
  });

  it('rejects an unknown graph name', async () => {
    await expect(resolveGraphs(['nope'])).rejects.toMatchObject({ code: 'RW_UNKNOWN_GRAPH' });
  });
});
