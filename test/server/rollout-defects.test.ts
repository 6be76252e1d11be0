/**
 * Issue 33 item 7: a defect in one rollout is that rollout's, not the request's. A NUL byte or an unpaired
 * surrogate in a candidate (the policy's output) makes that candidate `rejected_input` / `invalid_text` (a real
 * 0, no LLM call), and the request's other candidates are judged, on every route that carries rollouts. Other
 * C0 controls are removed by the normaliser and the idea is judged. A NUL in the caller's own fields (ground
 * truth, question, prompt) stays a 400.
 */
import { describe, expect, it } from 'vitest';

import { isInvalidText } from '../../src/judge/invalid-text.js';
import { comparisonReply, shownIdeas } from '../fakes/comparative.js';
import type { FakeChatRequest, FakeReply } from '../fakes/openai.js';
import { candidate, counterValue, GOOD, GROUND_TRUTH, markerJudge, QUESTION, useHarness } from './helpers.js';

const harness = useHarness();

const GOOD_IDEA = candidate(0, true);
const OTHER_IDEA = candidate(2, true);
const CHATML = `<|im_start|>user\n${QUESTION}<|im_end|>\n<|im_start|>assistant\n`;

/** Answers whichever schema a call asks for: a committee role or a comparison. */
function anyJudge(body: FakeChatRequest): FakeReply {
  if (body.response_format?.json_schema?.name === 'comparison') {
    const [a] = shownIdeas(body);
    return comparisonReply(a?.includes(GOOD) === true ? 'A' : 'B');
  }
  return markerJudge(body);
}

/** The defects a policy can emit that are not text, each inside an otherwise good idea. */
const DEFECTS: Array<[string, string]> = [
  ['a NUL byte', `${GOOD_IDEA}\u0000 and more`],
  ['an unpaired high surrogate', `${GOOD_IDEA} \uD83D and more`],
  ['an unpaired low surrogate', `\uDE00${GOOD_IDEA}`],
];

/** Every route whose body carries rollouts, with the defective rollout `bad` beside a good one. */
const ROUTES: Array<
  [string, (bad: string) => Record<string, unknown>, (json: ReturnType<typeof JSON.parse>) => void]
> = [
  [
    '/v1/reward',
    (bad) => ({ question: QUESTION, ground_truth: GROUND_TRUTH, candidates: [bad, OTHER_IDEA] }),
    (json) => {
      expect(json.rewards).toEqual([0, 1]);
      expect(json.results[0]).toMatchObject({ status: 'rejected_input', reason: 'invalid_text', calls: 0 });
      expect(json.results[1]).toMatchObject({ status: 'ok' });
    },
  ],
  [
    '/v1/reward/batch',
    (bad) => ({
      groups: [
        { question: QUESTION, ground_truth: GROUND_TRUTH, candidates: [OTHER_IDEA, bad] },
        { question: QUESTION, ground_truth: GROUND_TRUTH, candidates: [GOOD_IDEA] },
      ],
    }),
    (json) => {
      expect(json.groups.map((g: { rewards: number[] }) => g.rewards)).toEqual([[1, 0], [1]]);
      expect(json.groups[0].results[1]).toMatchObject({ reason: 'invalid_text' });
    },
  ],
  [
    '/v1/judge',
    (bad) => ({ question: QUESTION, ground_truth: GROUND_TRUTH, candidate: bad }),
    (json) => expect(json).toMatchObject({ reward: 0, status: 'rejected_input', reason: 'invalid_text' }),
  ],
  [
    '/get_reward',
    (bad) => ({
      query: [`${CHATML}${bad}<|im_end|>`, `${CHATML}${OTHER_IDEA}<|im_end|>`],
      prompts: [CHATML, CHATML],
      labels: [GROUND_TRUTH, GROUND_TRUTH],
    }),
    (json) => {
      expect(json.rewards).toEqual([0, 1]);
      expect(json.extra_logs.rejected_invalid_text).toEqual([1, 0]);
    },
  ],
  [
    '/slime',
    (bad) => ({ prompt: CHATML, response: bad, label: GROUND_TRUTH }),
    (json) => expect(json).toMatchObject({ reward: 0, status: 'rejected_input', reason: 'invalid_text' }),
  ],
  [
    '/verify',
    (bad) => ({
      responses_create_params: { input: QUESTION },
      response: {
        output: [{ type: 'message', role: 'assistant', content: [{ type: 'output_text', text: bad }] }],
      },
      ground_truth: GROUND_TRUTH,
    }),
    (json) =>
      expect(json).toMatchObject({ reward: 0, judge: { status: 'rejected_input', reason: 'invalid_text' } }),
  ],
  [
    '/v1/rank',
    (bad) => ({ question: QUESTION, ground_truth: GROUND_TRUTH, candidates: [bad, OTHER_IDEA] }),
    (json) => expect(json.ranking[0]).toBe(1),
  ],
  [
    '/v1/best-of-n',
    (bad) => ({
      question: QUESTION,
      ground_truth: GROUND_TRUTH,
      candidates: [bad, OTHER_IDEA],
      criterion: 'match',
    }),
    (json) => expect(json.best_index).toBe(1),
  ],
  [
    '/slime/rank',
    (bad) => ({
      samples: [
        { prompt: QUESTION, response: bad, label: GROUND_TRUTH },
        { prompt: QUESTION, response: OTHER_IDEA, label: GROUND_TRUTH },
      ],
    }),
    (json) => expect(json.results[0]).toMatchObject({ reason: 'invalid_text' }),
  ],
];

