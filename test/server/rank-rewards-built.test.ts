/**
 * Issue 32, items 1, 3 and 4, against the built server (`node dist/server/main.js`) and the fake backend: the
 * ranking routes (/v1/rank, /v1/best-of-n, /get_reward/rank, /slime/rank) keep the rule every reward route
 * keeps — a rejected input is a real 0 in every reward mode, never ranked above a real idea and never best;
 * a judge failure or a cancel is never a reward — and a group whose comparisons are incomplete is no reward
 * either (src/server/serving/outcomes.ts). Also: a comparison flight runs under the latest deadline of the
 * requests waiting for it, not only the one that started it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { rankJudge } from '../fakes/comparative.js';
import { startFakeOpenAI, type FakeChatRequest, type FakeOpenAI, type FakeReply } from '../fakes/openai.js';
import { startBuiltServer, type BuiltServer } from '../support/built-server.js';
import { ensureDist } from '../support/dist.js';
import { GROUND_TRUTH, QUESTION, waitFor } from './helpers.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- response bodies are checked field by field
type Json = any;

let fake: FakeOpenAI;
let server: BuiltServer;

/**
 * Comparisons by RANK marker; a prompt showing UNPARSABLE gets prose (invalid twice: the pair fails), one
 * showing HANGME never answers, one showing SLOWPAIR answers after 700 ms.
 */
function judge(body: FakeChatRequest): FakeReply {
  const text = JSON.stringify(body.messages);
  if (text.includes('UNPARSABLE')) return { kind: 'text', text: 'A, clearly.' };
  if (text.includes('HANGME')) return { kind: 'hang' };
  if (text.includes('SLOWPAIR')) return { kind: 'slow', ms: 700, then: rankJudge(body) };
  return rankJudge(body);
}

beforeAll(async () => {
  ensureDist();
  fake = await startFakeOpenAI({ fallback: judge });
  server = await startBuiltServer({
    JUDGE_BASE_URL: fake.baseURL,
    JUDGE_MODEL: 'fake-model',
    JUDGE_API_KEY: 'test',
    JUDGE_MAX_RETRIES: '0',
    REQUEST_DEADLINE_MS: '10000',
  });
}, 180_000);

afterAll(async () => {
  if (server !== undefined && server.child.exitCode === null) {
    server.child.kill('SIGKILL');
    await server.exit;
  }
  await fake?.close();
});

async function post(
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: Json }> {
  const res = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
}

const idea = (rank: number, tag = '') =>
  `An idea with RANK${rank}${tag}: align paired encoders with a contrastive objective over web pairs.`;
const FILLERS = [':', 'Thought process:', '...', 'Final answer:'];
const rank = (candidates: string[], extra: Record<string, unknown> = {}) =>
  post('/v1/rank', { question: QUESTION, ground_truth: GROUND_TRUTH, candidates, ...extra });

