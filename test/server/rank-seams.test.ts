/**
 * Issue 38 items 6 and 1 on the ranking routes (fake backend, real HTTP on 127.0.0.1):
 * - /get_reward/rank and /slime/rank group rollouts on the normalised question (as the pairs key them), so
 *   NFC and NFD spellings of one prompt are one group, not two groups of one (a 400 before);
 * - a candidate's outcome in a ranked group does not depend on what an earlier group held: R1's prepared
 *   text equals R2's and both are judged the same, so the pair cached by one group is right for the next.
 */
import { describe, expect, it } from 'vitest';

import { comparisonReply, shownIdeas } from '../fakes/comparative.js';
import type { FakeChatRequest, FakeReply } from '../fakes/openai.js';
import { GOOD, GROUND_TRUTH, useHarness } from './helpers.js';

/** A comparison judge that prefers the idea showing GOOD. */
const prefersGood = (body: FakeChatRequest): FakeReply => {
  const [a] = shownIdeas(body);
  return comparisonReply(a?.includes(GOOD) === true ? 'A' : 'B');
};

const QUESTION = 'Làm thế nào để căn chỉnh biểu diễn hình ảnh và văn bản mà không cần nhãn?';
const IDEA = (k: number, good = false) =>
  `Idea ${k}: ${good ? GOOD : 'plainidea'} align image and text encoders with a symmetric contrastive loss over web pairs.`;

describe('ranking seams (issue 38 items 6 and 1)', () => {
  const harness = useHarness();

  it('/get_reward/rank: NFC and NFD spellings of one question are one group', async () => {
    const h = await harness({ fake: { fallback: prefersGood } });
    const labels = [QUESTION.normalize('NFC'), QUESTION.normalize('NFD')].map((question) => ({
      ground_truth: GROUND_TRUTH,
      question,
    }));
    const res = await h.app.inject({
      method: 'POST',
      url: '/get_reward/rank',
      payload: { query: [IDEA(0, true), IDEA(1)], labels },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json<{ extra_logs: { group_size: number[] } }>().extra_logs.group_size).toEqual([2, 2]);
  });

  it('/slime/rank: NFC and NFD spellings of one question are one group', async () => {
    const h = await harness({ fake: { fallback: prefersGood } });
    const res = await h.app.inject({
      method: 'POST',
      url: '/slime/rank',
      payload: {
        samples: [
          { prompt: QUESTION.normalize('NFC'), response: IDEA(0, true), label: GROUND_TRUTH },
          { prompt: QUESTION.normalize('NFD'), response: IDEA(1), label: GROUND_TRUTH },
        ],
      },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json<{ rewards: number[] }>().rewards).toHaveLength(2);
  });

  it('/v1/rank: R1 is ranked the same alone and after a group that also held R2 (its pair cached)', async () => {
    // The pair: R1's answer is R2's text once trimmed; R2 alone is too short.
    const r1 = '<think>\nreasoning\n</think>\n </think> image text InfoNCE';
    const r2 = '</think> image text InfoNCE';
    const rank = async (h: Awaited<ReturnType<typeof harness>>, candidates: string[]) => {
      const res = await h.app.inject({
        method: 'POST',
        url: '/v1/rank',
        payload: { question: QUESTION, ground_truth: GROUND_TRUTH, candidates },
      });
      expect(res.statusCode).toBe(200);
      const body = res.json<{ results: Array<{ reason?: string; reward: number }> }>();
      return body.results.map((r) => ({ reason: r.reason, reward: r.reward }));
    };
    const alone = await rank(await harness({ fake: { fallback: prefersGood } }), [r1, IDEA(1), IDEA(2)]);
    const h = await harness({ fake: { fallback: prefersGood } });
    await rank(h, [IDEA(1), r1, r2, IDEA(2)]);
    expect(await rank(h, [r1, IDEA(1), IDEA(2)])).toEqual(alone);
  });
});
