/**
 * Issue 39 item 1: a streamed rollout whose judgment failed scores its own group's judged mean, which only
 * the server sees whole (verl sends each rollout alone, to a random reward worker). `POST
 * /v1/reward/group-mean` answers it per (tenant, graph, question, ground truth), from every request.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { describe, expect, it, vi } from 'vitest';

import { hashKey } from '../../src/config.js';
import { MAX_GROUP_MEAN_WAIT_MS } from '../../src/server/http/schemas.js';
import { createGroupMeans, GROUP_WINDOW_MS, MAX_PER_GROUP } from '../../src/server/serving/group-means.js';
import { GOOD, GROUND_TRUTH, QUESTION, candidate, markerJudge, useHarness } from './helpers.js';
import type { FakeChatRequest, FakeReply } from '../fakes/openai.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- response bodies are checked field by field
type Json = any;

const harness = useHarness();
const FAIL = 'JUDGEFAILS';

/** The marker judge, and a 500 for every call about a candidate holding FAIL. */
function failingMarkerJudge(body: FakeChatRequest): FakeReply {
  const user = body.messages?.find((m) => m.role === 'user')?.content ?? '';
  return user.includes(FAIL) ? { kind: 'status', status: 500 } : markerJudge(body);
}

const entry = (name: string) => ({ name, sha256: hashKey(`key-${name}`), scopes: ['reward'] });
function keysFile(names: readonly string[]): string {
  const path = join(mkdtempSync(join(tmpdir(), 'reward-keys-')), 'keys.json');
  writeFileSync(path, JSON.stringify({ keys: names.map(entry) }));
  return path;
}
const bearer = (name: string) => ({ authorization: `Bearer key-${name}` });