describe('a rejected input is a real 0 in every reward mode and route', () => {
  it('/v1/rank top_k: fillers get 0 whatever k, rank after every idea and say why', async () => {
    const one = await rank([idea(1, 'a'), ...FILLERS.slice(0, 3)], { reward_mode: 'top_k', top_k: 2 });
    expect(one.status).toBe(200);
    expect(one.json.rewards).toEqual([1, 0, 0, 0]);
    expect(one.json.scores.slice(1)).toEqual([0, 0, 0]);
    expect(one.json.ranking[0]).toBe(0);
    expect(one.json.results.map((r: Json) => r.status)).toEqual([
      'ok',
      'rejected_input',
      'rejected_input',
      'rejected_input',
    ]);
    expect(one.json.results[1].reason).toBe('master_key_filler');
    expect(one.json.results[0].reason).toBeUndefined();

    const none = await rank(FILLERS, { reward_mode: 'top_k', top_k: 1 });
    expect(none.json.rewards).toEqual([0, 0, 0, 0]);
    expect(none.json.scores).toEqual([0, 0, 0, 0]);
    // Nothing was worth a call.
    expect(none.json.calls).toBe(0);
  });

  it('/v1/rank graded: a filler scores and earns 0 against a real idea (not the prior share)', async () => {
    const graded = await rank([FILLERS[1]!, idea(2, 'b')]);
    expect(graded.json.rewards[0]).toBe(0);
    expect(graded.json.scores[0]).toBe(0);
    expect(graded.json.rewards[1]).toBeGreaterThan(0.5);
    expect(graded.json.ranking).toEqual([1, 0]);
  });

  it('/v1/best-of-n: an all-degenerate group has no best (null), a filler is never best', async () => {
    const all = await post('/v1/best-of-n', {
      question: QUESTION,
      ground_truth: GROUND_TRUTH,
      candidates: FILLERS,
    });
    expect(all.status).toBe(200);
    expect(all.json.best_index).toBeNull();
    expect(all.json.results.map((r: Json) => r.reason)).toEqual(FILLERS.map(() => 'master_key_filler'));
    const mixed = await post('/v1/best-of-n', {
      question: QUESTION,
      ground_truth: GROUND_TRUTH,
      candidates: [FILLERS[0], idea(3, 'c')],
    });
    expect(mixed.json.best_index).toBe(1);
    expect(mixed.json.results.map((r: Json) => r.status)).toEqual(['rejected_input', 'ok']);
  });

  it('/get_reward/rank and /slime/rank: fillers get 0 under top_k, the idea its 1', async () => {
    const prompt = '<|im_start|>user\nQ one?<|im_end|>\n<|im_start|>assistant\n';
    const responses = [idea(4, 'd'), ...FILLERS.slice(0, 3)];
    const openrlhf = await post('/get_reward/rank?reward_mode=top_k&top_k=2', {
      query: responses.map((r) => prompt + r),
      prompts: responses.map(() => prompt),
      labels: responses.map(() => GROUND_TRUTH),
    });
    expect(openrlhf.status).toBe(200);
    expect(openrlhf.json.rewards).toEqual([1, 0, 0, 0]);
    expect(openrlhf.json.extra_logs.rejected_input).toEqual([0, 1, 1, 1]);
    const slime = await post('/slime/rank?reward_mode=top_k&top_k=2', {
      samples: responses.map((response) => ({ prompt, response, label: GROUND_TRUTH })),
    });
    expect(slime.status).toBe(200);
    expect(slime.json.rewards).toEqual([1, 0, 0, 0]);
    expect(slime.json.results.map((r: Json) => r.reason ?? null)).toEqual([
      null,
      'master_key_filler',
      'master_key_filler',
      'master_key_filler',
    ]);
  });
});

describe('a group whose comparisons are incomplete is no reward', () => {
  // A's comparisons fail (its judge replies prose twice); B beats C. Without A nobody knows who is best.
  const group = [idea(5, ' UNPARSABLE'), idea(3, 'e'), idea(1, 'f')];

  it('/v1/rank: every real candidate of the group is null, not [null, 1, 0]', async () => {
    const top = await rank(group, { reward_mode: 'top_k', top_k: 1 });
    expect(top.status).toBe(200);
    expect(top.json.rewards).toEqual([null, null, null]);
    expect(top.json.results.map((r: Json) => r.status)).toEqual([
      'judge_error',
      'judge_error',
      'judge_error',
    ]);
    // The pairs are still reported as they went: B beat C.
    const bc = top.json.pairs.find((p: Json) => p.i === 1 && p.j === 2);
    expect(bc).toMatchObject({ status: 'ok', winner: 1 });
    const graded = await rank(group);
    expect(graded.json.rewards).toEqual([null, null, null]);
    const best = await post('/v1/best-of-n', {
      question: QUESTION,
      ground_truth: GROUND_TRUTH,
      candidates: group,
    });
    expect(best.json.best_index).toBeNull();
  });

  it('/v1/rank: a filler in an incomplete group keeps its real 0', async () => {
    const top = await rank([...group, FILLERS[0]!], { reward_mode: 'top_k', top_k: 1 });
    expect(top.json.rewards).toEqual([null, null, null, 0]);
  });

  it('/get_reward/rank: the whole group fails (503 RW_JUDGE_FAILED naming all three), never [F, 1, 0]', async () => {
    const prompt = '<|im_start|>user\nQ two?<|im_end|>\n<|im_start|>assistant\n';
    const res = await post('/get_reward/rank?reward_mode=top_k&top_k=1', {
      query: group.map((r) => prompt + r),
      prompts: group.map(() => prompt),
      labels: group.map(() => GROUND_TRUTH),
    });
    expect(res.status).toBe(503);
    expect(res.json.code).toBe('RW_JUDGE_FAILED');
    expect(res.json.details.failed).toEqual(
      [0, 1, 2].map((index) => ({ index, status: 'judge_error', error: 'RW_JUDGE_UNPARSABLE' })),
    );
  });
});

