/**
 * Reasoning judges end to end on the fake (issue 37 items 1, 6, 7, 8): every reply shape judged on its final
 * message, the drafted opposite verdict never counting, a trace cut by the budget asked again with a larger
 * one (not re-asked as invalid), reasoning tokens counted (reported, else estimated and marked), the trace
 * kept bounded on the node's message, and the inline-trace warning given once per backend.
 */
import { afterEach, describe, expect, it } from 'vitest';

import { createOpenAICompatibleBackend, type InlineReasoning } from '../../src/judge/backends/openai.js';
import { defaultMaxTokens } from '../../src/judge/budgets.js';
import { comparePair } from '../../src/judge/compare.js';
import { getPreset } from '../../src/judge/presets.js';
import { runJudgment } from '../../src/judge/run.js';
import type { CallEvent } from '../../src/judge/types.js';
import { BackendSettings } from '../../src/settings/routing-file.js';
import { rankJudge } from '../fakes/comparative.js';
import { startFakeOpenAI, universalReply, type FakeOpenAI } from '../fakes/openai.js';
import { createThinkingJudge, TRACE_SHAPES, TRACE_TOKENS, type TraceShape } from '../fakes/thinking.js';
import { soon, useFakeRouter, VERIFY_INPUT as input } from './helpers.js';

const setup = useFakeRouter();
const single = () => getPreset('single-judge')!;
const judgeOf = (shape: TraceShape, extra: Partial<Parameters<typeof createThinkingJudge>[0]> = {}) =>
  createThinkingJudge({ shape, answer: () => universalReply('match', 0.8), ...extra });

describe('every reply shape: judged on the final message, one call', () => {
  for (const shape of TRACE_SHAPES) {
    it(`${shape}`, async () => {
      const judge = judgeOf(shape);
      const { fake, router } = await setup({ fallback: (b) => judge.reply(b) });
      const j = await runJudgment(single(), input, { router, deadline: soon() });
      expect([j.status, j.verdict, fake.calls.length]).toEqual(['ok', 'match', 1]);
      const m = j.transcript[0]!;
      // The trace drafted no_match; only the final message counts.
      if (shape !== 'hidden') expect(m.reasoning).toContain('"no_match"');
      else expect(m.reasoning).toBeUndefined();
      expect(m.reasoningTokens).toBe(TRACE_TOKENS.medium);
      expect(j.usage.reasoningTokens).toBe(TRACE_TOKENS.medium);
      expect(j.usage.reasoningTokensEstimated).toBeUndefined();
    });
  }
});

/** The single judge's default budget: its answer plus the trace allowance of an unset effort (budgets.ts). */
const JUDGE_BUDGET = defaultMaxTokens('judge');

describe('a reply that is all trace is a cut reply', () => {
  for (const shape of ['reasoning_content', 'inline:think', 'inline:harmony', 'template'] as const) {
    it(`${shape}: a trace longer than the budget is asked again with a raised budget, then judged`, async () => {
      const judge = judgeOf(shape, { traceTokens: JUDGE_BUDGET + 1_000 });
      const { fake, router } = await setup({ fallback: (b) => judge.reply(b) });
      const j = await runJudgment(single(), input, { router, deadline: soon() });
      expect([j.status, j.verdict]).toEqual(['ok', 'match']);
      expect(fake.calls.map((c) => c.body.max_tokens)).toEqual([JUDGE_BUDGET, 2 * JUDGE_BUDGET]);
      expect(j.transcript[0]?.reasks).toBe(1);
    });
  }

  it('a trace that never closed is cut even with finish_reason stop (not re-asked as invalid JSON)', async () => {
    const judge = judgeOf('inline:think');
    const { fake, router } = await setup({
      script: [
        { kind: 'completion', message: { content: '<think>\nhmm, so' }, finishReason: 'stop', usage: {} },
      ],
      fallback: (b) => judge.reply(b),
    });
    const j = await runJudgment(single(), input, { router, deadline: soon() });
    expect(j.status).toBe('ok');
    // Asked again as it was (a raise), not with the invalid reply echoed back.
    expect(fake.calls[1]?.body.messages).toEqual(fake.calls[0]?.body.messages);
    expect(fake.calls[1]?.body.max_tokens).toBe(2 * JUDGE_BUDGET);
  });

  it('still cut with the raised budget: RW_JUDGE_TRUNCATED, never RW_JUDGE_UNPARSABLE', async () => {
    const judge = judgeOf('inline:seed', { traceTokens: 10_000 });
    const { router } = await setup({ fallback: (b) => judge.reply(b) });
    const j = await runJudgment(single(), input, { router, deadline: soon() });
    expect([j.status, j.reward, j.error?.code]).toEqual(['judge_error', null, 'RW_JUDGE_TRUNCATED']);
  });

  it('a closed trace with nothing after it is invalid output: re-asked once', async () => {
    const judge = judgeOf('inline:think');
    const { fake, router } = await setup({
      script: [
        { kind: 'completion', message: { content: '<think>x</think>' }, finishReason: 'stop', usage: {} },
      ],
      fallback: (b) => judge.reply(b),
    });
    const j = await runJudgment(single(), input, { router, deadline: soon() });
    expect(j.status).toBe('ok');
    expect(fake.calls[1]?.body.messages?.length).toBe(4);
  });
});

