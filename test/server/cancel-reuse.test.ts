/**
 * Issue 38 item 6: a `rollout_id` reused after a cancel that found its request live is a new request (that
 * cancel is complete), not `cancelled` at once for the tombstone window; an id the cancel found no request
 * for (a reward call still on the wire) is still answered `cancelled` when it arrives. /slime on the fake
 * backend (real HTTP on 127.0.0.1).
 */
import { describe, expect, it } from 'vitest';

import type { FakeChatRequest, FakeReply } from '../fakes/openai.js';
import { candidate, GROUND_TRUTH, markerJudge, QUESTION, useHarness, waitFor } from './helpers.js';

/** A prompt showing HANGME never answers; the rest as the marker judge says. */
const judge = (body: FakeChatRequest): FakeReply =>
  JSON.stringify(body.messages).includes('HANGME') ? { kind: 'hang' } : markerJudge(body);

describe('a rollout_id reused after its cancel (issue 38 item 6)', () => {
  const harness = useHarness();

  it('the live request is cancelled; the same id sent again afterwards is judged', async () => {
    const h = await harness({ fake: { fallback: judge } });
    const slime = (response: string) =>
      h.app.inject({
        method: 'POST',
        url: '/slime?graph=single-judge',
        payload: { prompt: QUESTION, response, label: GROUND_TRUTH, rollout_id: 'rollout-7' },
      });
    const first = slime(`${candidate(0)} HANGME`);
    await waitFor(() => h.fake.callCount >= 1, 'the first call reached the backend');
    const cancel = await h.app.inject({
      method: 'POST',
      url: '/v1/cancel',
      payload: { request_ids: ['rollout-7'] },
    });
    expect(cancel.json()).toMatchObject({ cancelled_requests: 1 });
    expect((await first).json()).toMatchObject({ status: 'cancelled' });

    const again = (await slime(candidate(2))).json<{ status: string; reward: number | null }>();
    expect(again).toMatchObject({ status: 'ok', reward: 1 });
  });

  it('an id cancelled before its request arrived (on the wire) is answered cancelled, without a call', async () => {
    const h = await harness({ fake: { fallback: judge } });
    const cancel = await h.app.inject({
      method: 'POST',
      url: '/v1/cancel',
      payload: { request_ids: ['rollout-9'] },
    });
    expect(cancel.json()).toMatchObject({ cancelled_requests: 0 });
    const late = await h.app.inject({
      method: 'POST',
      url: '/slime?graph=single-judge',
      payload: { prompt: QUESTION, response: candidate(0), label: GROUND_TRUTH, rollout_id: 'rollout-9' },
    });
    expect(late.json()).toMatchObject({ status: 'cancelled' });
    expect(h.fake.callCount).toBe(0);
  });
});
