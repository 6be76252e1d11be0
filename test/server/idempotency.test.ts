import type { AddressInfo } from 'node:net';

import { describe, expect, it } from 'vitest';

import { getPreset } from '../../src/judge/presets.js';
import { candidate, counterValue, GROUND_TRUTH, QUESTION, waitFor, useHarness } from './helpers.js';

const CALLS = getPreset('default')!.llmCallsPerJudgment;

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- response bodies are checked field by field
type Json = any;

const harness = useHarness();

const group = (candidates: string[], extra: Record<string, unknown> = {}) => ({
  question: QUESTION,
  ground_truth: GROUND_TRUTH,
  candidates,
  ...extra,
});

describe('a flight runs until its latest joiner’s deadline', () => {
  it('answers a retry that joined late with the reward, although the first request timed out', async () => {
    // Each call takes 1.2 s: a judgment (2 stages) needs 2.4 s, past the first request's 2 s deadline.
    let offsetMs = 0;
    const h = await harness({
      env: { REQUEST_DEADLINE_MS: '2000' },
      fake: { latencyMs: 1200 },
      now: () => Date.now() + offsetMs,
    });
    const { app, fake } = h;
    const first = app.inject({ method: 'POST', url: '/v1/reward', payload: group([candidate(0)]) });
    await waitFor(() => fake.inflight() === 2, 'the analysts to call the backend');
    // The retry "arrives 1.5 s later": its deadline is 1.5 s past the first one's.
    offsetMs = 1500;
    const retry = app.inject({ method: 'POST', url: '/v1/reward', payload: group([candidate(0)]) });

    const firstBody: Json = (await first).json();
    expect(firstBody.results[0]).toMatchObject({ status: 'timeout', reward: null });
    const retryBody: Json = (await retry).json();
    expect(retryBody.results[0]).toMatchObject({ status: 'ok', reward: 1, cached: true });
    // One judgment served both: no second computation.
    expect(fake.callCount).toBe(CALLS);
  });

  it('extends a cascade judgment too: its escalation runs under the joiner’s later deadline', async () => {
    // single-judge (0.6 s) escalates a `match` to the committee (2 × 0.6 s): 1.8 s, past the first 1.2 s.
    let offsetMs = 0;
    const h = await harness({
      env: { REQUEST_DEADLINE_MS: '1200' },
      fake: { latencyMs: 600 },
      now: () => Date.now() + offsetMs,
    });
    const { app, fake } = h;
    const body = group([candidate(0)], { graph: 'cascade' });
    const first = app.inject({ method: 'POST', url: '/v1/reward', payload: body });
    await waitFor(() => fake.inflight() === 1, 'the first stage to call the backend');
    offsetMs = 900;
    const retry = app.inject({ method: 'POST', url: '/v1/reward', payload: body });

    expect((await first).json<Json>().results[0]).toMatchObject({ status: 'timeout', reward: null });
    expect((await retry).json<Json>().results[0]).toMatchObject({
      status: 'ok',
      reward: 1,
      cached: true,
      stop_reason: 'escalated',
    });
    expect(fake.callCount).toBe(getPreset('cascade')!.llmCallsPerJudgment);
  });
});

