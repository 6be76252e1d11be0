/**
 * Issue 33 item 6, the server's side: OpenRLHF's remote reward client gives each attempt 180 s, retries 5
 * times 1 s apart ignoring Retry-After, fails the step on a missing reward and breaks its tensor on a
 * `null`. So `/get_reward` holds work that fits GET_REWARD_HOLD_MS rather than refusing it, refuses at once
 * what does not fit even then, and never answers `null`.
 */
import { describe, expect, it } from 'vitest';

import { candidate, GROUND_TRUTH, QUESTION, useHarness } from './helpers.js';

const harness = useHarness();

/** An OpenRLHF batch of `n` fresh rollouts (the prompt is the question; the label the abstract). */
function openrlhf(from: number, n: number) {
  const prompt = `<|im_start|>user\n${QUESTION}<|im_end|>\n<|im_start|>assistant\n`;
  return {
    query: Array.from({ length: n }, (_, i) => `${prompt}${candidate(from + i)}<|im_end|>`),
    prompts: Array.from({ length: n }, () => prompt),
    labels: Array.from({ length: n }, () => GROUND_TRUTH),
  };
}

describe('/get_reward and the hold window', () => {
  it('holds work that fits GET_REWARD_HOLD_MS, refuses at once what does not, and /v1/reward refuses it', async () => {
    // 2 slots at the assumed 1 s per call (the judge hangs, so nothing is measured): 2 calls/s. The
    // deadline (10 s) admits 18 calls ahead; the hold window (30 s) 54.
    const h = await harness({
      env: {
        JUDGE_MAX_INFLIGHT: '2',
        JUDGE_INFLIGHT_CONTROL: 'fixed',
        REQUEST_DEADLINE_MS: '10000',
        GET_REWARD_HOLD_MS: '30000',
      },
      fake: { fallback: { kind: 'hang' } },
    });
    const settled = new Set<string>();
    const watch = (name: string, p: Promise<{ statusCode: number; json: () => unknown }>) => {
      void p.then(() => settled.add(name));
      return p;
    };
    // 6 calls: nothing ahead, admitted.
    const first = watch(
      'first',
      h.app.inject({ method: 'POST', url: '/get_reward', payload: openrlhf(0, 2) }),
    );
    await h.fake.waitForCalls(2);
    // 18 more: 12 s of work, past the deadline, within the hold window: held (admitted, answered later).
    const held = watch(
      'held',
      h.app.inject({ method: 'POST', url: '/get_reward', payload: openrlhf(10, 6) }),
    );
    // The same on /v1/reward (no hold window): refused at once.
    const v1 = await h.app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: { question: QUESTION, ground_truth: GROUND_TRUTH, candidates: openrlhf(20, 6).query },
    });
    expect(v1.statusCode).toBe(503);
    expect(v1.json()).toMatchObject({ code: 'RW_OVERLOADED', details: { reason: 'deadline' } });
    // 24 calls ahead and 33 more: 28.5 s, past the hold window too — refused at once, with Retry-After.
    const tooMuch = await h.app.inject({ method: 'POST', url: '/get_reward', payload: openrlhf(30, 11) });
    expect(tooMuch.statusCode).toBe(503);
    expect(tooMuch.json()).toMatchObject({ code: 'RW_OVERLOADED', details: { reason: 'deadline' } });
    expect(tooMuch.headers['retry-after']).toBe('12');
    // A client that states its own deadline is held no longer than that.
    const ownDeadline = await h.app.inject({
      method: 'POST',
      url: '/get_reward',
      headers: { 'x-reward-deadline-ms': '10000' },
      payload: openrlhf(50, 6),
    });
    expect(ownDeadline.statusCode).toBe(503);
    // Both still in the backlog: 24 calls at 2 calls/s (from /metrics: /readyz would ping the hung judge).
    const text = (await h.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(/^reward_predicted_wait_seconds (\S+)$/m.exec(text)?.[1]).toBe('12');
    expect([...settled]).toEqual([]);
    // The judge goes away: the held work fails as judge failures, never as a refusal.
    await h.fake.close();
    for (const res of [await first, await held]) {
      expect(res.statusCode).toBe(503);
      expect(res.json()).toMatchObject({ code: 'RW_JUDGE_FAILED' });
    }
  });

  it('answers a cancelled rollout with FAILURE_REWARD, or the request with 503 — never a null', async () => {
    for (const failureReward of [undefined, '0']) {
      const h = await harness({
        env: { ...(failureReward === undefined ? {} : { FAILURE_REWARD: failureReward }) },
        fake: { fallback: { kind: 'hang' } },
      });
      const pending = h.app.inject({
        method: 'POST',
        url: '/get_reward',
        headers: { 'x-reward-tag': 'step-3' },
        payload: openrlhf(0, 2),
      });
      await h.fake.waitForCalls(4);
      const cancel = await h.app.inject({ method: 'POST', url: '/v1/cancel', payload: { tag: 'step-3' } });
      expect(cancel.json()).toMatchObject({ cancelled_requests: 1 });
      const res = await pending;
      if (failureReward === undefined) {
        expect(res.statusCode).toBe(503);
        expect(res.json()).toMatchObject({
          code: 'RW_JUDGE_FAILED',
          details: {
            failed: [
              { index: 0, status: 'cancelled' },
              { index: 1, status: 'cancelled' },
            ],
          },
        });
      } else {
        expect(res.statusCode).toBe(200);
        expect(res.json()).toMatchObject({ rewards: [0, 0], extra_logs: { cancelled: [1, 1] } });
      }
    }
  });
});
