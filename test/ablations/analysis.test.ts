import { describe, expect, it } from 'vitest';
import { parallelGroups } from '../../src/ablations/ablate/agents.js';
import { analyze, tallyRecords } from '../../src/ablations/ablate/analysis.js';
import { clusterIndex } from '../../src/ablations/dataset.js';
import { f1CostSvg, niceTicks, precisionRecallSvg } from '../../src/ablations/plots.js';
import { formatProgress, createProgress } from '../../src/ablations/progress.js';
import { renderReport } from '../../src/ablations/ablate/report.js';
import { getPreset } from '../../src/judge/presets.js';
import { entry, item, record, type Msg } from './helpers.js';

describe('tallyRecords (one pass over a graph’s records)', () => {
  // Two clusters: a and b share a ground truth, c has its own.
  const items = [item('a', 1, 'gt-1'), item('b', 0, 'gt-1'), item('c', 1, 'gt-2'), item('d', 0, 'gt-2')];
  const set = { items, clusters: clusterIndex(items), hardNegatives: true };
  const records = [
    record('a', 'ok', 'match', 1, 'single_round', [[1, 'x', 'analyst', 'match']]),
    // Wrong verdict while a voter had the right stance: an oracle gap.
    record('b', 'ok', 'match', 1, 'single_round', [
      [1, 'x', 'analyst', 'match'],
      [1, 'y', 'analyst', 'no_match'],
    ]),
    record('c', 'judge_error', null, 1, 'node_failed', [[1, 'x', 'analyst', null]]),
    { ...record('d', 'rejected_input', 'no_match', 0, 'rejected_input', []), score: null },
  ];

  it('counts statuses, failures by code and cluster, rewards by kind and cluster, scores and gaps', () => {
    const t = tallyRecords(set, records, 2);
    const a = set.clusters.of[0]!;
    const c = set.clusters.of[2]!;
    expect(a).not.toBe(c);
    expect(t.statuses).toEqual({ ok: 2, rejected_input: 1, judge_error: 1, timeout: 0, overloaded: 0 });
    expect(t.failureCodes).toEqual({ RW_JUDGE_UNAVAILABLE: 1 });
    expect(t.failures[a]).toEqual({ hits: 0, trials: 2 });
    expect(t.failures[c]).toEqual({ hits: 1, trials: 2 });
    expect(t.kindTallies.get('positive')?.[a]).toEqual({ hits: 1, trials: 1 });
    expect(t.kindTallies.get('hard_negative')?.[a]).toEqual({ hits: 1, trials: 1 });
    expect(t.kindTallies.get('hard_negative')?.[c]).toEqual({ hits: 0, trials: 1 });
    expect(t.scored).toEqual([
      { score: 0.8, label: 1 },
      { score: 0.8, label: 0 },
    ]);
    expect(t.gaps[a]).toEqual({ hits: 1, trials: 2 });
  });

  it('has no oracle gap for a single voter', () => {
    const t = tallyRecords(set, records, 1);
    expect(t.gaps.every((g) => g.trials === 0)).toBe(true);
  });
});