describe('idempotency ids', () => {
  it('replays a request_id’s completed judgments to a retry with the same items, even with CACHE_SIZE=0', async () => {
    const h = await harness({ env: { CACHE_SIZE: '0' } });
    const { app, fake } = h;
    const body = group([candidate(0), candidate(1)], { request_id: 'step-7-group-3' });
    const first: Json = (await app.inject({ method: 'POST', url: '/v1/reward', payload: body })).json();
    expect(fake.callCount).toBe(2 * CALLS);
    const retry: Json = (await app.inject({ method: 'POST', url: '/v1/reward', payload: body })).json();
    expect(retry.rewards).toEqual(first.rewards);
    expect(retry.results.map((r: Json) => r.judgment_id)).toEqual(
      first.results.map((r: Json) => r.judgment_id),
    );
    expect(retry.results.every((r: Json) => r.cached === true)).toBe(true);
    expect(fake.callCount).toBe(2 * CALLS);
    expect(await counterValue(h.metrics.idempotencyLookups, { result: 'hit' })).toBe(1);

    // Without an id the same body is computed again (the cache is off): the id is what saved the calls.
    await app.inject({ method: 'POST', url: '/v1/reward', payload: group([candidate(0), candidate(1)]) });
    expect(fake.callCount).toBe(4 * CALLS);
  });

  it('judges other items sent under a reused id afresh, never answering another body’s reward', async () => {
    const h = await harness({ env: { CACHE_SIZE: '0' } });
    const { app, fake } = h;
    await app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: group([candidate(0)], { request_id: 'x' }),
    });
    const other: Json = (
      await app.inject({
        method: 'POST',
        url: '/v1/reward',
        payload: group([candidate(1)], { request_id: 'x' }),
      })
    ).json();
    expect(other.results[0]).toMatchObject({ status: 'ok', reward: 0, cached: false });
    expect(fake.callCount).toBe(2 * CALLS);
    expect(await counterValue(h.metrics.idempotencyLookups, { result: 'miss' })).toBe(2);
  });

  it('replays by NeMo-Gym rollout index on /verify and by Idempotency-Key on /get_reward', async () => {
    const h = await harness({ env: { CACHE_SIZE: '0' } });
    const { app, fake } = h;
    const row = {
      responses_create_params: { input: [{ role: 'user', content: QUESTION }] },
      response: {
        output: [
          { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: candidate(0) }] },
        ],
      },
      ground_truth: GROUND_TRUTH,
      _ng_task_index: 12,
      _ng_rollout_index: 3,
    };
    const a: Json = (await app.inject({ method: 'POST', url: '/verify', payload: row })).json();
    const b: Json = (await app.inject({ method: 'POST', url: '/verify', payload: row })).json();
    expect(b.judge.judgment_id).toBe(a.judge.judgment_id);
    expect(b.judge.cached).toBe(true);
    expect(fake.callCount).toBe(CALLS);

    const prompt = `<|im_start|>user\n${QUESTION}<|im_end|>\n<|im_start|>assistant\n`;
    const rollout = {
      query: [`${prompt}${candidate(2)}<|im_end|>`],
      prompts: [prompt],
      labels: [GROUND_TRUTH],
    };
    const headers = { 'idempotency-key': 'rollout-2' };
    const c: Json = (
      await app.inject({ method: 'POST', url: '/get_reward', payload: rollout, headers })
    ).json();
    const d: Json = (
      await app.inject({ method: 'POST', url: '/get_reward', payload: rollout, headers })
    ).json();
    expect(d.rewards).toEqual(c.rewards);
    expect(d.extra_logs.cached).toEqual([1]);
    expect(fake.callCount).toBe(2 * CALLS);
  });

  it('keeps the judgment of a disconnected client with a rollout_id running, so its retry joins it', async () => {
    const h = await harness({ fake: { latencyMs: 600 } });
    const { app, fake } = h;
    await app.listen({ port: 0, host: '127.0.0.1' });
    const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/slime`;
    const body = JSON.stringify({
      prompt: QUESTION,
      response: candidate(0),
      label: GROUND_TRUTH,
      rollout_id: 41,
    });
    const send = (signal?: AbortSignal) =>
      fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
        signal: signal ?? null,
      });

    const controller = new AbortController();
    const gone = send(controller.signal).catch(() => 'aborted');
    await waitFor(() => fake.inflight() === 2, 'the analysts to call the backend');
    controller.abort();
    expect(await gone).toBe('aborted');
    // The retry comes after the server saw the client go (else a half-closed socket holds app.close ~3 s).
    const connections = () =>
      new Promise<number>((resolve) => app.server.getConnections((_error, n) => resolve(n)));
    await waitFor(async () => (await connections()) === 0, 'the server to see the client gone');
    const retry = await send();
    expect(retry.status).toBe(200);
    expect(((await retry.json()) as Json).reward).toBe(1);
    // The first client's judgment was not cancelled: the retry joined it.
    expect(fake.callCount).toBe(CALLS);
    expect(fake.calls.every((c) => c.outcome === 'replied')).toBe(true);
  });
});
