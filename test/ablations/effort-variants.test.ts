/**
 * Reasoning effort as a dimension of `ablate` (issue 37 item 3): `--reasoning-effort analyst=low,evaluator=high`
 * adds a variant of every graph, judged on the fake reasoning judge, with P/R and per-role tokens per judgment
 * of each mix in one results table.
 */
import { describe, expect, it } from 'vitest';

import { loadDataset } from '../../src/ablations/dataset.js';
import { parseEffortMix, withEfforts } from '../../src/ablations/ablate/effort-variants.js';
import { resolveGraphs, runAblation } from '../../src/ablations/ablate/runner.js';
import { getPreset } from '../../src/judge/presets.js';
import { universalReply } from '../fakes/openai.js';
import { reasoningJudge } from '../fakes/reasoning-model.js';
import { useFakeRouter } from '../judge/helpers.js';
import { useTempDirs } from '../support/temp-dirs.js';

const startFake = useFakeRouter();
const tempDir = useTempDirs('ablate-effort-');

describe('--reasoning-effort mixes', () => {
  it('parses ROLE_OR_NODE=EFFORT lists and refuses anything else, naming the part', () => {
    expect(parseEffortMix('analyst=low, evaluator=high')).toEqual([
      ['analyst', 'low'],
      ['evaluator', 'high'],
    ]);
    expect(() => parseEffortMix('analyst=extreme')).toThrow(/"analyst=extreme" is not ROLE_OR_NODE=EFFORT/);
    expect(() => parseEffortMix('analyst')).toThrow(/is not ROLE_OR_NODE=EFFORT/);
    expect(() => parseEffortMix('')).toThrow(/empty/);
  });

  it('sets the effort by node id, then role, then all; a target the graph lacks is an error', () => {
    const ordinary = getPreset('ordinary')!;
    const [name, graph] = withEfforts(ordinary, 'ordinary', parseEffortMix('all=low,evaluator=high'));
    expect(name).toBe('ordinary.effort-all-low-evaluator-high');
    expect(graph.hash).not.toBe(ordinary.hash);
    expect(Object.fromEntries(graph.spec.nodes.map((n) => [n.id, n.reasoning_effort]))).toEqual({
      moderator: 'low',
      analyst: 'low',
      critic: 'low',
      evaluator: 'high',
    });
    expect(() => withEfforts(ordinary, 'ordinary', parseEffortMix('reviewer=low'))).toThrow(
      /has no node or role "reviewer"/,
    );
  });

  it('runs each mix beside its graph: P/R and per-role completion tokens per judgment in one table', async () => {
    const { router, fake } = await startFake({ fallback: reasoningJudge(universalReply('match')) });
    const { entries } = await resolveGraphs(['ordinary'], {
      reference: null,
      efforts: [parseEffortMix('analyst=low,evaluator=high')],
    });
    expect(entries.map((e) => e.label)).toEqual(['ordinary', 'ordinary.effort-analyst-low-evaluator-high']);
    const run = await runAblation({
      dataset: await loadDataset('datasets/sample.jsonl'),
      entries,
      reference: null,
      baseline: false,
      router,
      outDir: await tempDir(),
      concurrency: 2,
      limit: 4,
      resamples: 50,
    });
    expect(run.completed).toBe(true);
    const byName = new Map(run.results!.graphs.map((g) => [g.name, g]));
    const plain = byName.get('ordinary')!;
    const mixed = byName.get('ordinary.effort-analyst-low-evaluator-high')!;
    // The fake says match to everything: both judge every item, with the same P/R (a verdict of the judge,
    // not of its effort), each in the results table.
    for (const g of [plain, mixed]) {
      expect(g.metrics.n).toBe(4);
      expect(g.metrics.point.recall).toBe(1);
    }
    const completion = (g: typeof plain, role: string) => g.usage.perRole[role]!.completionTokensPerJudgment;
    // Unset is the model's default (medium, 800-token traces); low and high move each role's cost.
    expect(completion(mixed, 'analyst')).toBeLessThan(completion(plain, 'analyst') / 2);
    expect(completion(mixed, 'evaluator')).toBeGreaterThan(2 * completion(plain, 'evaluator'));
    expect(completion(mixed, 'critic')).toBe(completion(plain, 'critic'));
    const sent = fake.calls.map((c) => `${c.role}:${String(c.body['reasoning_effort'])}`);
    expect(sent).toContain('analyst:low');
    expect(sent).toContain('evaluator:high');
  });
});
