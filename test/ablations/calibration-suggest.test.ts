import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCalibration } from '../../src/ablations/calibrate/run.js';
import { loadDataset } from '../../src/ablations/dataset.js';
import { resolveGraphs } from '../../src/ablations/ablate/runner.js';
import { compileSpec } from '../../src/judge/presets.js';
import { getRole } from '../../src/roles/index.js';
import { STRICTNESS_TEXT } from '../../src/roles/strictness.js';
import { universalReply } from '../fakes/openai.js';
import { useFakeRouter } from '../judge/helpers.js';
import { useTempDirs } from '../support/temp-dirs.js';

const startFake = useFakeRouter();
const tempDir = useTempDirs('calibrate-suggest-');

const ctx = {
  question: 'q',
  candidate: 'c',
  groundTruth: 'g',
  nonce: 'NONCE12345',
  round: 1,
  rounds: 1,
  visible: [],
};

describe('strictness role option', () => {
  it('adds its member line after the candidate; neutral is the unset prompt; it changes the graph hash', () => {
    const judge = getRole('judge')!;
    const plain = judge.render({ ...ctx, node: { id: 'j' } });
    const neutral = judge.render({ ...ctx, node: { id: 'j', strictness: 'neutral' } });
    const strict = judge.render({ ...ctx, node: { id: 'j', strictness: 'strict' } });
    const lenient = judge.render({ ...ctx, node: { id: 'j', strictness: 'lenient' } });
    expect(neutral).toEqual(plain);
    expect(strict.system).toBe(plain.system);
    expect(strict.user.startsWith(plain.user)).toBe(true);
    expect(strict.user).toContain(STRICTNESS_TEXT.strict);
    expect(lenient.user).toContain(STRICTNESS_TEXT.lenient);
    const spec = (strictness?: string) => ({
      decision: { rule: 'evaluator', node: 'judge' },
      nodes: [{ id: 'judge', role: 'judge', ...(strictness === undefined ? {} : { strictness }) }],
    });
    expect(compileSpec(spec('strict')).hash).not.toBe(compileSpec(spec()).hash);
    expect(() => compileSpec(spec('harsh'))).toThrow();
  });
});

describe('calibrate --suggest', () => {
  it('names strict for a permissive member and shows the measured effect of the variant run beside it', async () => {
    // The judge accepts everything unless its prompt carries the strict note; then it rejects everything.
    const { router } = await startFake(
      {
        fallback: (body) => ({
          kind: 'json',
          body: universalReply(
            (body.messages ?? []).some((m) => m.content.includes(STRICTNESS_TEXT.strict))
              ? 'no_match'
              : 'match',
          ),
        }),
      },
      { api_key: 'test', model: 'fake' },
    );
    const dir = await tempDir();
    const strictGraph = join(dir, 'strict-judge.json');
    const { writeFile } = await import('node:fs/promises');
    await writeFile(
      strictGraph,
      JSON.stringify({
        decision: { rule: 'evaluator', node: 'judge' },
        nodes: [{ id: 'judge', role: 'judge', strictness: 'strict', temperature: 0 }],
      }),
    );
    const { entries } = await resolveGraphs(['single-judge', strictGraph], { reference: null });
    const dataset = await loadDataset('datasets/sample.jsonl');
    const run = await runCalibration({
      dataset,
      entries,
      router,
      outDir: join(dir, 'out'),
      resamples: 100,
      suggest: true,
    });
    const suggestions = run.results!.suggestions!;
    const base = suggestions.find((s) => s.member === 'single-judge/judge');
    expect(base).toMatchObject({ bias: 'permissive', current: 'neutral', suggested: 'strict' });
    expect(base?.measured?.member).toBe('strict-judge/judge');
    expect(base?.measured?.fprChange).toBe(-1);
    expect(base?.measured?.fnrChange).toBe(1);
    // Chosen on the selection clusters; the held-out ones (disjoint) show the same bias.
    expect(run.results!.split?.heldOut.clusters).toBeGreaterThan(0);
    expect(base?.heldOut).toMatchObject({ bias: 'permissive', confirmed: true });
    // The strict variant overshoots: it is now strict, and the suggestion walks it back to neutral.
    expect(suggestions.find((s) => s.member === 'strict-judge/judge')).toMatchObject({
      bias: 'strict',
      current: 'strict',
      suggested: 'neutral',
    });
    const report = await readFile(join(dir, 'out', 'report.md'), 'utf8');
    expect(report).toContain('single-judge/judge is permissive: `strictness: "strict"`');
    expect(report).toMatch(/held out \(\d+ items\): permissive, confirmed/);
  }, 30_000);
});
