import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { CalibrationResults } from '../../src/ablations/calibrate/analyze.js';
import { runCalibration } from '../../src/ablations/calibrate/run.js';
import { loadDataset } from '../../src/ablations/dataset.js';
import { resolveGraphs } from '../../src/ablations/ablate/runner.js';
import { createOfflineBackend } from '../../src/judge/backends/offline.js';
import { createRouter } from '../../src/judge/routing.js';
import { universalReply } from '../fakes/openai.js';
import { useFakeRouter } from '../judge/helpers.js';
import { useTempDirs } from '../support/temp-dirs.js';

const SHARED = fileURLToPath(new URL('../../../shared/datasets/openreview-pairs.jsonl', import.meta.url));

const tempDir = useTempDirs('calibrate-');
const startFake = useFakeRouter();

describe.skipIf(!existsSync(SHARED))('calibrate on the shared OpenReview set (offline backend)', () => {
  it('independence over-promises for near-identical members; the correlation-aware prediction lands in the CI', async () => {
    const dataset = await loadDataset(SHARED);
    const { entries } = await resolveGraphs(['vote-3', 'round-robin-3'], { reference: null });
    const router = createRouter({ default: 'offline', offline: createOfflineBackend });
    const out = await tempDir();
    const run = await runCalibration({ dataset, entries, router, outDir: out, resamples: 200 });
    expect(run.completed).toBe(true);
    const results = JSON.parse(await readFile(join(out, 'calibration.json'), 'utf8')) as CalibrationResults;
    expect(results.items).toBe(600);
    expect(results.hardNegatives).toBeGreaterThan(0);
    expect(results.members.map((m) => m.member.key)).toEqual([
      'vote-3/judge_1',
      'vote-3/judge_2',
      'vote-3/judge_3',
      'round-robin-3/methodology',
      'round-robin-3/statistics',
      'round-robin-3/novelty',
    ]);
    for (const c of results.committees) {
      // What we see (600 items): members ≈ 88–90 % accurate with error φ 0.7–0.96; the committees
      // observe ≈ 88.8 % [86.0, 91.2]; independence predicts ≈ 96.5 %; the beta-binomial ≈ 89.2 %.
      const lo = c.observed.accuracy.lo!;
      const hi = c.observed.accuracy.hi!;
      expect(c.rho.positive).toBeGreaterThan(0.5);
      expect(c.check.independent.overPromises).toBe(true);
      expect(c.check.independent.accuracy! - hi).toBeGreaterThan(0.03);
      expect(c.check.beta_binomial.inside).toBe(true);
      expect(c.check.beta_binomial.accuracy!).toBeGreaterThanOrEqual(lo);
      // The joint distribution with the graph's own rule reproduces its own verdicts (the engine's rule).
      expect(c.check.joint.accuracy).toBeCloseTo(c.observed.accuracy.rate!, 12);
    }
    const report = await readFile(join(out, 'report.md'), 'utf8');
    expect(report).toContain('independent 96.');
    expect(report).toContain('over-promises (above the observed CI)');
    expect(report).toMatch(/beta_binomial 89\.\d: inside the observed CI/);
  }, 60_000);
});

describe('calibrate with a failing backend', () => {
  it('a failed member has no vote (not a no_match); a failed judgment is excluded, not counted wrong', async () => {
    const dataset = await loadDataset(fileURLToPath(new URL('../../datasets/sample.jsonl', import.meta.url)));
    const items = dataset.items.slice(0, 6);
    // The first item's calls all fail with a 500; every other call answers "match".
    // The first five words of its candidate: a phrase no other item's prompt contains.
    const marker = items[0]!.candidate.split(' ').slice(0, 5).join(' ');
    expect(items.slice(1).some((i) => `${i.candidate} ${i.ground_truth}`.includes(marker))).toBe(false);
    const { router } = await startFake(
      {
        fallback: (body) =>
          (body.messages ?? []).some((m) => m.content.includes(marker))
            ? { kind: 'status', status: 500 }
            : { kind: 'json', body: universalReply('match') },
      },
      { api_key: 'test', model: 'fake' },
    );
    const { entries } = await resolveGraphs(['vote-3'], { reference: null });
    const out = await tempDir();
    const run = await runCalibration({
      dataset,
      entries,
      router,
      outDir: out,
      resamples: 100,
      limit: 6,
      deadlineMs: 5_000,
    });
    const r = run.results!;
    const positives = items.slice(1).filter((i) => i.label === 1).length;
    expect(r.members).toHaveLength(3);
    for (const m of r.members) {
      expect(m.n).toBe(5);
      expect(m.confusion.tp + m.confusion.fp).toBe(5);
      expect(m.tpr.rate).toBe(1);
      expect(m.bias.label).not.toBe('strict');
    }
    const [cost] = r.costs;
    expect(cost?.judgments).toBe(6);
    expect(cost?.decided).toBe(5);
    expect(cost?.correct).toBe(positives);
    const [committee] = r.committees;
    expect(committee?.observed.failures).toBe(1);
    expect(committee?.observed.n).toBe(5);
    // Every member errs on every negative and on no positive: φ is undefined in both classes. Flagged, not 0:
    // ρ does not matter on positives (no error there) but does on negatives, so no beta-binomial prediction.
    expect(committee?.rho).toEqual({ positive: null, negative: null });
    expect(committee?.rhoNote).toMatch(/undefined .* positives and negatives: no beta-binomial prediction/);
    for (const p of committee?.predictions ?? []) expect(p.betaBinomial).toBeNull();
    expect(committee?.check.beta_binomial.inside).toBeNull();
  }, 30_000);
});
