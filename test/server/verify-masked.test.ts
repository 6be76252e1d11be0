/**
 * Issue 39 item 5: NeMo-RL reads `/verify`'s answer with `float(result["full_result"]["reward"])` and
 * `torch.tensor([...reward...])`, and masks a row whose `instance_config.mask_sample` is true (a zero loss
 * multiplier) — after it put the row's reward into its siblings' baseline (all-ones valid mask). So every
 * answer is a number, a failed or cancelled judgment is masked, and its number is its group's judged mean.
 */
import { describe, expect, it } from 'vitest';

import type { FakeChatRequest, FakeReply } from '../fakes/openai.js';
import { candidate, GROUND_TRUTH, markerJudge, QUESTION, useHarness } from './helpers.js';

const harness = useHarness();

const FAIL = 'FAILMARKER';
const SLOW = 'SLOWMARKER';

/** The fake judge: 500 for a candidate holding FAIL, a call that hangs for SLOW, else by the GOOD marker. */
function judge(body: FakeChatRequest): FakeReply {
  const user = body.messages?.find((m) => m.role === 'user')?.content ?? '';
  if (user.includes(FAIL)) return { kind: 'status', status: 500 };
  if (user.includes(SLOW)) return { kind: 'hang' };
  return markerJudge(body);
}

const row = (text: string, groundTruth = GROUND_TRUTH, extra: Record<string, unknown> = {}) => ({
  responses_create_params: { input: [{ role: 'user', content: QUESTION }] },
  response: {
    id: 'resp',
    output: [
      { type: 'message', role: 'assistant', content: [{ type: 'output_text', text, annotations: [] }] },
    ],
  },
  ground_truth: groundTruth,
  instance_config: { split: 'train' },
  ...extra,
});

/** What NeMo-RL does with an answer: `float()` of the reward (a JS number, never null/NaN), and the mask. */
function nemoRl(body: { reward: unknown; instance_config?: { mask_sample?: unknown } }) {
  expect(typeof body.reward).toBe('number');
  expect(Number.isFinite(body.reward)).toBe(true);
  return { reward: body.reward as number, masked: body.instance_config?.mask_sample === true };
}

describe('POST /verify: a failed or cancelled judgment is a number, masked, at its group mean', () => {
  it('answers a failure with the mean of its group (not 0), masked; other groups keep theirs', async () => {
    const h = await harness({ env: { JUDGE_MAX_RETRIES: '0' }, fake: { fallback: judge } });
    const post = async (payload: ReturnType<typeof row>) =>
      nemoRl((await h.app.inject({ method: 'POST', url: '/verify', payload })).json());
    // Group A: 2 matches, 1 miss judged (mean 2/3); group B (another abstract): 1 miss (mean 0).
    const otherTruth = `${GROUND_TRUTH} A second paper, on retrieval instead.`;
    expect(await post(row(candidate(0, true)))).toEqual({ reward: 1, masked: false });
    expect(await post(row(candidate(2, true)))).toEqual({ reward: 1, masked: false });
    expect(await post(row(candidate(1, false)))).toEqual({ reward: 0, masked: false });
    expect(await post(row(candidate(3, false), otherTruth))).toEqual({ reward: 0, masked: false });
    const failedA = await post(row(`${candidate(4, true)} ${FAIL}`));
    expect(failedA.masked).toBe(true);
    expect(failedA.reward).toBeCloseTo(2 / 3, 12);
    expect(await post(row(`${candidate(5, true)} ${FAIL}`, otherTruth))).toEqual({ reward: 0, masked: true });
    // A group with nothing judged yet: a number all the same (masked), 0 without FAILURE_REWARD.
    const fresh = `${GROUND_TRUTH} A third paper nobody was judged against.`;
    expect(await post(row(`${candidate(6, true)} ${FAIL}`, fresh))).toEqual({ reward: 0, masked: true });
  });

  it('falls back to FAILURE_REWARD for a group with nothing judged yet', async () => {
    const h = await harness({
      env: { JUDGE_MAX_RETRIES: '0', FAILURE_REWARD: '0.25' },
      fake: { fallback: judge },
    });
    const res = await h.app.inject({
      method: 'POST',
      url: '/verify',
      payload: row(`${candidate(0)} ${FAIL}`),
    });
    expect(nemoRl(res.json())).toEqual({ reward: 0.25, masked: true });
    expect(res.json()._ng_failure_class).toBe('judge_failed');
  });

  it('answers a cancelled judgment (POST /v1/cancel) with a number and the mask', async () => {
    const h = await harness({ fake: { fallback: judge } });
    await h.app.inject({ method: 'POST', url: '/verify', payload: row(candidate(0, true)) });
    await h.app.inject({ method: 'POST', url: '/verify', payload: row(candidate(1, false)) });
    const pending = h.app.inject({
      method: 'POST',
      url: '/verify',
      payload: row(`${candidate(2, true)} ${SLOW}`, GROUND_TRUTH, { rollout_id: 'r-77' }),
    });
    // Cancel once the judgment is running (its calls hang at the fake).
    await h.fake.waitForIdle(); // the two judged rows' calls are done
    for (let i = 0; i < 500 && h.fake.inflight() === 0; i++) await new Promise((r) => setTimeout(r, 10));
    const cancel = await h.app.inject({
      method: 'POST',
      url: '/v1/cancel',
      payload: { request_ids: ['r-77'] },
    });
    expect(cancel.statusCode).toBe(200);
    const body = (await pending).json();
    expect(body.judge.status).toBe('cancelled');
    expect(body._ng_failure_class).toBe('cancelled');
    expect(nemoRl(body)).toEqual({ reward: 0.5, masked: true });
  });
  it('shares one ledger with /v1/reward: a judgment of either route counts for the other', async () => {
    const h = await harness({ env: { JUDGE_MAX_RETRIES: '0' }, fake: { fallback: judge } });
    const judged = await h.app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: {
        question: QUESTION,
        ground_truth: GROUND_TRUTH,
        candidates: [candidate(0, true), candidate(1, true), candidate(2, false)],
      },
    });
    expect(judged.json().rewards).toEqual([1, 1, 0]);
    const failed = nemoRl(
      (
        await h.app.inject({ method: 'POST', url: '/verify', payload: row(`${candidate(3, true)} ${FAIL}`) })
      ).json(),
    );
    expect(failed.masked).toBe(true);
    expect(failed.reward).toBeCloseTo(2 / 3, 12);
    // ...and what /verify judged is in the mean a streamed trainer reads.
    await h.app.inject({ method: 'POST', url: '/verify', payload: row(candidate(4, false)) });
    const mean = await h.app.inject({
      method: 'POST',
      url: '/v1/reward/group-mean',
      payload: { question: QUESTION, ground_truth: GROUND_TRUTH },
    });
    expect(mean.json()).toMatchObject({ mean: 0.5, n: 4 });
  });
});
