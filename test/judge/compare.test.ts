import { describe, expect, it } from 'vitest';

import {
  canonicalPair,
  comparePair,
  mirrorPair,
  pickBest,
  rateIdea,
  type PairInput,
} from '../../src/judge/compare.js';
import { comparativeKey, keySettingsOf } from '../../src/judge/key.js';
import type { JudgeObserver } from '../../src/judge/types.js';
import { comparisonReply, positionAJudge, rankJudge, shownIdeas } from '../fakes/comparative.js';
import type { FakeChatRequest } from '../fakes/openai.js';
import { createThinkingJudge } from '../fakes/thinking.js';
import { soon, useFakeRouter } from './helpers.js';

const QUESTION = 'How can language models learn to verify their own reasoning steps?';
const GT =
  'We propose process supervision: a reward model trained on step-level labels scores each reasoning step.';
const idea = (rank: number): string =>
  `Idea with RANK${rank}: train a step-level verifier on labelled reasoning traces and rerank samples.`;
const input = (a: string, b: string): PairInput => ({
  question: QUESTION,
  groundTruth: GT,
  criterion: 'match',
  a,
  b,
});

const setup = useFakeRouter();

/** rankJudge's answer as a JSON body, for a judge that thinks first. */
const rankAnswer = (body: FakeChatRequest): unknown => {
  const reply = rankJudge(body);
  return reply.kind === 'json' ? reply.body : null;
};

