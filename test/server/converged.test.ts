import { describe, expect, it } from 'vitest';
import { universalReply } from '../fakes/openai.js';
import { GROUND_TRUTH, QUESTION, useHarness } from './helpers.js';

const harness = useHarness();

describe('POST /v1/judge with a converged early stop', () => {
  it('returns the debate monitor: per-round similarity, objection shares and why it stopped', async () => {
    const h = await harness({
      env: { ALLOW_INLINE_GRAPHS: 'true' },
      fake: {
        fallback: () => ({
          kind: 'json',
          body: { ...universalReply('match'), objections: ['Wording is vague.'] },
        }),
      },
    });
    const res = await h.app.inject({
      method: 'POST',
      url: '/v1/judge',
      payload: {
        question: QUESTION,
        ground_truth: GROUND_TRUTH,
        candidate: 'Order contrastive negatives from easy to hard while training the dense retriever.',
        graph: {
          rounds: 3,
          early_stop: { kind: 'converged', similarity: 0.95 },
          decision: { rule: 'majority' },
          nodes: [
            { id: 'proposer', role: 'analyst' },
            { id: 'critic', role: 'critic', sees: ['proposer'] },
          ],
        },
      },
    });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ status: 'ok', reward: 1, rounds: 2, stop_reason: 'converged', calls: 4 });
    expect(body.debate.stop).toMatchObject({ reason: 'converged', round: 2 });
    expect(body.debate.rounds[1].similarity).toEqual({ proposer: 1, critic: 1 });
    expect(body.debate.rounds[1].objections).toEqual({ substantive: 0, stylistic: 1, unclassified: 0 });
    expect(body.debate.rounds[1].substantiveShare).toBe(0);
  });
});
