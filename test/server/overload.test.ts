import type { AddressInfo } from 'node:net';

import { describe, expect, it } from 'vitest';

import { getPreset } from '../../src/judge/presets.js';
import { candidate, counterValue, GROUND_TRUTH, QUESTION, waitFor, useHarness } from './helpers.js';

const CALLS = getPreset('default')!.llmCallsPerJudgment;

const harness = useHarness();

const group = (candidates: string[]) => ({ question: QUESTION, ground_truth: GROUND_TRUTH, candidates });

describe('admission', () => {
  it('refuses a request whose new work would finish after the deadline: 503 RW_OVERLOADED, Retry-After = predicted wait, none started', async () => {
    // Cold start: 1 backend slot at the assumed 1 s per call drains 1 call/s; the deadline allows 0.9 × 2 s.
    // (The first request's items hang until that deadline: a shorter one ends the test sooner.) The wait
    // is the backlog's 6 calls at 1 call/s, but they time out at the first request's deadline: ≤ 2 s.
    const h = await harness({
      env: { JUDGE_MAX_INFLIGHT: '1', REQUEST_DEADLINE_MS: '2000' },
      fake: { fallback: { kind: 'hang' } },
    });
    const { app, fake } = h;
    // Nothing ahead of it: admitted although its own 6 calls need 6 s (its unfinished items will time out).
    const first = app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: group([candidate(0), candidate(1)]),
    });
    await waitFor(() => fake.inflight() === 1, 'the first judgment to call the backend');

    const refused = await app.inject({ method: 'POST', url: '/v1/reward', payload: group([candidate(2)]) });
    expect(refused.statusCode).toBe(503);
    expect(refused.json()).toMatchObject({
      code: 'RW_OVERLOADED',
      details: { reason: 'deadline', drain_calls_per_s: 1 },
    });
    const { predicted_wait_s: waitS, retry_after_s: retryAfterS } = refused.json().details;
    expect(waitS).toBeGreaterThan(0);
    expect(waitS).toBeLessThanOrEqual(2);
    expect(retryAfterS).toBeGreaterThanOrEqual(1);
    expect(retryAfterS).toBeLessThanOrEqual(2);
    expect(refused.headers['retry-after']).toBe(String(retryAfterS));
    expect(await counterValue(h.metrics.admissionRefusals, { reason: 'deadline' })).toBe(1);
    expect((await h.metrics.predictedWait.get()).values[0]?.value).toBeLessThanOrEqual(2);

    // One new judgment among one already in flight: still refused whole.
    const mixed = await app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: group([candidate(0), candidate(3)]),
    });
    expect(mixed.statusCode).toBe(503);
    expect(await counterValue(h.metrics.cacheLookups)).toBe(2);

    const ready = await app.inject({ method: 'GET', url: '/readyz' });
    expect(ready.statusCode).toBe(503);
    expect(ready.json()).toMatchObject({
      ready: false,
      saturated: true,
      judgments: { backlog_calls: 6, drain_calls_per_s: 1 },
    });
    expect(ready.json().judgments.predicted_wait_s).toBeLessThanOrEqual(2);
    expect(fake.callCount).toBe(1);
    await fake.close();
    const answered = await first;
    expect(answered.statusCode).toBe(200);
    expect(answered.json().rewards).toEqual([null, null]);
  });

  it('refuses work beyond the memory bound (MAX_QUEUED_JUDGMENTS) even when the deadline would allow it', async () => {
    const h = await harness({
      env: { MAX_CONCURRENT_JUDGMENTS: '1', MAX_QUEUED_JUDGMENTS: '1' },
      fake: { fallback: { kind: 'hang' } },
    });
    const { app, fake } = h;
    const first = app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: group([candidate(0), candidate(1)]),
    });
    await waitFor(() => fake.inflight() === 2, 'the first judgment to run');
    const refused = await app.inject({ method: 'POST', url: '/v1/reward', payload: group([candidate(2)]) });
    expect(refused.statusCode).toBe(503);
    expect(refused.json().details.reason).toBe('memory');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect((await h.metrics.queueDepth.get()).values[0]?.value).toBe(1);
    await fake.close();
    expect((await first).json().rewards).toEqual([null, null]);
  });

  it('answers 400, not a retryable 503, to a request larger than the whole capacity', async () => {
    const h = await harness({ env: { MAX_CONCURRENT_JUDGMENTS: '1', MAX_QUEUED_JUDGMENTS: '1' }, fake: {} });
    const tooBig = await h.app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: group([candidate(0), candidate(1), candidate(2)]),
    });
    expect(tooBig.statusCode).toBe(400);
    expect(tooBig.json().code).toBe('RW_BAD_REQUEST');
    expect(tooBig.json().details).toEqual({ new_judgments: 3, capacity: 2 });
    expect(tooBig.headers['retry-after']).toBeUndefined();
    expect(h.fake.callCount).toBe(0);
  });

  it('admits a request whose judgments are all in flight already, even when the queue is full', async () => {
    const h = await harness({
      env: { MAX_CONCURRENT_JUDGMENTS: '1', MAX_QUEUED_JUDGMENTS: '0', JUDGE_MAX_INFLIGHT: '1' },
      fake: { latencyMs: 150 },
    });
    const { app, fake } = h;
    const first = app.inject({ method: 'POST', url: '/v1/reward', payload: group([candidate(0)]) });
    await waitFor(() => fake.inflight() === 1, 'the judgment to run');
    const joined = await app.inject({ method: 'POST', url: '/v1/reward', payload: group([candidate(0)]) });
    expect(joined.statusCode).toBe(200);
    expect(joined.json().results[0].cached).toBe(true);
    expect((await first).statusCode).toBe(200);
    expect(fake.callCount).toBe(CALLS);
  });
});