describe('comparePair', () => {
  it('asks both orders (a in position A, then b in position A) and maps the answers back', async () => {
    const { fake, router } = await setup({ fallback: rankJudge });
    const r = await comparePair(input(idea(1), idea(2)), { router, deadline: soon() });
    expect(fake.callCount).toBe(2);
    const shown = fake.calls.map((c) => shownIdeas(c.body));
    expect(shown).toEqual(
      expect.arrayContaining([
        [idea(1), idea(2)],
        [idea(2), idea(1)],
      ]),
    );
    expect(fake.calls.every((c) => c.body.response_format?.json_schema?.name === 'comparison')).toBe(true);
    expect(r).toMatchObject({
      status: 'ok',
      preference: 'b',
      orders: { ab: 'b', ba: 'b' },
      positionBias: false,
    });
    expect(r.usage.calls).toBe(2);
    expect(r.votes.map((v) => [v.order, v.winner, v.preference]).sort()).toEqual([
      ['ab', 'B', 'b'],
      ['ba', 'A', 'b'],
    ]);
  });

  it('counts orders that disagree as a position-bias event and a tie', async () => {
    const { router } = await setup({ fallback: positionAJudge });
    const r = await comparePair(input(idea(1), idea(2)), { router, deadline: soon() });
    expect(r).toMatchObject({
      status: 'ok',
      preference: 'tie',
      orders: { ab: 'a', ba: 'b' },
      positionBias: true,
    });
  });

  it('fails the pair (null, never a loss) when the backend keeps answering 500, and stops the other call', async () => {
    // Order (a, b) is answered 500 on every attempt (its one retry too); order (b, a) hangs until the pair ends.
    const { fake, router } = await setup(
      {
        fallback: (body) =>
          shownIdeas(body)[0] === idea(1) ? { kind: 'status', status: 500 } : { kind: 'hang' },
      },
      { max_retries: 1 },
    );
    const started = Date.now();
    const r = await comparePair(input(idea(1), idea(2)), { router, deadline: soon(3_000) });
    expect(r.status).toBe('judge_error');
    expect(r.preference).toBeNull();
    expect(r.error?.code).toBe('RW_JUDGE_UNAVAILABLE');
    expect(Date.now() - started).toBeLessThan(2_500);
    await fake.waitForIdle();
    expect(fake.calls.some((c) => c.outcome === 'client_closed')).toBe(true);
  });

  it('answers timeout with a null result when the backend hangs past the deadline', async () => {
    const { router } = await setup({ fallback: { kind: 'hang' } });
    const r = await comparePair(input(idea(1), idea(2)), { router, deadline: soon(200) });
    expect(r).toMatchObject({ status: 'timeout', preference: null, error: { code: 'RW_JUDGE_TIMEOUT' } });
  });

  it('re-asks once on a malformed reply, then fails with RW_JUDGE_UNPARSABLE', async () => {
    const { fake, router } = await setup({
      script: [{ kind: 'text', text: 'A is better' }, comparisonReply('A'), comparisonReply('B')],
    });
    const ok = await comparePair(input(idea(1), idea(2)), { router, deadline: soon() });
    expect(ok.status).toBe('ok');
    expect(ok.usage.calls).toBe(3);
    expect(fake.callCount).toBe(3);
    fake.setScript([], {
      kind: 'json',
      body: { reasoning: 'r', winner: 'C', margin: 'clear', confidence: 2 },
    });
    const bad = await comparePair(input(idea(1), idea(2)), { router, deadline: soon() });
    expect(bad).toMatchObject({
      status: 'judge_error',
      preference: null,
      error: { code: 'RW_JUDGE_UNPARSABLE' },
    });
  });

  it("raises a cut reply's budget once (a reasoning judge's trace filled the routed max_tokens), not re-asked as invalid", async () => {
    // A judge that thinks 400 tokens before answering, routed 300 for comparisons: every first reply is all
    // trace (finish_reason length). The raised budget (600) fits trace and answer.
    const judge = createThinkingJudge({ shape: 'reasoning_content', traceTokens: 400, answer: rankAnswer });
    const { fake, router } = await setup(
      { fallback: (b) => judge.reply(b) },
      {},
      { roles: { comparison: { max_tokens: 300 } } },
    );
    const r = await comparePair(input(idea(1), idea(2)), { router, deadline: soon() });
    expect(r).toMatchObject({ status: 'ok', preference: 'b', orders: { ab: 'b', ba: 'b' } });
    expect(r.usage.calls).toBe(4);
    const budgets = fake.calls.map((c) => c.body.max_tokens);
    expect(budgets.sort()).toEqual([300, 300, 600, 600]);
    // Asked again as it was: no invalid-JSON re-ask appended to the conversation.
    expect(fake.calls.every((c) => c.body.messages?.length === 2)).toBe(true);
  });

  it('fails a pair with RW_JUDGE_TRUNCATED when the raised budget is cut too', async () => {
    const judge = createThinkingJudge({ shape: 'inline:think', traceTokens: 2_000, answer: rankAnswer });
    const { fake, router } = await setup(
      { fallback: (b) => judge.reply(b) },
      {},
      { roles: { comparison: { max_tokens: 300 } } },
    );
    const r = await comparePair(input(idea(1), idea(2)), { router, deadline: soon() });
    expect(r).toMatchObject({
      status: 'judge_error',
      preference: null,
      error: { code: 'RW_JUDGE_TRUNCATED' },
    });
    // The order that gave up asked twice, the second time with the raised budget; the pair then stopped the
    // other order, which may have been asked once or twice by then.
    const budgets = fake.calls.map((c) => c.body.max_tokens);
    expect(budgets.filter((b) => b === 600).length).toBeGreaterThanOrEqual(1);
    expect(fake.callCount).toBeLessThanOrEqual(4);
  });

  it('asks several judges per order with distinct seeds at temperature > 0 and takes the plurality', async () => {
    const { fake, router } = await setup({ fallback: rankJudge });
    const r = await comparePair(input(idea(3), idea(2)), { router, deadline: soon(), judges: 3 });
    expect(fake.callCount).toBe(6);
    expect(new Set(fake.calls.map((c) => c.body.seed))).toEqual(new Set([1, 2, 3]));
    expect(fake.calls.every((c) => c.body.temperature === 0.7)).toBe(true);
    expect(r.preference).toBe('a');
    expect(new Set(r.votes.map((v) => v.nodeId))).toEqual(
      new Set(['comparison_1', 'comparison_2', 'comparison_3']),
    );
  });

  it('decides degenerate candidates without any LLM call: a filler loses, two fillers tie', async () => {
    const { fake, router } = await setup({ fallback: rankJudge });
    expect(
      (await comparePair(input('Thought process:', idea(1)), { router, deadline: soon() })).preference,
    ).toBe('b');
    expect((await comparePair(input('', ':'), { router, deadline: soon() })).preference).toBe('tie');
    expect(fake.callCount).toBe(0);
  });

  it('reports every call to the observer under role comparison', async () => {
    const { router } = await setup({ fallback: rankJudge });
    const events: string[] = [];
    const observer: JudgeObserver = { onCall: (e) => events.push(`${e.role}:${e.outcome}`) };
    await comparePair(input(idea(1), idea(2)), { router, deadline: soon(), observer });
    expect(events).toEqual(['comparison:ok', 'comparison:ok']);
  });
});

