/**
 * Issue 38 item 1: a candidate's outcome never depends on which others came first. Reproduces the issue's
 * R1/R2 pair on the offline backend (`single-judge`): R1's answer, once trimmed, starts with a closing tag
 * that was a mention in R1 (R2 is exactly that text). Before the fix, R1 passed with R2's text and R2 was
 * rejected, both keyed on R2's text in one key space: whichever came first decided the other.
 */
import { afterEach, describe, expect, it } from 'vitest';

import { prepareCandidate } from '../../src/judge/candidate.js';
import { normalized } from '../../src/text/normalize.js';
import { FAMILIES } from '../../src/text/reasoning-formats.js';
import { fuzzedMarkup } from '../support/markup-fuzz.js';
import { offlineApp } from './helpers.js';

const R1 = '<think>\nreasoning\n</think>\n </think> image text InfoNCE';
const R2 = '</think> image text InfoNCE';
const QUESTION = 'How can vision and language representations be aligned without labels?';
const GROUND_TRUTH =
  'We align image and text encoders with a symmetric contrastive InfoNCE objective over large batches of ' +
  'paired web data, so that zero-shot classification works by comparing embeddings.';

interface Result {
  reward: number | null;
  status: string;
  reason?: string;
}

const apps: Array<{ close(): Promise<unknown> }> = [];
afterEach(async () => {
  for (const a of apps.splice(0)) await a.close();
});

function freshApp() {
  const { app } = offlineApp();
  apps.push(app);
  return app;
}

async function judgeOne(app: ReturnType<typeof freshApp>, candidate: string): Promise<Result> {
  const res = await app.inject({
    method: 'POST',
    url: '/v1/reward',
    payload: {
      question: QUESTION,
      ground_truth: GROUND_TRUTH,
      candidates: [candidate],
      graph: 'single-judge',
    },
  });
  expect(res.statusCode).toBe(200);
  const r = res.json<{ results: Result[] }>().results[0]!;
  return { reward: r.reward, status: r.status, ...(r.reason === undefined ? {} : { reason: r.reason }) };
}

describe('issue 38 item 1: outcome independent of order (offline backend, single-judge)', () => {
  it('R2 alone, R1 then R2, R2 then R1: each candidate gets the same outcome in every order', async () => {
    const alone = { r1: await judgeOne(freshApp(), R1), r2: await judgeOne(freshApp(), R2) };
    expect(alone.r2).toMatchObject({ status: 'rejected_input', reason: 'too_short', reward: 0 });

    const first = freshApp();
    const r1ThenR2 = { r1: await judgeOne(first, R1), r2: await judgeOne(first, R2) };
    const second = freshApp();
    const r2First = await judgeOne(second, R2);
    const r1After = await judgeOne(second, R1);

    for (const got of [r1ThenR2.r1, r1After]) expect(got).toEqual(alone.r1);
    for (const got of [r1ThenR2.r2, r2First]) expect(got).toEqual(alone.r2);
  });

  it('one request holding both: each as it is alone, in either order', async () => {
    const app = freshApp();
    const alone = { r1: await judgeOne(freshApp(), R1), r2: await judgeOne(freshApp(), R2) };
    for (const candidates of [
      [R1, R2],
      [R2, R1],
    ]) {
      const res = await app.inject({
        method: 'POST',
        url: '/v1/reward',
        payload: { question: QUESTION, ground_truth: GROUND_TRUTH, candidates, graph: 'single-judge' },
      });
      const results = res.json<{ results: Result[] }>().results;
      results.forEach((r, i) => {
        const want = candidates[i] === R1 ? alone.r1 : alone.r2;
        expect({
          reward: r.reward,
          status: r.status,
          ...(r.reason === undefined ? {} : { reason: r.reason }),
        }).toEqual(want);
      });
    }
  });

  it('property: 60 seeded rollouts, the closing-marker class of every family, and their prepared texts, judged one by one forwards and backwards', async () => {
    const idea = 'image and text encoders aligned by a symmetric InfoNCE loss over web pairs';
    const markup = fuzzedMarkup(3811, 60);
    const raw = markup.map((m, i) => (i % 2 === 0 ? `${m}${i % 4 === 0 ? idea : 'short'}` : `${idea}${m}`));
    // The class: a closed trace, then a closing marker of every family mentioned after a space.
    for (const f of FAMILIES)
      if (f.trace !== undefined)
        for (const tail of ['image text InfoNCE', idea])
          raw.push(`${f.trace.open}\nreasoning\n${f.trace.close}\n ${f.trace.close} ${tail}`);
    const question = normalized(QUESTION);
    // Each rollout and the text its preparation gives: the two share a key exactly when they share an outcome.
    const pool = [...new Set(raw.flatMap((r) => [r, prepareCandidate(r, { question }).candidate]))];
    const run = async (order: readonly string[]) => {
      const app = freshApp();
      const out = new Map<string, Result>();
      for (const c of order) out.set(c, await judgeOne(app, c));
      return out;
    };
    const forwards = await run(pool);
    const backwards = await run([...pool].reverse());
    const differ = pool.filter((c) => JSON.stringify(forwards.get(c)) !== JSON.stringify(backwards.get(c)));
    expect(differ).toEqual([]);
  });
});