describe('POST /v1/reward/group-mean', () => {
  it('averages the judged rollouts of one group across requests and routes, once each, never a failure', async () => {
    const h = await harness({ fake: { fallback: failingMarkerJudge } });
    const post = async (url: string, payload: Record<string, unknown>) => {
      const res = await h.app.inject({ method: 'POST', url, payload });
      expect(res.statusCode).toBe(200);
      return res.json<Json>();
    };
    const group = { question: QUESTION, ground_truth: GROUND_TRUTH };
    const mean = () => post('/v1/reward/group-mean', group);
    expect(await mean()).toMatchObject({ mean: null, n: 0, graph: { name: 'analysts-2' } });

    // Three "workers", one rollout each (the streaming shape), one of them a judge failure.
    await post('/v1/reward', { ...group, candidates: [candidate(0, true)] });
    await post('/v1/reward/batch', { groups: [{ ...group, candidates: [candidate(1, false)] }] });
    const failed = await post('/v1/reward', { ...group, candidates: [`${candidate(2, true)} ${FAIL}`] });
    expect(failed.rewards).toEqual([null]);
    expect(await mean()).toMatchObject({ mean: 0.5, n: 2 });

    // The same rollout again (a retry, a cache hit) does not weigh twice; a new one does.
    await post('/v1/reward', { ...group, candidates: [candidate(0, true)] });
    await post('/v1/reward', { ...group, candidates: [candidate(3, false), candidate(5, false)] });
    expect(await mean()).toMatchObject({ mean: 0.25, n: 4 });

    // Another prompt, another graph: other groups.
    expect(
      await post('/v1/reward/group-mean', { ...group, question: 'Another question entirely?' }),
    ).toMatchObject({
      mean: null,
      n: 0,
    });
    expect(await post('/v1/reward/group-mean', { ...group, graph: 'vote-3' })).toMatchObject({
      mean: null,
      graph: { name: 'vote-3' },
    });
  });

  it('records a batch of several groups each in its own group, and a rejected rollout as a real 0, once, from every route', async () => {
    const h = await harness();
    const post = async (url: string, payload: Record<string, unknown>) => {
      const res = await h.app.inject({ method: 'POST', url, payload });
      expect(res.statusCode).toBe(200);
      return res.json<Json>();
    };
    const a = { question: QUESTION, ground_truth: GROUND_TRUTH };
    const b = { question: 'Another question entirely?', ground_truth: GROUND_TRUTH };
    const batch = await post('/v1/reward/batch', {
      groups: [
        { ...a, candidates: [candidate(0, true), candidate(1, true), candidate(2, false)] },
        { ...b, candidates: [candidate(3, false)] },
      ],
    });
    expect(batch.groups.map((g: Json) => g.rewards)).toEqual([[1, 1, 0], [0]]);
    expect(await post('/v1/reward/group-mean', a)).toMatchObject({ mean: 2 / 3, n: 3 });
    expect(await post('/v1/reward/group-mean', b)).toMatchObject({ mean: 0, n: 1 });

    // A trace that never closed is rejected (reward 0, no call): a sibling's real value, counted once
    // however often and by whichever route it comes back.
    const cut = '<think>The method could be a sparse mixture of experts, or perhaps';
    expect((await post('/v1/reward', { ...b, candidates: [cut] })).rewards).toEqual([0]);
    const verify = {
      responses_create_params: { input: [{ role: 'user', content: b.question }] },
      response: {
        output: [{ type: 'message', role: 'assistant', content: [{ type: 'output_text', text: cut }] }],
      },
      ground_truth: GROUND_TRUTH,
    };
    expect((await post('/verify', verify)).reward).toBe(0);
    expect((await post('/verify', verify)).reward).toBe(0);
    expect(await post('/v1/reward/group-mean', b)).toMatchObject({ mean: 0, n: 2 });
  });

  it("is per tenant: one run never reads another's group", async () => {
    const h = await harness({ env: { REWARD_KEYS: keysFile(['run-a', 'run-b']) } });
    const group = { question: QUESTION, ground_truth: GROUND_TRUTH };
    const judged = await h.app.inject({
      method: 'POST',
      url: '/v1/reward',
      headers: bearer('run-a'),
      payload: { ...group, candidates: [candidate(0, true), candidate(1, true)] },
    });
    expect(judged.json<Json>().rewards).toEqual([1, 1]);
    const read = async (tenant: string) =>
      (
        await h.app.inject({
          method: 'POST',
          url: '/v1/reward/group-mean',
          headers: bearer(tenant),
          payload: group,
        })
      ).json<Json>();
    expect(await read('run-a')).toMatchObject({ mean: 1, n: 2 });
    expect(await read('run-b')).toMatchObject({ mean: null, n: 0 });
    const anonymous = await h.app.inject({ method: 'POST', url: '/v1/reward/group-mean', payload: group });
    expect(anonymous.statusCode).toBe(401);
  });

  it('with wait_ms, answers once the siblings in flight are recorded: the mean of all, not of the first done', async () => {
    // The streaming race: a failure asks for its group's mean while a slower sibling (a 0) is in the judge.
    const slow = (body: FakeChatRequest): FakeReply => {
      const user = body.messages?.find((m) => m.role === 'user')?.content ?? '';
      return user.includes('SLOWROW')
        ? { kind: 'slow', ms: 400, then: markerJudge(body) }
        : failingMarkerJudge(body);
    };
    const h = await harness({ fake: { fallback: slow } });
    const group = { question: QUESTION, ground_truth: GROUND_TRUTH };
    const post = (url: string, payload: Record<string, unknown>) =>
      h.app.inject({ method: 'POST', url, payload }).then((res) => res.json<Json>());
    await post('/v1/reward', { ...group, candidates: [candidate(0, true)] });
    const slowSibling = post('/v1/reward', { ...group, candidates: [`${candidate(1, false)} SLOWROW`] });
    await vi.waitFor(async () => expect((await post('/v1/reward/group-mean', group)).pending).toBe(1), {
      timeout: 5_000,
    });
    expect(await post('/v1/reward/group-mean', group)).toMatchObject({ mean: 1, n: 1, pending: 1 });
    const waited = await post('/v1/reward/group-mean', { ...group, wait_ms: 10_000 });
    expect(waited).toMatchObject({ mean: 0.5, n: 2, pending: 0 });
    expect((await slowSibling).rewards).toEqual([0]);
  });

  it('bounds the wait by wait_ms and refuses one above the cap', async () => {
    const h = await harness({ fake: { fallback: { kind: 'hang' } } });
    const group = { question: QUESTION, ground_truth: GROUND_TRUTH };
    const hung = h.app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: { ...group, candidates: [candidate(0, true)], request_id: 'hung' },
    });
    await vi.waitFor(
      async () =>
        expect(
          (await h.app.inject({ method: 'POST', url: '/v1/reward/group-mean', payload: group })).json<Json>()
            .pending,
        ).toBe(1),
      { timeout: 5_000 },
    );
    const res = await h.app.inject({
      method: 'POST',
      url: '/v1/reward/group-mean',
      payload: { ...group, wait_ms: 50 },
    });
    expect(res.json<Json>()).toMatchObject({ mean: null, n: 0, pending: 1 });
    const over = await h.app.inject({
      method: 'POST',
      url: '/v1/reward/group-mean',
      payload: { ...group, wait_ms: MAX_GROUP_MEAN_WAIT_MS + 1 },
    });
    expect(over.statusCode).toBe(400);
    await h.app.inject({ method: 'POST', url: '/v1/cancel', payload: { request_ids: ['hung'] } });
    await hung;
    expect(
      (await h.app.inject({ method: 'POST', url: '/v1/reward/group-mean', payload: group })).json<Json>()
        .pending,
    ).toBe(0);
  });

  it('refuses a body without a ground truth or with unknown keys (400)', async () => {
    const h = await harness();
    for (const payload of [{ question: QUESTION }, { ground_truth: GROUND_TRUTH, candidates: [GOOD] }]) {
      const res = await h.app.inject({ method: 'POST', url: '/v1/reward/group-mean', payload });
      expect(res.statusCode).toBe(400);
      expect(res.json<Json>().code).toBe('RW_BAD_REQUEST');
    }
  });
});

