/**
 * How the executor reads real inference-server replies (issue 13 item 8), each on the scripted fake:
 * cut replies, context limits on re-asks, per-role budgets, out-of-range numbers, incoherent verdicts.
 */
import { describe, expect, it } from 'vitest';

import { defaultMaxTokens } from '../../src/judge/budgets.js';
import { getPreset, PRESETS } from '../../src/judge/presets.js';
import { runJudgment } from '../../src/judge/run.js';
import { universalReply, type FakeOpenAI } from '../fakes/openai.js';
import { soon, useFakeRouter, VERIFY_INPUT as input } from './helpers.js';

const setup = useFakeRouter();
const single = () => getPreset('single-judge')!;
const budgets = (f: FakeOpenAI) => f.calls.map((c) => c.body.max_tokens);
/** The judge's default budget: its answer plus the trace allowance of an unset effort (768 + 2 048). */
const JUDGE_BUDGET = defaultMaxTokens('judge');

describe('finish_reason length (a reply cut at max_tokens)', () => {
  it('is re-asked once with a doubled budget, the same prompt, and then decides', async () => {
    const { fake: f, router: r } = await setup({
      fallback: { kind: 'budget', body: universalReply('match', 0.8), needTokens: 4_000 },
    });
    const j = await runJudgment(single(), input, { router: r, deadline: soon() });
    expect(j.status).toBe('ok');
    expect(JUDGE_BUDGET).toBe(2_816);
    expect(budgets(f)).toEqual([JUDGE_BUDGET, 2 * JUDGE_BUDGET]);
    // Not an echo of the cut JSON: the same two messages again.
    expect(f.calls[1]?.body.messages).toEqual(f.calls[0]?.body.messages);
    expect(j.transcript[0]?.reasks).toBe(1);
  });

  it('is RW_JUDGE_TRUNCATED after the one larger budget is cut too: 2 calls, never more', async () => {
    const { fake: f, router: r } = await setup({
      fallback: { kind: 'budget', body: universalReply('match'), needTokens: 100_000 },
    });
    const j = await runJudgment(single(), input, { router: r, deadline: soon() });
    expect([j.status, j.reward, j.error?.code]).toEqual(['judge_error', null, 'RW_JUDGE_TRUNCATED']);
    expect(j.error?.message).toContain('finish_reason length');
    expect(budgets(f)).toEqual([JUDGE_BUDGET, 2 * JUDGE_BUDGET]);
  });

  it('is not re-asked when no larger budget fits the context', async () => {
    // The prompt is ~950 tokens: a 1 200-token context leaves less than 1.25 × the default budget for the answer.
    const { fake: f, router: r } = await setup(
      { fallback: { kind: 'budget', body: universalReply('match'), needTokens: 5_000 } },
      { context_tokens: 1_200 },
    );
    const j = await runJudgment(single(), input, { router: r, deadline: soon() });
    expect(j.error?.code).toBe('RW_JUDGE_TRUNCATED');
    expect(j.error?.message).toContain('no larger budget fits the context');
    expect(f.calls).toHaveLength(1);
  });

  it('an empty reply cut at the budget (all of it spent before any content) is truncated, not unparsable', async () => {
    const { router: r } = await setup({ fallback: { kind: 'text', text: null, finishReason: 'length' } });
    const j = await runJudgment(single(), input, { router: r, deadline: soon() });
    expect(j.error?.code).toBe('RW_JUDGE_TRUNCATED');
  });
});

describe('per-role default max_tokens', () => {
  it('every call of every preset carries its role default', async () => {
    const { fake: f, router: r } = await setup({ fallback: { kind: 'json', body: universalReply('match') } });
    for (const [name, graph] of PRESETS) {
      if (graph.llmCallsPerJudgment === 0) continue;
      f.resetStats();
      const j = await runJudgment(graph, input, { router: r, deadline: soon() });
      expect(j.status, name).toBe('ok');
      for (const c of f.calls) expect(c.body.max_tokens, `${name} ${c.role}`).toBe(defaultMaxTokens(c.role!));
    }
  });

  it('a routing override or a node max_tokens wins over the role default', async () => {
    const { fake: f, router: r } = await setup({ fallback: { kind: 'json', body: universalReply('match') } });
    const { compileGraph } = await import('../../src/judge/graph.js');
    const graph = compileGraph({
      decision: { rule: 'evaluator', node: 'j' },
      nodes: [{ id: 'j', role: 'judge', max_tokens: 300 }],
    });
    await runJudgment(graph, input, { router: r, deadline: soon() });
    expect(budgets(f)).toEqual([300]);
  });
});

