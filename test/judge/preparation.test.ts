/**
 * Issue 31 item 2: one preparation per candidate per judgment. `prepareInput` (src/judge/candidate.ts) is
 * wrapped in a counting spy; a cascade judgment (two stages) through the engine and through /v1/reward
 * prepares its candidate once, and a stage judges the prepared input as given (a raw trace passed as
 * prepared reaches both stages: a second preparation would strip it).
 */
import { describe, expect, it, vi } from 'vitest';

import * as candidateModule from '../../src/judge/candidate.js';
import { getPreset } from '../../src/judge/presets.js';
import { runJudgment } from '../../src/judge/run.js';
import { universalReply, type FakeChatRequest, type FakeReply } from '../fakes/openai.js';
import { candidate, GROUND_TRUTH, QUESTION, useHarness } from '../server/helpers.js';
import { soon, useFakeRouter, VERIFY_INPUT } from './helpers.js';

vi.mock('../../src/judge/candidate.js', async (importOriginal) => {
  const original = await importOriginal<typeof candidateModule>();
  return { ...original, prepareInput: vi.fn(original.prepareInput) };
});

const prepareInput = vi.mocked(candidateModule.prepareInput);

/** The first stage's judge says match (no stop: the cascade stops on a confident no_match), all escalate. */
const escalating = (): FakeReply => ({ kind: 'json', body: universalReply('match', 0.9) });

const TRACE = 'TRACEMARK the ground truth probably says process supervision';
const traced = { ...VERIFY_INPUT, candidate: `<think>${TRACE}</think>${VERIFY_INPUT.candidate}` };
const userText = (c: { body: FakeChatRequest }): string =>
  c.body.messages?.find((m) => m.role === 'user')?.content ?? '';

describe('a cascade prepares its candidate once', () => {
  const start = useFakeRouter();
  const harness = useHarness();
  const cascade = getPreset('cascade')!;

  it('the engine prepares once for both stages (an escalated judgment)', async () => {
    const { fake, router } = await start({ fallback: escalating() });
    prepareInput.mockClear();
    const j = await runJudgment(cascade, traced, { router, deadline: soon() });
    expect(j).toMatchObject({ status: 'ok', stopReason: 'escalated' });
    expect(fake.callCount).toBe(cascade.llmCallsPerJudgment);
    expect(prepareInput).toHaveBeenCalledTimes(1);
    expect(fake.calls.some((c) => userText(c).includes('TRACEMARK'))).toBe(false);
  });

  it('a prepared input is judged as given by both stages, not prepared again', async () => {
    const { fake, router } = await start({ fallback: escalating() });
    prepareInput.mockClear();
    const j = await runJudgment(cascade, traced, { router, deadline: soon(), prepared: {} });
    expect(j).toMatchObject({ status: 'ok', stopReason: 'escalated' });
    expect(prepareInput).not.toHaveBeenCalled();
    // Every call of both stages saw the text as given (a stage that prepared it would strip the trace).
    const stages = new Set(j.transcript.map((m) => m.nodeId));
    expect(stages).toEqual(new Set(['judge', 'analyst_1', 'analyst_2', 'evaluator']));
    expect(fake.calls.length).toBe(4);
    for (const c of fake.calls) expect(userText(c)).toContain('TRACEMARK');
  });

  it('/v1/reward prepares each candidate once for a cascade graph', async () => {
    const h = await harness({ fake: { fallback: escalating() } });
    prepareInput.mockClear();
    const res = await h.app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: {
        question: QUESTION,
        ground_truth: GROUND_TRUTH,
        candidates: [candidate(0), candidate(1)],
        graph: 'cascade',
      },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json<{ results: Array<{ stop_reason: string }> }>().results.map((r) => r.stop_reason)).toEqual(
      ['escalated', 'escalated'],
    );
    expect(prepareInput).toHaveBeenCalledTimes(2);
  });
});