describe('analyze: debate dynamics', () => {
  const items = [item('a', 1), item('b', 0), item('c', 1)];
  const records = [
    // label match: the critic starts wrong and concedes → helpful switch; verdict right.
    record('a', 'ok', 'match', 2, 'unanimous', [
      [1, 'proposer', 'analyst', 'match'],
      [1, 'critic', 'critic', 'no_match'],
      [2, 'proposer', 'analyst', 'match'],
      [2, 'critic', 'critic', 'match'],
    ]),
    // label no_match: the proposer starts right and is talked out of it → harmful switch; oracle gap.
    record('b', 'ok', 'match', 2, 'unanimous', [
      [1, 'proposer', 'analyst', 'no_match'],
      [1, 'critic', 'critic', 'match'],
      [2, 'proposer', 'analyst', 'match'],
      [2, 'critic', 'critic', 'match'],
    ]),
    record('c', 'judge_error', null, 1, 'node_failed', [[1, 'proposer', 'analyst', null]]),
  ];
  const results = analyze({
    items,
    datasetSha256: 'x',
    invalidLines: 0,
    entries: [entry('proposer-critic')],
    outcomes: new Map([['proposer-critic', records]]),
    seed: 1,
    backend: 'test',
    promptVersion: 'p',
    reference: null,
  });
  const g = results.graphs[0]!;

  it('counts switches per round, harmful and helpful switches, rounds used and stop reasons', () => {
    const d = g.dynamics!;
    expect(d.judgments).toBe(2);
    expect(d.roundsUsed).toEqual({ '2': 2 });
    expect(d.stopReasons).toEqual({ unanimous: 2 });
    expect(d.switches[0]).toEqual({ from: 1, to: 2, matchToNoMatch: 0, noMatchToMatch: 2, unchanged: 2 });
    expect(d.switches[1]).toEqual({ from: 2, to: 3, matchToNoMatch: 0, noMatchToMatch: 0, unchanged: 0 });
    expect(d.harmful).toBe(1);
    expect(d.helpful).toBe(1);
    expect(d.trajectories).toBe(4);
    expect(d.perRound[0]!.nodes).toEqual({
      proposer: { match: 1, no_match: 1, none: 0 },
      critic: { match: 1, no_match: 1, none: 0 },
    });
  });

  it('reports the oracle gap and keeps failures out of the confusion matrix', () => {
    expect(g.oracleGap).toMatchObject({ hits: 1, trials: 2, rate: 0.5 });
    expect(g.metrics.confusion).toEqual({ tp: 1, fp: 1, tn: 0, fn: 0 });
    expect(g.failure).toMatchObject({ hits: 1, trials: 3 });
    expect(g.failureCodes).toEqual({ RW_JUDGE_UNAVAILABLE: 1 });
    expect(g.nodes.map((n) => [n.nodeId, n.n, n.tpr, n.fpr])).toEqual([
      ['proposer', 2, 1, 1],
      ['critic', 2, 1, 1],
    ]);
  });

  it('renders a report with the summary table and the dynamics section', () => {
    const md = renderReport(results);
    expect(md).toContain('| proposer-critic | 0.500 [');
    expect(md).toContain('harmful switches 1, helpful switches 1');
    expect(md).toContain('| 1 → 2 | 0 | 2 | 2 |');
    expect(md).toMatch(/failure rate 33\.3% \(1\/3\)/);
  });
});

