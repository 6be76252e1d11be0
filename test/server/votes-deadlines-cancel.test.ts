/**
 * Issue 21, items 1–3, against the built server (`node dist/server/main.js`) and the fake backend: votes and
 * judge stamps (also replayed from the cache), client deadlines (`deadline_ms`, `x-reward-deadline-ms`)
 * capped by REQUEST_DEADLINE_MS and honoured by admission, and `POST /v1/cancel` (by tag and by id; a
 * judgment another live request waits for keeps running; aborted calls are seen closed by the fake).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, beforeAll, describe, expect, it } from 'vitest';

import { hashKey } from '../../src/config.js';

import { startFakeOpenAI, type FakeOpenAI } from '../fakes/openai.js';
import { requestOnce, startBuiltServer, type BuiltServer } from '../support/built-server.js';
import { ensureDist } from '../support/dist.js';
import { candidate, GROUND_TRUTH, markerJudge, QUESTION, waitFor } from './helpers.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- response bodies are checked field by field
type Json = any;

let fake: FakeOpenAI | undefined;
let server: BuiltServer | undefined;

afterEach(async () => {
  if (server !== undefined && server.child.exitCode === null) {
    server.child.kill('SIGKILL');
    await server.exit;
  }
  server = undefined;
  await fake?.close();
  fake = undefined;
});

beforeAll(() => {
  ensureDist();
}, 180_000);

async function start(env: Record<string, string>, fakeOptions: Parameters<typeof startFakeOpenAI>[0]) {
  fake = await startFakeOpenAI(fakeOptions);
  server = await startBuiltServer({
    JUDGE_BASE_URL: fake.baseURL,
    JUDGE_MODEL: 'fake-model',
    JUDGE_API_KEY: 'test',
    JUDGE_MAX_RETRIES: '0',
    ...env,
  });
  return { fake, server };
}

async function post(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: Json; ms: number; headers: Headers }> {
  const started = performance.now();
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  const json: Json = await res.json();
  return { status: res.status, json, ms: performance.now() - started, headers: res.headers };
}

const group = (candidates: string[], extra: Record<string, unknown> = {}) => ({
  question: QUESTION,
  ground_truth: GROUND_TRUTH,
  candidates,
  ...extra,
});

describe('votes and stamps', () => {
  it('carries votes, the reported judge model, the prompt version and the graph hash, also when cached', async () => {
    const { fake, server } = await start({}, { fallback: markerJudge, replyModel: 'served/judge-v2' });
    const first = await post(`${server.url}/v1/reward`, group([candidate(0), candidate(1)]));
    expect(first.status).toBe(200);
    const body = first.json;
    expect(body.judge_model).toBe('served/judge-v2');
    expect(typeof body.prompt_version).toBe('string');
    expect(body.graph_hash).toBe(body.graph.hash);
    // analysts-2: two Analysts and the Evaluator each took a position.
    for (const [i, r] of body.results.entries()) {
      expect(r.votes.map((v: Json) => v.role).sort()).toEqual(['analyst', 'analyst', 'evaluator']);
      for (const v of r.votes) {
        expect(Object.keys(v).sort()).toEqual(['confidence', 'node', 'role', 'round', 'stance']);
        expect(v.stance).toBe(i === 0 ? 'match' : 'no_match');
        expect(v.round).toBe(1);
        expect(v.confidence).toBe(0.9);
      }
    }
    const calls = fake.callCount;
    const again = await post(`${server.url}/v1/reward`, group([candidate(0), candidate(1)]));
    expect(fake.callCount).toBe(calls);
    expect(again.json.results.map((r: Json) => r.cached)).toEqual([true, true]);
    expect(again.json.results.map((r: Json) => r.votes)).toEqual(body.results.map((r: Json) => r.votes));
    expect(again.json.judge_model).toBe('served/judge-v2');

    const judge = await post(`${server.url}/v1/judge`, {
      question: QUESTION,
      ground_truth: GROUND_TRUTH,
      candidate: candidate(2),
    });
    expect(judge.json.votes).toHaveLength(3);
    expect(judge.json.judge_model).toBe('served/judge-v2');
    expect(judge.json.graph_hash).toBe(body.graph_hash);
    expect(judge.json.prompt_version).toBe(body.prompt_version);

    const batch = await post(`${server.url}/v1/reward/batch`, { groups: [group([candidate(4)])] });
    expect(batch.json.judge_model).toBe('served/judge-v2');
    expect(batch.json.groups[0].graph_hash).toBe(body.graph_hash);
    expect(batch.json.groups[0].results[0].votes).toHaveLength(3);

    const slime = await post(`${server.url}/slime`, {
      prompt: QUESTION,
      response: candidate(6),
      label: GROUND_TRUTH,
    });
    expect(slime.json.votes).toHaveLength(3);
    expect(slime.json).toMatchObject({
      judge_model: 'served/judge-v2',
      prompt_version: body.prompt_version,
      graph_hash: body.graph_hash,
    });

    const openrlhf = await post(`${server.url}/get_reward`, {
      query: [candidate(8)],
      labels: [GROUND_TRUTH],
    });
    expect(openrlhf.json).toMatchObject({ judge_model: 'served/judge-v2', graph_hash: body.graph_hash });
    expect(openrlhf.json.extra_logs.votes).toEqual([3]);
    expect(openrlhf.json.extra_logs.votes_match_share).toEqual([1]);

    const verify = await post(`${server.url}/verify`, {
      responses_create_params: { input: QUESTION },
      response: { output: [{ type: 'message', role: 'assistant', content: candidate(10) }] },
      ground_truth: GROUND_TRUTH,
    });
    expect(verify.json.votes).toHaveLength(3);
    expect(verify.json).toMatchObject({ judge_model: 'served/judge-v2', graph_hash: body.graph_hash });
  }, 30_000);
});

describe('client deadlines', () => {
  it('answers before a deadline_ms shorter than REQUEST_DEADLINE_MS, the unfinished items timeout', async () => {
    const { server } = await start(
      { REQUEST_DEADLINE_MS: '20000', JUDGE_TIMEOUT_MS: '20000' },
      { fallback: markerJudge, latencyMs: 3000 },
    );
    const body = await post(
      `${server.url}/v1/reward`,
      group([candidate(0), candidate(1)], { deadline_ms: 800 }),
    );
    expect(body.status).toBe(200);
    expect(body.ms).toBeLessThan(800);
    expect(body.json.results.map((r: Json) => r.status)).toEqual(['timeout', 'timeout']);
    expect(body.json.rewards).toEqual([null, null]);

    // The adapters take the header; /slime without FAILURE_REWARD answers the failure (503), still in time.
    const slime = await post(
      `${server.url}/slime`,
      { prompt: QUESTION, response: candidate(3), label: GROUND_TRUTH },
      { 'x-reward-deadline-ms': '700' },
    );
    expect(slime.ms).toBeLessThan(700);
    expect(slime.json.code).toBe('RW_JUDGE_FAILED');
    expect(slime.json.details.failed[0].status).toBe('timeout');

    const bad = await post(
      `${server.url}/slime`,
      { prompt: QUESTION, response: candidate(3), label: GROUND_TRUTH },
      { 'x-reward-deadline-ms': 'soon' },
    );
    expect(bad.status).toBe(400);
    expect(bad.json.code).toBe('RW_BAD_REQUEST');
  }, 30_000);

  it('caps a longer deadline_ms at REQUEST_DEADLINE_MS', async () => {
    const { server } = await start(
      { REQUEST_DEADLINE_MS: '600', JUDGE_TIMEOUT_MS: '20000' },
      { fallback: markerJudge, latencyMs: 3000 },
    );
    const body = await post(`${server.url}/v1/reward`, group([candidate(0)], { deadline_ms: 60_000 }));
    expect(body.json.results[0].status).toBe('timeout');
    expect(body.ms).toBeLessThan(1500);
  }, 30_000);

  it('refuses with 503 and Retry-After when the work cannot fit the client deadline, admits it under the server one', async () => {
    const { fake, server } = await start(
      { REQUEST_DEADLINE_MS: '60000', JUDGE_TIMEOUT_MS: '30000', JUDGE_MAX_INFLIGHT: '1' },
      { fallback: { kind: 'hang' } },
    );
    // A backlog: 4 judgments × 3 calls at the assumed 1 call/s (1 slot, 1 s per call before any measured).
    const backlog = post(
      `${server.url}/v1/reward`,
      group(
        [0, 1, 2, 3].map((i) => candidate(i)),
        { tag: 'b' },
      ),
    );
    await fake.waitForCalls(1);
    const refused = await post(`${server.url}/v1/reward`, group([candidate(9)], { deadline_ms: 3000 }));
    expect(refused.status).toBe(503);
    expect(refused.json.code).toBe('RW_OVERLOADED');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // The same work under the server's own 60 s fits: admitted (its 3 calls join the backlog), then
    // cancelled with the backlog to end the test.
    const admitted = post(`${server.url}/v1/reward`, group([candidate(9)], { request_id: 'adm' }));
    // (Polled on /metrics: /readyz pings the backend, whose only connection the hung call holds.)
    const predictedWaitS = async (): Promise<number> => {
      const text = await (await fetch(`${server.url}/metrics`)).text();
      return Number(/^reward_predicted_wait_seconds (\S+)$/m.exec(text)?.[1] ?? 0);
    };
    await waitFor(async () => (await predictedWaitS()) >= 15, 'the second request admitted');
    await post(`${server.url}/v1/cancel`, { tag: 'b' });
    await post(`${server.url}/v1/cancel`, { request_ids: ['adm'] });
    const [a, b] = await Promise.all([backlog, admitted]);
    expect(a.json.results.map((r: Json) => r.status)).toEqual([
      'cancelled',
      'cancelled',
      'cancelled',
      'cancelled',
    ]);
    expect(b.status).toBe(200);
    expect(b.json.results[0].status).toBe('cancelled');
  }, 30_000);
});

describe('POST /v1/cancel', () => {
  it('aborts the judgments only cancelled requests wait for; a shared one runs on for its live request', async () => {
    const { fake, server } = await start(
      { REQUEST_DEADLINE_MS: '20000', JUDGE_TIMEOUT_MS: '20000' },
      { fallback: { kind: 'hang' } },
    );
    const shared = candidate(0);
    const own = candidate(1);
    const tagged = post(`${server.url}/v1/reward`, group([shared, own], { tag: 'step-7' }));
    const live = post(`${server.url}/v1/reward`, group([shared], { request_id: 'r-live' }));
    // Both judgments' two Analysts are waiting on the hung fake.
    await fake.waitForCalls(4);

    const started = performance.now();
    const cancel = await post(`${server.url}/v1/cancel`, { tag: 'step-7' });
    expect(cancel.status).toBe(200);
    expect(cancel.json).toEqual({ cancelled_judgments: 1, cancelled_requests: 1 });
    const answered = await tagged;
    expect(performance.now() - started).toBeLessThan(1000);
    expect(answered.json.results.map((r: Json) => r.status)).toEqual(['cancelled', 'cancelled']);
    expect(answered.json.rewards).toEqual([null, null]);
    expect(answered.json.results[0].error_code).toBe('RW_CANCELLED');

    // The own judgment's two calls were aborted (the fake saw them closed); the shared one's still wait.
    await waitFor(
      () => fake.calls.filter((c) => c.outcome === 'client_closed').length === 2,
      'aborted calls',
    );
    const userOf = (c: (typeof fake.calls)[number]) =>
      c.body.messages?.find((m) => m.role === 'user')?.content ?? '';
    const closed = fake.calls.filter((c) => c.outcome === 'client_closed');
    for (const c of closed) expect(userOf(c)).toContain('Idea 1:');
    const pending = fake.calls.filter((c) => c.outcome === 'pending');
    expect(pending).toHaveLength(2);
    for (const c of pending) expect(userOf(c)).toContain('Idea 0:');

    // A request arriving with the cancelled tag is answered cancelled without calling the judge.
    const calls = fake.callCount;
    const late = await post(`${server.url}/v1/reward`, group([candidate(5)], { tag: 'step-7' }));
    expect(late.json.results[0].status).toBe('cancelled');
    expect(fake.callCount).toBe(calls);

    const byId = await post(`${server.url}/v1/cancel`, { request_ids: ['r-live'] });
    expect(byId.json).toEqual({ cancelled_judgments: 1, cancelled_requests: 1 });
    expect((await live).json.results[0].status).toBe('cancelled');
    await waitFor(() => fake.calls.every((c) => c.outcome === 'client_closed'), 'every call aborted');

    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    expect(metrics).toContain('reward_cancelled_judgments_total{route="/v1/reward"} 2');

    const invalid = await post(`${server.url}/v1/cancel`, { request_ids: [], tag: 'x' });
    expect(invalid.status).toBe(400);
  }, 30_000);

  it('cancels queued judgments before they start, and adapters by x-reward-tag', async () => {
    const { fake, server } = await start(
      { REQUEST_DEADLINE_MS: '20000', JUDGE_TIMEOUT_MS: '20000', JUDGE_MAX_INFLIGHT: '1' },
      { fallback: { kind: 'hang' } },
    );
    // One backend slot: the first Analyst call holds it, every other call waits in the server.
    const step = post(
      `${server.url}/v1/reward`,
      group(
        [0, 1, 2].map((i) => candidate(i)),
        { tag: 'step-8' },
      ),
    );
    const slime = post(
      `${server.url}/slime`,
      { prompt: QUESTION, response: candidate(7), label: GROUND_TRUTH },
      { 'x-reward-tag': 'step-8' },
    );
    await fake.waitForCalls(1);
    const cancel = await post(`${server.url}/v1/cancel`, { tag: 'step-8' });
    expect(cancel.json).toEqual({ cancelled_judgments: 4, cancelled_requests: 2 });
    const [a, b] = await Promise.all([step, slime]);
    expect(a.json.results.map((r: Json) => r.status)).toEqual(['cancelled', 'cancelled', 'cancelled']);
    expect(b.status).toBe(200);
    expect(b.json).toMatchObject({ reward: null, status: 'cancelled' });
    await waitFor(() => fake.calls.every((c) => c.outcome === 'client_closed'), 'every call aborted');
    // Nothing queued started after the cancel: the only call the fake ever saw was the first one.
    expect(fake.callCount).toBe(1);
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    expect(metrics).toMatch(/reward_cancelled_judgments_total\{route="\/slime"\} 1/);
  }, 30_000);

  it("cancels an adapter's rollout by its rollout_id", async () => {
    const { fake, server } = await start(
      { REQUEST_DEADLINE_MS: '20000', JUDGE_TIMEOUT_MS: '20000' },
      { fallback: { kind: 'hang' } },
    );
    const slime = post(`${server.url}/slime`, {
      prompt: QUESTION,
      response: candidate(3),
      label: GROUND_TRUTH,
      rollout_id: 'ro-9',
    });
    await fake.waitForCalls(2);
    const cancel = await post(`${server.url}/v1/cancel`, { request_ids: ['ro-9'] });
    expect(cancel.json).toEqual({ cancelled_judgments: 1, cancelled_requests: 1 });
    expect((await slime).json).toMatchObject({ reward: null, status: 'cancelled' });
  }, 30_000);

  it('cancels the comparisons of a ranking request', async () => {
    const { fake, server } = await start(
      { REQUEST_DEADLINE_MS: '20000', JUDGE_TIMEOUT_MS: '20000' },
      { fallback: { kind: 'hang' } },
    );
    const rank = post(`${server.url}/v1/rank`, {
      question: QUESTION,
      ground_truth: GROUND_TRUTH,
      candidates: [candidate(0), candidate(1), candidate(2)],
      tag: 'rank-1',
    });
    // 3 pairs × both orders.
    await fake.waitForCalls(6);
    const cancel = await post(`${server.url}/v1/cancel`, { tag: 'rank-1' });
    expect(cancel.json).toEqual({ cancelled_judgments: 3, cancelled_requests: 1 });
    const ranked = (await rank).json;
    expect(ranked.pairs.map((p: Json) => p.status)).toEqual(['cancelled', 'cancelled', 'cancelled']);
    expect(ranked.scores).toEqual([null, null, null]);
    expect(typeof ranked.judge_model).toBe('string');
    await waitFor(() => fake.calls.every((c) => c.outcome === 'client_closed'), 'every call aborted');
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    expect(metrics).toContain('reward_cancelled_judgments_total{route="/v1/rank"} 3');
  }, 30_000);

  it("reaches every worker under WORKERS=2 (relayed by the cluster primary), the cancelling tenant's requests only", async () => {
    fake = await startFakeOpenAI({ fallback: { kind: 'hang' } });
    // Two runs (REWARD_KEYS) with the same tag: each run's cancel reaches its own requests on both workers.
    const keys = join(mkdtempSync(join(tmpdir(), 'reward-keys-')), 'keys.json');
    const entry = (name: string) => ({ name, sha256: hashKey(`key-${name}`), scopes: ['reward', 'cancel'] });
    writeFileSync(keys, JSON.stringify({ keys: [entry('run-a'), entry('run-b')] }));
    const as = (i: number) => ({ authorization: `Bearer key-${i % 2 === 0 ? 'run-a' : 'run-b'}` });
    server = await startBuiltServer(
      {
        JUDGE_BASE_URL: fake.baseURL,
        JUDGE_MODEL: 'fake-model',
        JUDGE_API_KEY: 'test',
        JUDGE_MAX_RETRIES: '0',
        WORKERS: '2',
        REQUEST_DEADLINE_MS: '20000',
        JUDGE_TIMEOUT_MS: '20000',
        REWARD_KEYS: keys,
      },
      2,
    );
    const url = server.url;
    // One connection each: the primary hands connections to the workers in turn (each gets both runs).
    const answers = [0, 1, 2, 3].map((i) =>
      requestOnce(`${url}/v1/reward`, 'POST', group([candidate(i)], { tag: 'multi' }), as(i)),
    );
    await fake.waitForCalls(8);
    const started = performance.now();
    const cancelB = await requestOnce(`${url}/v1/cancel`, 'POST', { tag: 'multi' }, as(1));
    expect(cancelB.json()).toEqual({ cancelled_judgments: 2, cancelled_requests: 2, workers: 2 });
    const [a0, b1, a2, b3] = answers;
    for (const b of await Promise.all([b1, b3]))
      expect((b?.json() as Json).results[0].status).toBe('cancelled');
    expect(performance.now() - started).toBeLessThan(2000);
    await waitFor(
      () => fake!.calls.filter((c) => c.outcome === 'client_closed').length === 4,
      "run-b's calls aborted",
    );
    expect(fake.calls.filter((c) => c.outcome === 'pending')).toHaveLength(4); // run-a's still wait
    const cancelA = await requestOnce(`${url}/v1/cancel`, 'POST', { tag: 'multi' }, as(0));
    expect(cancelA.json()).toEqual({ cancelled_judgments: 2, cancelled_requests: 2, workers: 2 });
    for (const a of await Promise.all([a0, a2]))
      expect((a?.json() as Json).results[0].status).toBe('cancelled');
    await waitFor(() => fake!.calls.every((c) => c.outcome === 'client_closed'), 'every call aborted');
  }, 30_000);
});