describe('rateIdea and pickBest', () => {
  it('rates an idea 1-5 in one call; a degenerate idea is a 1 without a call', async () => {
    const { fake, router } = await setup({ fallback: { kind: 'json', body: { reasoning: 'r', score: 4 } } });
    const base = { question: QUESTION, groundTruth: null, criterion: 'novelty' as const };
    expect(await rateIdea({ ...base, idea: idea(1) }, { router, deadline: soon() })).toMatchObject({
      status: 'ok',
      score: 4,
    });
    expect(await rateIdea({ ...base, idea: 'N/A' }, { router, deadline: soon() })).toMatchObject({
      status: 'rejected_input',
      score: 1,
    });
    expect(fake.callCount).toBe(1);
  });

  it('re-asks a pick outside 1..N and maps it back past degenerate candidates', async () => {
    const { fake, router } = await setup({
      script: [
        { kind: 'json', body: { reasoning: 'r', best: 7, confidence: 0.9 } },
        { kind: 'json', body: { reasoning: 'r', best: 2, confidence: 0.9 } },
      ],
    });
    const r = await pickBest(
      {
        question: QUESTION,
        groundTruth: null,
        criterion: 'novelty',
        candidates: [idea(1), 'ok', idea(2), idea(3)],
      },
      { router, deadline: soon() },
    );
    // 'ok' is a filler: the prompt shows 3 candidates, and pick 2 is input index 2.
    expect(shownIdeas(fake.calls[0]!.body)).toEqual([idea(1), idea(2), idea(3)]);
    expect(r).toMatchObject({ status: 'ok', best: 2 });
    expect(r.usage.calls).toBe(2);
  });
});

describe('canonical pairs and keys', () => {
  it('computes (a, b) and (b, a) once: the canonical order is keyed, the other is its mirror', async () => {
    const { router } = await setup({ fallback: rankJudge });
    const forward = canonicalPair(input(idea(1), idea(2)));
    const backward = canonicalPair(input(idea(2), idea(1)));
    expect(forward.swapped).toBe(false);
    expect(backward.swapped).toBe(true);
    expect(backward.input).toEqual(forward.input);
    const key = (p: PairInput, judges = 1) =>
      comparativeKey(router, { kind: 'pair', input: p, judges }, keySettingsOf({}));
    expect(key(forward.input)).toBe(key(backward.input));
    expect(key(forward.input)).not.toBe(key(forward.input, 2));
    expect(key(forward.input)).not.toBe(key({ ...forward.input, criterion: 'novelty' }));
    expect(key(forward.input)).not.toBe(key({ ...forward.input, groundTruth: null }));
    const judged = await comparePair(forward.input, { router, deadline: soon() });
    const direct = await comparePair(input(idea(2), idea(1)), { router, deadline: soon() });
    const mirrored = mirrorPair(judged);
    expect(mirrored.preference).toBe(direct.preference);
    expect(mirrored.orders).toEqual(direct.orders);
    expect(mirrored.votes.map((v) => [v.order, v.winner, v.preference]).sort()).toEqual(
      direct.votes.map((v) => [v.order, v.winner, v.preference]).sort(),
    );
  });
});

describe("comparisons take the caller's preparation (serving prepared the texts to key them)", () => {
  it('a text the caller prepared is not prepared again; others are', async () => {
    const { fake, router } = await setup({ fallback: rankJudge });
    const a = idea(1);
    const seen: string[] = [];
    const r = await comparePair(input(a, idea(2)), {
      router,
      deadline: soon(),
      // A verdict the caller's preparation would never give for this text: only the hook can produce it.
      preparedText: (text) => {
        seen.push(text);
        return text === a ? { candidate: a, reasoningChars: 0, rejection: 'encoded' } : undefined;
      },
    });
    expect(seen).toEqual([a, idea(2)]);
    expect(r.status).toBe('rejected_input');
    expect(r.preference).toBe('b');
    expect(r.reason).toBe('a: encoded');
    expect(fake.callCount).toBe(0);
  });
});