describe('context overflow', () => {
  it("llama.cpp's exceed_context_size_error is the node's named reason, after one call", async () => {
    const { fake: f, router: r } = await setup({ contextTokens: 200 }, { max_retries: 3 });
    const j = await runJudgment(single(), input, { router: r, deadline: soon() });
    expect([j.status, j.reward, j.error?.code]).toEqual(['judge_error', null, 'RW_JUDGE_CONTEXT_OVERFLOW']);
    expect(f.calls).toHaveLength(1);
  });

  it('a re-ask that would not fit the context is not sent', async () => {
    // First prompt ~950 tokens fits 1 800; the re-ask appends ~2 000 chars of echoed reply and would not.
    const { fake: f, router: r } = await setup(
      { contextTokens: 1_800, fallback: { kind: 'text', text: `not json ${'x'.repeat(3_000)}` } },
      { context_tokens: 1_800 },
    );
    const j = await runJudgment(single(), input, { router: r, deadline: soon() });
    expect(j.error?.code).toBe('RW_JUDGE_UNPARSABLE');
    expect(j.error?.message).toContain('would not fit the context');
    expect(f.calls).toHaveLength(1);
    expect(f.calls.every((c) => c.status === 200)).toBe(true);
  });

  it("learns llama.cpp's n_ctx from an overflow and then keeps re-asks inside it", async () => {
    const { fake: f, router: r } = await setup({
      contextTokens: 1_800,
      fallback: { kind: 'text', text: `not json ${'x'.repeat(3_000)}` },
    });
    const long = {
      ...input,
      candidate: `${input.candidate} ${'and more detail '.repeat(400)}`.slice(0, 7_000),
    };
    const first = await runJudgment(single(), long, { router: r, deadline: soon() });
    expect(first.error?.code).toBe('RW_JUDGE_CONTEXT_OVERFLOW');
    expect(r.backends()[0]?.contextTokens?.()).toBe(1_800);
    f.resetStats();
    // Without the learned size the re-ask would be sent and come back a 400 overflow.
    const second = await runJudgment(single(), input, { router: r, deadline: soon() });
    expect(second.error?.code).toBe('RW_JUDGE_UNPARSABLE');
    expect(second.error?.message).toContain('would not fit the context of 1800 tokens');
    expect(f.calls).toHaveLength(1);
  });

  it('a re-ask that fits is sent (the check is not a blanket refusal)', async () => {
    const { fake: f, router: r } = await setup(
      {
        script: [{ kind: 'text', text: 'not json' }],
        fallback: { kind: 'json', body: universalReply('match') },
      },
      { context_tokens: 8_192 },
    );
    const j = await runJudgment(single(), input, { router: r, deadline: soon() });
    expect(j.status).toBe('ok');
    expect(f.calls).toHaveLength(2);
  });
});

describe('out-of-range numbers stay a named judge_error', () => {
  for (const [label, text] of [
    ['confidence 60', JSON.stringify({ reasoning: 'r', verdict: 'match', confidence: 60 })],
    ['confidence 0.1e+91', '{"reasoning":"r","verdict":"match","confidence":0.1e+91}'],
    ['confidence Infinity', '{"reasoning":"r","verdict":"match","confidence":Infinity}'],
    ['confidence -0.2', '{"reasoning":"r","verdict":"match","confidence":-0.2}'],
  ] as const) {
    it(`${label}: RW_JUDGE_UNPARSABLE after one re-ask, reward null`, async () => {
      const { fake: f, router: r } = await setup({ fallback: { kind: 'text', text } });
      const j = await runJudgment(single(), input, { router: r, deadline: soon() });
      expect([j.status, j.reward, j.score, j.error?.code]).toEqual([
        'judge_error',
        null,
        null,
        'RW_JUDGE_UNPARSABLE',
      ]);
      expect(f.calls).toHaveLength(2);
    });
  }
});

describe('incoherent replies', () => {
  it('an Evaluator no_match with confidence 0.1 (P(match) 0.9) keeps its verdict and is flagged', async () => {
    const { router: r } = await setup({
      fallback: { kind: 'json', body: { reasoning: 'r', verdict: 'no_match', confidence: 0.1 } },
    });
    const j = await runJudgment(single(), input, { router: r, deadline: soon() });
    expect([j.status, j.verdict, j.reward, j.score, j.incoherent]).toEqual(['ok', 'no_match', 0, 0.9, true]);
  });

  it('a vote that the rule decides against its share is not flagged (unanimous: 1 of 2 say match)', async () => {
    // no-evaluator: Moderator → Analyst (match) → Critic (no_match), decided by unanimity.
    const { router: r } = await setup({
      script: [
        { kind: 'json', body: universalReply('match', 0.9) },
        { kind: 'json', body: universalReply('match', 0.9) },
        { kind: 'json', body: universalReply('no_match', 0.9) },
      ],
    });
    const j = await runJudgment(getPreset('no-evaluator')!, input, { router: r, deadline: soon() });
    expect([j.verdict, j.score, j.incoherent]).toEqual(['no_match', 0.5, false]);
  });

  it('a voter whose confidence argues against its own stance flags the judgment', async () => {
    const { router: r } = await setup({ fallback: { kind: 'json', body: universalReply('match', 0.3) } });
    const j = await runJudgment(getPreset('vote-3')!, input, { router: r, deadline: soon() });
    expect([j.verdict, j.reward, j.incoherent]).toEqual(['match', 1, true]);
  });

  it('a coherent verdict is not flagged', async () => {
    const { router: r } = await setup({
      fallback: { kind: 'json', body: { reasoning: 'r', verdict: 'no_match', confidence: 0.8 } },
    });
    const j = await runJudgment(single(), input, { router: r, deadline: soon() });
    expect([j.verdict, j.score, j.incoherent]).toEqual(['no_match', 0.2, false]);
  });
});
