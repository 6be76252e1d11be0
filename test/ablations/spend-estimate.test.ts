/** The dry-run estimate of a graph that can stop early states its maximum beside what was measured (issue 40 item 7). */
import { describe, expect, it } from 'vitest';

import { estimateSpend, renderEstimate } from '../../src/ablations/spend.js';
import { getPreset } from '../../src/judge/presets.js';
import { VERIFY_INPUT } from '../judge/helpers.js';
import { item } from './helpers.js';

const NO_CAP = { tokens: null, text: 'no cap' };

describe('renderEstimate', () => {
  it('states the most a judgment can call beside the measured mean of an early-stopping graph', () => {
    const text = renderEstimate(
      {
        graphs: [
          {
            label: 'debate',
            callsPerJudgment: 7,
            tokensPerJudgment: 9000,
            maxCallsPerJudgment: 7,
            maxTokensPerJudgment: 9000,
          },
          {
            label: 'debate-consensus',
            callsPerJudgment: 3,
            tokensPerJudgment: 4000,
            maxCallsPerJudgment: 7,
            maxTokensPerJudgment: 7000,
          },
        ],
        judgments: 20,
        calls: 100,
        maxCalls: 140,
        tokens: 130_000,
      },
      NO_CAP,
      false,
    );
    expect(text).toContain(
      'estimate: 20 judgments, 100 LLM calls (at most 140 if every judgment makes every call), ~130000 tokens',
    );
    expect(text).toContain(
      '  debate-consensus: 3.00 calls (up to 7 when a judgment makes every call), ~4000 tokens',
    );
    expect(text).toContain('  debate: 7.00 calls, ~9000 tokens');
  });

  it('adds nothing when every graph spent its maximum', () => {
    const text = renderEstimate(
      {
        graphs: [
          {
            label: 'vote-3',
            callsPerJudgment: 3,
            tokensPerJudgment: 3000,
            maxCallsPerJudgment: 3,
            maxTokensPerJudgment: 3000,
          },
        ],
        judgments: 10,
        calls: 30,
        maxCalls: 30,
        tokens: 30_000,
      },
      NO_CAP,
      false,
    );
    expect(text).toContain('estimate: 10 judgments, 30 LLM calls, ~30000 tokens');
    expect(text).not.toMatch(/up to|at most/);
  });
});

describe('estimateSpend', () => {
  it('measures each graph on the offline backend and keeps its maximum calls per judgment', async () => {
    const graphs = ['debate', 'debate-opening', 'debate-consensus'].map((label) => ({
      label,
      graph: getPreset(label)!,
    }));
    // A real candidate (the helper's one-letter text is rejected as degenerate before any call).
    const items = [item('a', 1), item('b', 0)].map((i) => ({
      ...i,
      question: VERIFY_INPUT.question,
      candidate: VERIFY_INPUT.candidate,
      ground_truth: VERIFY_INPUT.groundTruth,
    }));
    const e = await estimateSpend(graphs, items, 4);
    expect(e.graphs.map((g) => [g.label, g.maxCallsPerJudgment])).toEqual([
      ['debate', 7],
      ['debate-opening', 3],
      ['debate-consensus', 7],
    ]);
    expect(e.graphs[0]!.callsPerJudgment).toBe(7);
    expect(e.graphs[1]!.callsPerJudgment).toBe(3);
    expect(e.maxCalls).toBe(4 * (7 + 3 + 7));
    expect(e.calls).toBeLessThanOrEqual(e.maxCalls);
  });
});