describe('analyze: agreement and paired comparison', () => {
  const items = [item('a', 1, 'g1'), item('b', 0, 'g1'), item('c', 1, 'g2'), item('d', 0, 'g3')];
  const analysts = (s1: 'match' | 'no_match', s2: 'match' | 'no_match'): Msg[] => [
    [1, 'analyst_1', 'analyst', s1],
    [1, 'analyst_2', 'analyst', s2],
  ];
  const mine = [
    record('a', 'ok', 'match', 1, 'single_round', analysts('match', 'match')),
    record('b', 'ok', 'no_match', 1, 'single_round', analysts('no_match', 'no_match')),
    record('c', 'ok', 'match', 1, 'single_round', analysts('match', 'no_match')),
    record('d', 'rejected_input', 'no_match', 0, 'rejected_input', []),
  ];
  const lexical = [
    record('a', 'ok', 'no_match', 1, 'single_round', []),
    record('b', 'ok', 'match', 1, 'single_round', []),
    record('c', 'ok', 'match', 1, 'single_round', []),
    record('d', 'rejected_input', 'no_match', 0, 'rejected_input', []),
  ];
  const results = analyze({
    items,
    datasetSha256: 'x',
    invalidLines: 0,
    entries: [entry('default'), entry('lexical')],
    outcomes: new Map([
      ['default', mine],
      ['lexical', lexical],
    ]),
    seed: 3,
    backend: 'test',
    promptVersion: 'p',
    reference: 'default',
  });

  it('computes Fleiss κ among parallel analysts from round-1 stances', () => {
    expect(parallelGroups(getPreset('default')!)).toEqual([
      { role: 'analyst', nodes: ['analyst_1', 'analyst_2'] },
    ]);
    expect(parallelGroups(getPreset('ordinary-plus')!)).toEqual([]);
    const a = results.graphs[0]!.agreement[0]!;
    expect(a.subjects).toBe(3);
    // rows [2,0], [0,2], [1,1]: P̄ = (1+1+0)/3, p = (1/2, 1/2) → κ = (2/3 − 1/2)/(1/2) = 1/3
    expect(a.kappa).toBeCloseTo(1 / 3, 12);
  });

  it('counts a rejected input as a real no_match', () => {
    expect(results.graphs[0]!.metrics.confusion).toEqual({ tp: 2, fp: 0, tn: 2, fn: 0 });
    expect(results.graphs[0]!.failure.hits).toBe(0);
    expect(results.graphs[1]!.byKind).toMatchObject({
      positive: { trials: 2, hits: 1, rate: 0.5 },
      hard_negative: { trials: 2, hits: 1, rate: 0.5 },
    });
  });

  it('compares each graph with the reference: ΔF1 and McNemar b/c', () => {
    expect(results.graphs[0]!.paired).toBeNull();
    const p = results.graphs[1]!.paired!;
    expect(p.against).toBe('default');
    // lexical right only on d and c (both right there); default right everywhere: b = 0, c = 2.
    expect(p.rates.mcnemar).toMatchObject({ b: 0, c: 2, exactP: 0.5 });
    // lexical: tp 1 (c), fp 1 (b), fn 1 (a) → F1 = 0.5; default F1 = 1.
    expect(p.rates.f1.point).toBeCloseTo(-0.5, 12);
    // 3 clusters: far too few for any interval to exclude 0 (jackknife-t on 2 degrees of freedom).
    expect(results.method).toBe('jackknife-t');
    expect(results.warnings[0]).toMatch(/only 3 ground-truth clusters/);
  });

  it('draws both plots as SVG naming every graph, with escaped text', () => {
    const renamed = {
      ...results,
      graphs: results.graphs.map((g, i) => (i === 1 ? { ...g, name: 'lex<&>' } : g)),
    };
    for (const svg of [precisionRecallSvg(renamed), f1CostSvg(renamed)]) {
      expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
      expect(svg.trim().endsWith('</svg>')).toBe(true);
      expect(svg).toContain('>default<');
      expect(svg).toContain('lex&lt;&amp;&gt;');
      expect(svg).not.toContain('lex<&>');
      expect(svg).not.toContain('NaN');
    }
    // Two graphs → two markers + two legend markers, each with CI whiskers on the PR plot.
    expect(precisionRecallSvg(results).match(/<circle /g)).toHaveLength(4);
  });
});

describe('plots and progress helpers', () => {
  it('picks nice ticks', () => {
    expect(niceTicks(0, 1)).toEqual([0, 0.2, 0.4, 0.6, 0.8, 1]);
    expect(niceTicks(0, 5600)).toEqual([0, 1000, 2000, 3000, 4000, 5000]);
  });

  it('formats a progress line with rate and ETA from this session only', () => {
    expect(formatProgress('ablate', 50, 100, 0, 10_000, 10)).toBe(
      'ablate [#####.....] 50/100  50%  5.0/s  ETA 0:10',
    );
    // 40 were already done (resumed): 10 in 10 s → 1/s, 50 left → 50 s.
    expect(formatProgress('', 50, 100, 40, 10_000, 10)).toBe('[#####.....] 50/100  50%  1.0/s  ETA 0:50');
    expect(formatProgress('', 0, 100, 0, 0, 4)).toContain('ETA --:--');
  });

  it('prints every 10% on a non-TTY stream and a final line', () => {
    const lines: string[] = [];
    let t = 0;
    const p = createProgress({
      total: 20,
      stream: { write: (s: string) => lines.push(s) },
      now: () => (t += 100),
    });
    for (let i = 0; i < 20; i++) p.tick();
    p.done();
    expect(lines).toHaveLength(10);
    expect(lines.at(-1)).toMatch(/20\/20 100%/);
  });

  it('prints no bar for a stage with nothing to do (no `0/0 100%`), on a TTY or not', () => {
    for (const isTTY of [false, true]) {
      const lines: string[] = [];
      const p = createProgress({
        total: 0,
        label: 'baselines (tokens)',
        stream: { write: (s: string) => lines.push(s), isTTY },
      });
      p.tick(0);
      p.done();
      expect(lines).toEqual([]);
    }
    // A stage whose units were all done before (a resumed run) still reports them.
    const lines: string[] = [];
    const p = createProgress({ total: 4, initial: 4, stream: { write: (s: string) => lines.push(s) } });
    p.done();
    expect(lines).toEqual([expect.stringMatching(/4\/4 100%/)]);
  });
});
