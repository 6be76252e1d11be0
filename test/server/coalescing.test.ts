import { request as httpRequest, type ClientRequest } from 'node:http';
import type { AddressInfo } from 'node:net';

import { afterEach, describe, expect, it } from 'vitest';

import { getPreset } from '../../src/judge/presets.js';
import { universalReply } from '../fakes/openai.js';
import {
  candidate,
  counterValue,
  GROUND_TRUTH,
  QUESTION,
  useHarness,
  waitFor,
  type Harness,
} from './helpers.js';

const CALLS = getPreset('default')!.llmCallsPerJudgment;

/** 16 candidates, 12 distinct: items 12–15 repeat items 0–3. */
function groupWithDuplicates(): string[] {
  const distinct = Array.from({ length: 12 }, (_, i) => candidate(i));
  return [...distinct, ...distinct.slice(0, 4)];
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- response bodies are checked field by field
type Json = any;

const harness = useHarness();
const open: ClientRequest[] = [];
afterEach(() => {
  for (const req of open.splice(0)) req.destroy();
});

describe('coalescing and cache', () => {
  it('computes a group of 16 candidates with 4 duplicates as exactly 12 judgments', async () => {
    const h = await harness({ fake: { latencyMs: 20 } });
    const candidates = groupWithDuplicates();
    const res = await h.app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: { question: QUESTION, ground_truth: GROUND_TRUTH, candidates },
    });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(h.fake.callCount).toBe(12 * CALLS);
    expect(body.usage.calls).toBe(12 * CALLS);
    expect(body.results.slice(0, 12).every((r: { cached: boolean }) => !r.cached)).toBe(true);
    expect(body.results.slice(12).every((r: { cached: boolean }) => r.cached)).toBe(true);
    for (let i = 0; i < 4; i++) {
      expect(body.results[12 + i].judgment_id).toBe(body.results[i].judgment_id);
      expect(body.rewards[12 + i]).toBe(body.rewards[i]);
    }
    expect(await counterValue(h.metrics.cacheLookups, { result: 'miss' })).toBe(12);
    expect(await counterValue(h.metrics.cacheLookups, { result: 'coalesced' })).toBe(4);
  });

  it('computes the same group sent as 16 concurrent single-rollout /get_reward requests as 12 judgments', async () => {
    const h = await harness({ fake: { latencyMs: 20 } });
    const prompt = `<|im_start|>user\n${QUESTION}<|im_end|>\n<|im_start|>assistant\n`;
    const app = h.app;
    const responses = await Promise.all(
      groupWithDuplicates().map((c) =>
        app.inject({
          method: 'POST',
          url: '/get_reward',
          payload: { query: [`${prompt}${c}<|im_end|>`], prompts: [prompt], labels: [GROUND_TRUTH] },
        }),
      ),
    );
    expect(responses.map((r) => r.statusCode)).toEqual(Array(16).fill(200));
    expect(h.fake.callCount).toBe(12 * CALLS);
    expect(await counterValue(h.metrics.judgments)).toBe(12);
    const cached = responses.map((r) => r.json().extra_logs.cached[0]);
    expect(cached.filter((c) => c === 1)).toHaveLength(4);
    expect(responses.map((r) => r.json().rewards[0])).toEqual(
      groupWithDuplicates().map((_, i) => ((i % 12) % 2 === 0 ? 1 : 0)),
    );
  });

  it('serves a repeated judgment from the LRU cache with cached: true and no backend call', async () => {
    const h = await harness();
    const payload = { question: QUESTION, ground_truth: GROUND_TRUTH, candidates: [candidate(0)] };
    const first = await h.app.inject({ method: 'POST', url: '/v1/reward', payload });
    const calls = h.fake.callCount;
    const second = await h.app.inject({ method: 'POST', url: '/v1/reward', payload });
    expect(h.fake.callCount).toBe(calls);
    expect(second.json().results[0].cached).toBe(true);
    expect(second.json().results[0].judgment_id).toBe(first.json().results[0].judgment_id);
    expect(second.json().usage.calls).toBe(0);
    expect(await counterValue(h.metrics.cacheLookups, { result: 'hit' })).toBe(1);
  });

  it('never caches a failure: the next identical request computes again', async () => {
    const h = await harness();
    h.fake.setScript([], { kind: 'status', status: 500 });
    // One LLM call per judgment, so no sibling call is still travelling when the failure is answered.
    const payload = {
      question: QUESTION,
      ground_truth: GROUND_TRUTH,
      candidates: [candidate(0)],
      graph: 'single-judge',
    };
    const failed = await h.app.inject({ method: 'POST', url: '/v1/reward', payload });
    expect(failed.json().results[0].status).toBe('judge_error');
    h.fake.setScript([], () => ({ kind: 'json', body: universalReply('match') }));
    const retried = await h.app.inject({ method: 'POST', url: '/v1/reward', payload });
    expect(retried.json().results[0]).toMatchObject({ status: 'ok', reward: 1, cached: false });
    expect(retried.json().results[0].judgment_id).not.toBe(failed.json().results[0].judgment_id);
    expect(h.fake.calls.map((c) => c.status)).toEqual([500, 200]);
    expect(await counterValue(h.metrics.judgments)).toBe(2);
  });

  it('with CACHE_SIZE=0 still coalesces concurrent duplicates but recomputes later ones', async () => {
    const h = await harness({ env: { CACHE_SIZE: '0' } });
    const payload = {
      question: QUESTION,
      ground_truth: GROUND_TRUTH,
      candidates: [candidate(0), candidate(0)],
    };
    await h.app.inject({ method: 'POST', url: '/v1/reward', payload });
    expect(h.fake.callCount).toBe(CALLS);
    await h.app.inject({ method: 'POST', url: '/v1/reward', payload });
    expect(h.fake.callCount).toBe(2 * CALLS);
  });
});

