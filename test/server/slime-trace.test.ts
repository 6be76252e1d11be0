/**
 * Issue 38 item 6: /slime with a message-list prompt puts back the trace opener the rollout continues. A
 * rollout cut off inside the trace is `truncated_reasoning` through /slime (prompt as a string template or as
 * messages ending with the assistant's `<think>` prefill), as through /get_reward; a closed trace is judged
 * on its answer. Fake backend, real HTTP on 127.0.0.1.
 */
import { describe, expect, it } from 'vitest';

import { candidate, GROUND_TRUTH, QUESTION, useHarness } from './helpers.js';

const CUT = 'Let me compare with the likely ground truth: contrastive pairs, InfoNCE, zero-shot transfer and';
const QWEN3 = `<|im_start|>user\n${QUESTION}<|im_end|>\n<|im_start|>assistant\n<think>\n`;

describe('/slime puts back the opener its prompt left open (issue 38 item 6)', () => {
  const harness = useHarness();
  const slime = async (h: Awaited<ReturnType<typeof harness>>, prompt: unknown, response: string) => {
    const res = await h.app.inject({
      method: 'POST',
      url: '/slime?graph=single-judge',
      payload: { prompt, response, label: GROUND_TRUTH },
    });
    expect(res.statusCode).toBe(200);
    return res.json<{ status: string; reason?: string }>();
  };

  it('a rollout cut mid-trace is truncated_reasoning with a string prompt, a prefilled message list, and /get_reward', async () => {
    const h = await harness();
    const prefilled = [
      { role: 'user', content: QUESTION },
      { role: 'assistant', content: '<think>\n' },
    ];
    expect(await slime(h, QWEN3, CUT)).toMatchObject({ reason: 'truncated_reasoning' });
    expect(await slime(h, prefilled, CUT)).toMatchObject({ reason: 'truncated_reasoning' });
    const viaGetReward = await h.app.inject({
      method: 'POST',
      url: '/get_reward?graph=single-judge',
      payload: { query: [`${QWEN3}${CUT}`], prompts: [QWEN3], labels: [GROUND_TRUTH] },
    });
    expect(
      viaGetReward.json<{ extra_logs: Record<string, number[]> }>().extra_logs[
        'rejected_truncated_reasoning'
      ],
    ).toEqual([1]);
    expect(h.fake.callCount).toBe(0);
  });

  it('a closed trace after a prefilled opener is judged on its answer', async () => {
    const h = await harness();
    const prefilled = [
      { role: 'user', content: QUESTION },
      { role: 'assistant', content: '<think>\n' },
    ];
    expect(await slime(h, prefilled, `${CUT}</think>\n${candidate(0)}`)).toMatchObject({ status: 'ok' });
    expect(h.fake.callCount).toBe(1);
  });
});