describe('deadline', () => {
  it('answers items still running at REQUEST_DEADLINE_MS as timeout with reward null, and stays responsive meanwhile', async () => {
    const h = await harness({ env: { REQUEST_DEADLINE_MS: '400' }, fake: { fallback: { kind: 'hang' } } });
    const { app, fake } = h;
    const started = Date.now();
    const pending = app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: group([candidate(0), candidate(1), 'Thought process:']),
    });
    await waitFor(() => fake.inflight() === 4, 'both judgments to call the backend');
    const health = await app.inject({ method: 'GET', url: '/healthz' });
    expect(health.statusCode).toBe(200);
    expect(fake.inflight()).toBe(4);

    const res = await pending;
    const elapsed = Date.now() - started;
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.rewards).toEqual([null, null, 0]);
    expect(body.results[0]).toMatchObject({
      status: 'timeout',
      reward: null,
      verdict: null,
      error_code: 'RW_JUDGE_TIMEOUT',
    });
    expect(body.results[2].status).toBe('rejected_input');
    expect(body.group).toMatchObject({ n_ok: 1, n_failed: 2, advantages: [null, null, 0] });
    expect(elapsed).toBeGreaterThanOrEqual(390);
    expect(elapsed).toBeLessThan(3000);
    // The hung calls were cancelled at the deadline.
    await waitFor(() => fake.inflight() === 0, 'the hung calls to be cancelled');
  });

  it('times out a judgment still waiting for a run slot', async () => {
    const h = await harness({
      env: { REQUEST_DEADLINE_MS: '300', MAX_CONCURRENT_JUDGMENTS: '1' },
      fake: { fallback: { kind: 'hang' } },
    });
    const res = await h.app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: group([candidate(0), candidate(1)]),
    });
    expect(res.json().results.map((r: { status: string }) => r.status)).toEqual(['timeout', 'timeout']);
    // Only the running judgment reached the backend; the queued one never started.
    expect(h.fake.callCount).toBe(2);
    expect(res.json().results[1].calls).toBe(0);
  });
});

describe('readiness', () => {
  it('is ready with a reachable backend and 503 when the backend is gone', async () => {
    const h = await harness();
    const ok = await h.app.inject({ method: 'GET', url: '/readyz' });
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toMatchObject({ ready: true, saturated: false, backends: [{ reachable: true }] });
    await h.fake.close();
    const gone = await h.app.inject({ method: 'GET', url: '/readyz' });
    expect(gone.statusCode).toBe(503);
    expect(gone.json().backends[0].reachable).toBe(false);
    expect((await h.app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
  });
});

describe('shutdown', () => {
  it('stops accepting, then fails the judgments still running when the grace period ends', async () => {
    const h = await harness({
      env: { MAX_CONCURRENT_JUDGMENTS: '1', SHUTDOWN_GRACE_MS: '200' },
      fake: { fallback: { kind: 'hang' } },
    });
    const { app, fake } = h;
    await app.listen({ port: 0, host: '127.0.0.1' });
    const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/v1/reward`;
    const send = (candidates: string[]) =>
      fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(group(candidates)),
      });
    const pending = send([candidate(0), candidate(1)]);
    await waitFor(() => fake.inflight() === 2, 'the first judgment to run');
    const started = Date.now();
    const closing = app.close();
    await expect(send([candidate(2)])).rejects.toThrow();

    const res = await pending;
    expect(Date.now() - started).toBeGreaterThanOrEqual(190);
    expect(res.status).toBe(200);
    expect(res.headers.get('connection')).toBe('close');
    const body = (await res.json()) as {
      rewards: unknown[];
      results: Array<{ status: string; reason?: string; error_code?: string }>;
    };
    expect(body.results.map((r) => r.status)).toEqual(['judge_error', 'judge_error']);
    expect(body.results[0]!.reason).toBe('aborted');
    // The running judgment and the queued one were both cut by the shutdown, not by their client.
    expect(body.results[0]!.error_code).toBe('RW_SHUTTING_DOWN');
    expect(body.results[1]!.error_code).toBe('RW_SHUTTING_DOWN');
    expect(body.rewards).toEqual([null, null]);
    await closing;
  });
});