describe('createGroupMeans', () => {
  const parts = { tenant: 't', graphHash: 'h', question: 'q', groundTruth: 'g' };

  it('forgets rewards older than the window', () => {
    let now = 0;
    const means = createGroupMeans(() => now);
    means.record(parts, 'a', 1);
    now = GROUP_WINDOW_MS / 2;
    means.record(parts, 'b', 0);
    expect(means.mean(parts)).toEqual({ mean: 0.5, n: 2, pending: 0 });
    now = GROUP_WINDOW_MS + 1;
    expect(means.mean(parts)).toEqual({ mean: 0, n: 1, pending: 0 });
    now = 2 * GROUP_WINDOW_MS;
    expect(means.mean(parts)).toEqual({ mean: null, n: 0, pending: 0 });
  });

  it('keeps at most MAX_PER_GROUP judgments of a group, the newest', () => {
    const means = createGroupMeans(() => 0);
    for (let i = 0; i < MAX_PER_GROUP; i++) means.record(parts, `old-${i}`, 0);
    for (let i = 0; i < MAX_PER_GROUP; i++) means.record(parts, `new-${i}`, 1);
    expect(means.mean(parts)).toEqual({ mean: 1, n: MAX_PER_GROUP, pending: 0 });
  });

  it('counts judgments in flight per group; settled resolves when the last is released, a release counts once', async () => {
    const means = createGroupMeans(() => 0);
    const other = { ...parts, question: 'another' };
    const a = means.begin(parts, 2);
    const b = means.begin(parts, 1);
    means.begin(other, 1);
    expect(means.mean(parts).pending).toBe(3);
    let settled = false;
    const waiting = means.settled(parts, 60_000).then(() => (settled = true));
    a();
    a();
    await Promise.resolve();
    expect([means.mean(parts).pending, settled]).toEqual([1, false]);
    b();
    await waiting;
    expect([means.mean(parts).pending, means.mean(other).pending]).toEqual([0, 1]);
    await means.settled(parts, 60_000); // nothing in flight: at once
  });
});