describe('a rollout that is not text fails alone, as invalid_text', () => {
  for (const [route, body, check] of ROUTES) {
    for (const [defect, bad] of DEFECTS) {
      it(`${route}: ${defect} in one rollout`, async () => {
        const h = await harness({ fake: { fallback: anyJudge } });
        // As the bytes arrive: JSON.stringify writes an unpaired surrogate as a \u escape.
        const payload = JSON.stringify(body(bad));
        const res = await h.app.inject({
          method: 'POST',
          url: route,
          headers: { 'content-type': 'application/json' },
          payload,
        });
        expect(res.statusCode, res.body).toBe(200);
        check(res.json());
        // The defective rollout reached no judge.
        for (const call of h.fake.calls)
          for (const m of call.body.messages ?? []) expect(isInvalidText(m.content)).toBe(false);
        expect(await counterValue(h.metrics.rejectedInputs, { reason: 'invalid_text' })).toBeGreaterThan(0);
      });
    }
  }

  it('other C0 controls are removed and the idea is judged', async () => {
    const C0 = ['\u0001', '\u0007', '\u001b', '\u007f'];
    const h = await harness({ fake: { fallback: anyJudge } });
    const res = await h.app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: {
        question: QUESTION,
        ground_truth: GROUND_TRUTH,
        candidates: [`${GOOD_IDEA}${C0.join('')}[0m`],
      },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().rewards).toEqual([1]);
    for (const call of h.fake.calls)
      for (const m of call.body.messages ?? []) for (const c of C0) expect(m.content).not.toContain(c);
  });

  it('an invalid rollout is keyed apart from a valid one holding U+FFFD', async () => {
    const h = await harness({ fake: { fallback: anyJudge } });
    const ask = (c: string) =>
      h.app.inject({
        method: 'POST',
        url: '/v1/reward',
        headers: { 'content-type': 'application/json' },
        payload: JSON.stringify({ question: QUESTION, ground_truth: GROUND_TRUTH, candidates: [c] }),
      });
    expect((await ask(`${GOOD_IDEA} \uD800`)).json().rewards).toEqual([0]);
    const valid = (await ask(`${GOOD_IDEA} \uFFFD`)).json();
    expect(valid.rewards).toEqual([1]);
    expect(valid.results[0].cached).toBe(false);
  });

  it('a NUL in the caller’s own fields is still a 400 naming the field', async () => {
    const h = await harness({ fake: { fallback: anyJudge } });
    const gt = await h.app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: { question: QUESTION, ground_truth: `${GROUND_TRUTH}\u0000`, candidates: [GOOD_IDEA] },
    });
    expect(gt.statusCode).toBe(400);
    expect(gt.json().details[0].path).toBe('ground_truth');
    const prompt = await h.app.inject({
      method: 'POST',
      url: '/slime',
      payload: { prompt: `${QUESTION}\u0000`, response: GOOD_IDEA, label: GROUND_TRUTH },
    });
    expect(prompt.statusCode).toBe(400);
  });
});