describe('a cancelled rank request answers null, never a retried 503', () => {
  const hanging = [idea(2, ' HANGME one'), idea(1, ' HANGME two')];

  it('/get_reward/rank cancelled by x-reward-tag: 200 with null rewards', async () => {
    const prompt = '<|im_start|>user\nQ three?<|im_end|>\n<|im_start|>assistant\n';
    const answer = post(
      '/get_reward/rank',
      {
        query: hanging.map((r) => prompt + r),
        prompts: hanging.map(() => prompt),
        labels: hanging.map(() => GROUND_TRUTH),
      },
      { 'x-reward-tag': 'rank-step-1' },
    );
    const before = fake.callCount;
    await waitFor(() => fake.callCount >= before + 2, 'the comparison to reach the judge');
    const cancel = await post('/v1/cancel', { tag: 'rank-step-1' });
    expect(cancel.json.cancelled_requests).toBe(1);
    const res = await answer;
    expect(res.status).toBe(200);
    expect(res.json.rewards).toEqual([null, null]);
    expect(res.json.extra_logs.cancelled).toEqual([1, 1]);
    expect(res.json.extra_logs.judge_failed).toEqual([0, 0]);
  });

  it('/slime/rank cancelled by x-reward-tag: 200 with null rewards and status cancelled', async () => {
    const answer = post(
      '/slime/rank',
      { samples: hanging.map((response) => ({ prompt: 'Q four?', response, label: GROUND_TRUTH })) },
      { 'x-reward-tag': 'rank-step-2' },
    );
    const before = fake.callCount;
    await waitFor(() => fake.callCount >= before + 2, 'the comparison to reach the judge');
    await post('/v1/cancel', { tag: 'rank-step-2' });
    const res = await answer;
    expect(res.status).toBe(200);
    expect(res.json.rewards).toEqual([null, null]);
    expect(res.json.results.map((r: Json) => r.status)).toEqual(['cancelled', 'cancelled']);
  });
});

describe('a comparison flight runs under the latest deadline of its requests', () => {
  it('a request joining a pair started by a shorter-deadline request gets the comparison', async () => {
    const pair = [idea(2, ' SLOWPAIR x'), idea(1, ' SLOWPAIR y')];
    const short = rank(pair, { deadline_ms: 300 });
    // The pair is in flight for the short request; the long one joins it.
    const before = fake.callCount;
    await waitFor(() => fake.callCount >= before + 2, 'the pair to reach the judge');
    const long = await rank(pair, { deadline_ms: 5000 });
    expect((await short).json.pairs[0].status).toBe('timeout');
    expect(long.status).toBe(200);
    expect(long.json.pairs[0]).toMatchObject({ status: 'ok', winner: 0 });
    expect(long.json.rewards[0]).toBeGreaterThan(long.json.rewards[1]);
  });
});