describe('reasoning tokens', () => {
  it('estimated from the trace and marked where the server reports none, within 10 %', async () => {
    const judge = judgeOf('inline:think', { usage: 'none' });
    const events: CallEvent[] = [];
    const { router } = await setup({ fallback: (b) => judge.reply(b) });
    const j = await runJudgment(getPreset('default')!, input, {
      router,
      deadline: soon(),
      observer: { onCall: (e) => events.push(e) },
    });
    expect(j.status).toBe('ok');
    expect(j.usage.reasoningTokensEstimated).toBe(true);
    const truth = judge.generated.reasoningTokens;
    expect(Math.abs((j.usage.reasoningTokens ?? 0) - truth) / truth).toBeLessThan(0.1);
    expect(events.reduce((s, e) => s + (e.reasoningTokens ?? 0), 0)).toBe(j.usage.reasoningTokens);
  });

  it('a judge that does not reason leaves its messages as they were (no reasoning fields)', async () => {
    const { router } = await setup({ fallback: { kind: 'json', body: universalReply('match') } });
    const j = await runJudgment(single(), input, { router, deadline: soon() });
    expect(JSON.stringify(j.transcript[0])).not.toContain('reasoningTokens');
    expect(j.transcript[0]?.reasoningTokens).toBeUndefined();
    expect(j.usage.reasoningTokens).toBeUndefined();
  });

  it('a long trace is kept bounded on the node message', async () => {
    const judge = judgeOf('reasoning_content', { traceTokens: 1_400 });
    const { router } = await setup({ fallback: (b) => judge.reply(b) });
    const j = await runJudgment(single(), input, { router, deadline: soon() });
    expect(j.transcript[0]?.reasoning).toContain('characters of the trace omitted');
    expect(j.transcript[0]?.reasoning?.length).toBeLessThan(3_100);
  });
});

describe('reasoning tokens through cascades and comparisons', () => {
  it('a cascade that escalates sums both stages', async () => {
    // single-judge says match (escalates), the default committee decides.
    const judge = judgeOf('reasoning_content');
    const { fake, router } = await setup({ fallback: (b) => judge.reply(b) });
    const j = await runJudgment(getPreset('cascade')!, input, { router, deadline: soon() });
    expect(j.stopReason).toBe('escalated');
    expect(j.usage.reasoningTokens).toBe(fake.calls.length * TRACE_TOKENS.medium);
  });

  it('a pairwise comparison counts the reasoning of both orders, judged on the final message', async () => {
    const judge = createThinkingJudge({
      shape: 'inline:harmony',
      answer: (b) => {
        const reply = rankJudge(b);
        return reply.kind === 'json' ? reply.body : {};
      },
    });
    const { router } = await setup({ fallback: (b) => judge.reply(b) });
    const rank = (n: number) =>
      `Idea with RANK${n}: train a step-level verifier on labelled traces and rerank.`;
    const r = await comparePair(
      {
        question: input.question,
        groundTruth: input.groundTruth,
        criterion: 'match',
        a: rank(1),
        b: rank(2),
      },
      { router, deadline: soon() },
    );
    expect(r.status).toBe('ok');
    expect(r.usage.reasoningTokens).toBe(judge.generated.reasoningTokens);
    expect(r.usage.reasoningTokens).toBeGreaterThan(0);
  });
});

describe('the inline-trace warning', () => {
  let fake: FakeOpenAI | undefined;
  afterEach(async () => fake?.close());

  const run = async (shape: TraceShape): Promise<InlineReasoning[]> => {
    const judge = judgeOf(shape);
    fake = await startFakeOpenAI({ fallback: (b) => judge.reply(b) });
    const events: InlineReasoning[] = [];
    const backend = createOpenAICompatibleBackend(
      BackendSettings.parse({ base_url: fake.baseURL, model: 'fake-model', max_retries: 0 }),
      { name: 'gptoss', onInlineReasoning: (e) => events.push(e) },
    );
    const router = {
      name: 'gptoss',
      backends: () => [backend],
      route: () => ({ backend, model: 'fake-model' }),
    };
    for (let i = 0; i < 3; i++) await runJudgment(single(), input, { router, deadline: soon() });
    await backend.close?.();
    return events;
  };

  it('is given once per backend when traces arrive inline', async () => {
    expect(await run('inline:harmony')).toEqual([
      { backend: 'gptoss', model: 'fake-model', replica: undefined },
    ]);
  });

  it('is not given when the engine parses the trace into a field', async () => {
    expect(await run('reasoning_content')).toEqual([]);
  });
});
