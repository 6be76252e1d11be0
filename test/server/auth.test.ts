import { describe, expect, it } from 'vitest';

import { candidate, GROUND_TRUTH, useHarness } from './helpers.js';

const harness = useHarness();

const KEY = 's3cret-token';
const body = { ground_truth: GROUND_TRUTH, candidates: [candidate(0)] };

const routes: Array<{ method: 'GET' | 'POST'; url: string; payload?: unknown }> = [
  { method: 'POST', url: '/v1/reward', payload: body },
  { method: 'POST', url: '/v1/reward/batch', payload: { groups: [body] } },
  { method: 'POST', url: '/v1/judge', payload: { ground_truth: GROUND_TRUTH, candidate: candidate(0) } },
  { method: 'GET', url: '/v1/graphs' },
  { method: 'GET', url: '/v1/graphs/default' },
  { method: 'GET', url: '/readyz' },
  { method: 'GET', url: '/metrics' },
  { method: 'POST', url: '/get_reward', payload: { query: [candidate(0)], labels: [GROUND_TRUTH] } },
  { method: 'POST', url: '/slime', payload: { prompt: 'q', response: candidate(0), label: GROUND_TRUTH } },
  { method: 'GET', url: '/nowhere' },
];

describe('bearer auth (REWARD_API_KEY)', () => {
  it('answers 401 RW_UNAUTHORIZED on every route but /healthz without the token, and never reaches the judge', async () => {
    const h = await harness({ env: { REWARD_API_KEY: KEY } });
    for (const r of routes) {
      for (const authorization of [undefined, 'Bearer wrong', `Basic ${KEY}`, `Bearer ${KEY}x`, 'Bearer ']) {
        const headers: Record<string, string> = authorization === undefined ? {} : { authorization };
        const res = await h.app.inject({
          method: r.method,
          url: r.url,
          payload: r.payload as object,
          headers,
        });
        expect(res.statusCode, `${r.url} ${authorization}`).toBe(401);
        expect(res.json().code).toBe('RW_UNAUTHORIZED');
        expect(res.headers['www-authenticate']).toBe('Bearer');
      }
    }
    expect((await h.app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    expect(h.fake.callCount).toBe(0);
  });

  it('serves with the right token', async () => {
    const h = await harness({ env: { REWARD_API_KEY: KEY } });
    const res = await h.app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: body,
      headers: { authorization: `Bearer ${KEY}` },
    });
    expect(res.statusCode).toBe(200);
    const graphs = await h.app.inject({
      method: 'GET',
      url: '/v1/graphs',
      headers: { authorization: `bearer ${KEY}` },
    });
    expect(graphs.statusCode).toBe(200);
  });

  it('leaves /metrics public when METRICS_PUBLIC=true, and only /metrics', async () => {
    const h = await harness({ env: { REWARD_API_KEY: KEY, METRICS_PUBLIC: 'true' } });
    expect((await h.app.inject({ method: 'GET', url: '/metrics' })).statusCode).toBe(200);
    expect((await h.app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(401);
  });

  it('is off when REWARD_API_KEY is unset', async () => {
    const h = await harness();
    expect((await h.app.inject({ method: 'GET', url: '/v1/graphs' })).statusCode).toBe(200);
  });
});