describe('client disconnect', () => {
  async function listen(harness: Harness): Promise<number> {
    await harness.app.listen({ port: 0, host: '127.0.0.1' });
    return (harness.app.server.address() as AddressInfo).port;
  }

  function post(
    port: number,
    body: unknown,
  ): { req: ClientRequest; response: Promise<{ status: number; json: Json }> } {
    const payload = JSON.stringify(body);
    let req!: ClientRequest;
    const response = new Promise<{ status: number; json: Json }>((resolve, reject) => {
      req = httpRequest(
        {
          host: '127.0.0.1',
          port,
          path: '/v1/reward',
          method: 'POST',
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, json: JSON.parse(Buffer.concat(chunks).toString()) }),
          );
        },
      );
      req.on('error', reject);
      req.end(payload);
    });
    response.catch(() => undefined);
    open.push(req);
    return { req, response };
  }

  const body = { question: QUESTION, ground_truth: GROUND_TRUTH, candidates: [candidate(0)] };

  it('cancels the LLM calls of a judgment nobody else waits for', async () => {
    const h = await harness({ fake: { fallback: { kind: 'hang' } } });
    const port = await listen(h);
    const fake = h.fake;
    const { req } = post(port, body);
    await waitFor(() => fake.inflight() === 2, 'both analysts in flight');
    req.destroy();
    await waitFor(() => fake.inflight() === 0, 'the calls to be cancelled');
    expect(fake.calls.map((c) => c.outcome)).toEqual(['client_closed', 'client_closed']);
    // The evaluator never ran.
    expect(fake.callCount).toBe(2);
    // The cut calls count as the client's abort, not as judge timeouts.
    await waitFor(
      async () => (await counterValue(h.metrics.llmCalls, { outcome: 'RW_CLIENT_ABORTED' })) === 2,
      'the aborted calls to be counted',
    );
    expect(await counterValue(h.metrics.llmCalls, { outcome: 'RW_JUDGE_TIMEOUT' })).toBe(0);
  });

  it('keeps a judgment running when another request shares it', async () => {
    const h = await harness({
      fake: { fallback: { kind: 'slow', ms: 400, then: { kind: 'json', body: universalReply('match') } } },
    });
    const port = await listen(h);
    const { fake, metrics } = h;
    const first = post(port, body);
    await waitFor(() => fake.inflight() === 2, 'both analysts in flight');
    const second = post(port, body);
    await waitFor(
      async () => (await counterValue(metrics.cacheLookups, { result: 'coalesced' })) === 1,
      'join',
    );
    first.req.destroy();
    const answer = await second.response;
    expect(answer.status).toBe(200);
    expect(answer.json.results[0]).toMatchObject({ status: 'ok', reward: 1, cached: true });
    expect(fake.callCount).toBe(CALLS);
    expect(fake.calls.every((c) => c.outcome === 'replied')).toBe(true);
  });
});
