/**
 * Issue 30 items 2 and 4: a tenant's tags, request ids and idempotency records are its own; the judgment
 * cache is shared unless CACHE_SCOPE=tenant; each tenant's token budget and rpm are its own, and its spend
 * and requests are counted under its name (and only configured names).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { hashKey } from '../../src/config.js';
import { candidate, counterValue, GROUND_TRUTH, QUESTION, useHarness, waitFor } from './helpers.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- response bodies are checked field by field
type Json = any;

const harness = useHarness();

function keysFile(entries: Array<Record<string, unknown>>): string {
  const path = join(mkdtempSync(join(tmpdir(), 'reward-keys-')), 'keys.json');
  writeFileSync(path, JSON.stringify({ keys: entries }));
  return path;
}
const entry = (name: string, scopes: readonly string[], extra: Record<string, unknown> = {}) => ({
  name,
  sha256: hashKey(`key-${name}`),
  scopes,
  ...extra,
});
const bearer = (name: string) => ({ authorization: `Bearer key-${name}` });

const RUNS = [
  entry('run-a', ['reward', 'cancel']),
  entry('run-b', ['reward', 'cancel']),
  entry('ops', ['admin', 'cancel']),
];

describe('isolation between tenants', () => {
  it("cancels only the cancelling tenant's requests, whatever their tags and ids; an admin may name the tenant", async () => {
    const h = await harness({ env: { REWARD_KEYS: keysFile(RUNS) }, fake: { fallback: { kind: 'hang' } } });
    const reward = (tenant: string, i: number, extra: Record<string, unknown>) =>
      h.app.inject({
        method: 'POST',
        url: '/v1/reward',
        headers: bearer(tenant),
        payload: { question: QUESTION, ground_truth: GROUND_TRUTH, candidates: [candidate(i)], ...extra },
      });
    const cancel = async (tenant: string, payload: Record<string, unknown>) => {
      const res = await h.app.inject({ method: 'POST', url: '/v1/cancel', headers: bearer(tenant), payload });
      return { status: res.statusCode, body: res.json<Json>() };
    };
    const a = reward('run-a', 0, { tag: 'step-7', request_id: 'req-1' });
    const b = reward('run-b', 1, { tag: 'step-7', request_id: 'req-1' });
    await h.fake.waitForCalls(4);

    // run-b's cancel of the same tag and id reaches run-a's request not at all.
    expect((await cancel('run-b', { tag: 'step-7' })).body).toEqual({
      cancelled_judgments: 1,
      cancelled_requests: 1,
    });
    expect((await b).json<Json>().results[0].status).toBe('cancelled');
    expect(await cancel('run-b', { request_ids: ['req-1'] })).toMatchObject({
      body: { cancelled_requests: 0 },
    });
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(h.fake.calls.filter((c) => c.outcome === 'pending')).toHaveLength(2); // run-a's still wait

    // Naming another tenant needs `admin`.
    const refused = await cancel('run-b', { tag: 'step-7', tenant: 'run-a' });
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({ code: 'RW_FORBIDDEN', details: { scope: 'admin' } });
    expect(await cancel('ops', { request_ids: ['req-1'], tenant: 'run-a' })).toEqual({
      status: 200,
      body: { tenant: 'run-a', cancelled_judgments: 1, cancelled_requests: 1 },
    });
    expect((await a).json<Json>().results[0].status).toBe('cancelled');

    // The tombstone is per tenant too: run-a's late arrival with the tag is cancelled, run-b's... also
    // (run-b cancelled its own step-7), but run-a's cancel of step-8 leaves run-b's step-8 running.
    // run-a's req-1 was live when the admin cancelled it: that cancel is complete, and the id sent again is a
    // new request (issue 38 item 6): it starts its judgment (the hanging fake sees its calls) and is live for
    // the next cancel. An id cancelled with no live request stays tombstoned.
    const calls = h.fake.callCount;
    const lateA = reward('run-a', 2, { request_id: 'req-1' });
    await h.fake.waitForCalls(calls + 1);
    expect((await cancel('run-a', { request_ids: ['req-1'] })).body).toMatchObject({ cancelled_requests: 1 });
    expect((await lateA).json<Json>().results[0].status).toBe('cancelled');
    expect(await cancel('run-a', { request_ids: ['req-9'] })).toMatchObject({
      body: { cancelled_requests: 0 },
    });
    const wireA = (await reward('run-a', 3, { request_id: 'req-9' })).json<Json>();
    expect(wireA.results[0].status).toBe('cancelled');
    expect((await cancel('run-a', { tag: 'step-8' })).body.cancelled_requests).toBe(0);
    const before8 = h.fake.callCount;
    const bStep8 = reward('run-b', 3, { tag: 'step-8' });
    await h.fake.waitForCalls(before8 + 1);
    expect((await cancel('run-b', { tag: 'step-8' })).body.cancelled_requests).toBe(1);
    expect((await bStep8).json<Json>().results[0].status).toBe('cancelled');
  });

  it('replays an idempotent retry to the tenant that sent it only', async () => {
    // CACHE_SIZE=0: what a retry gets back comes from the idempotency record, not from the cache.
    const h = await harness({ env: { REWARD_KEYS: keysFile(RUNS), CACHE_SIZE: '0' } });
    const send = async (tenant: string) =>
      (
        await h.app.inject({
          method: 'POST',
          url: '/v1/reward',
          headers: bearer(tenant),
          payload: { ground_truth: GROUND_TRUTH, candidates: [candidate(0)], request_id: 'rollout-17' },
        })
      ).json<Json>();
    const first = await send('run-a');
    const calls = h.fake.callCount;
    const retry = await send('run-a');
    expect(retry.results[0]).toMatchObject({ cached: true, judgment_id: first.results[0].judgment_id });
    expect(h.fake.callCount).toBe(calls);
    // The same id and body from another tenant is not its retry: judged afresh.
    const other = await send('run-b');
    expect(other.results[0].cached).toBe(false);
    expect(other.results[0].judgment_id).not.toBe(first.results[0].judgment_id);
    expect(h.fake.callCount).toBe(2 * calls);
    expect(await counterValue(h.metrics.idempotencyLookups, { result: 'hit' })).toBe(1);
  });

  it('shares the judgment cache between tenants by default, and not with CACHE_SCOPE=tenant', async () => {
    for (const [scope, cachedForB] of [
      ['shared', true],
      ['tenant', false],
    ] as const) {
      const h = await harness({ env: { REWARD_KEYS: keysFile(RUNS), CACHE_SCOPE: scope } });
      const payload = { ground_truth: GROUND_TRUTH, candidates: [candidate(0), candidate(1)] };
      const send = async (tenant: string) =>
        (
          await h.app.inject({ method: 'POST', url: '/v1/reward', headers: bearer(tenant), payload })
        ).json<Json>();
      const a = await send('run-a');
      const calls = h.fake.callCount;
      const b = await send('run-b');
      expect(
        b.results.map((r: Json) => r.cached),
        scope,
      ).toEqual([cachedForB, cachedForB]);
      expect(h.fake.callCount, scope).toBe(cachedForB ? calls : 2 * calls);
      expect(b.rewards).toEqual(a.rewards);
      // Within a tenant the cache serves as always.
      expect((await send('run-b')).results[0].cached).toBe(true);
    }
  });
});

describe('budgets, rates and spend per tenant', () => {
  it("refuses a tenant's new work once its own token budget is spent, and only that tenant's", async () => {
    const h = await harness({
      env: {
        REWARD_KEYS: keysFile([
          entry('eval', ['reward'], { token_budget: 1, budget_window_s: 3600 }),
          entry('run-a', ['reward']),
        ]),
      },
    });
    const send = (tenant: string, i: number) =>
      h.app.inject({
        method: 'POST',
        url: '/v1/reward',
        headers: bearer(tenant),
        payload: { ground_truth: GROUND_TRUTH, candidates: [candidate(i)] },
      });
    expect((await send('eval', 0)).statusCode).toBe(200); // admitted before the budget was reached
    const refused = await send('eval', 1);
    expect(refused.statusCode).toBe(429);
    expect(refused.json()).toMatchObject({ code: 'RW_BUDGET_EXHAUSTED', details: { budget_tokens: 1 } });
    expect(refused.json().message).toContain('token_budget of tenant eval');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    // Cached answers spend nothing and are still served; another tenant is not affected.
    expect((await send('eval', 0)).statusCode).toBe(200);
    expect((await send('run-a', 1)).statusCode).toBe(200);
    const text = await h.metrics.registry.metrics();
    expect(text).toContain('reward_tenant_budget_limit_tokens{tenant="eval"} 1');
    expect(text).toContain('reward_tenant_budget_remaining_tokens{tenant="eval"} 0');
    const spentEval = await counterValue(h.metrics.tenants.tokens, { tenant: 'eval' });
    const spentA = await counterValue(h.metrics.tenants.tokens, { tenant: 'run-a' });
    expect(spentEval).toBeGreaterThan(0);
    expect(spentA).toBeGreaterThan(0);
    // Every token the backend reported is some tenant's.
    const all = await counterValue(h.metrics.llmTokens);
    expect(spentEval + spentA).toBe(all);
  });

  it('refuses a tenant over its rpm with 429 RW_RATE_LIMITED and Retry-After, and counts requests by tenant', async () => {
    const h = await harness({
      env: { REWARD_KEYS: keysFile([entry('eval', ['reward'], { rpm: 2 }), entry('run-a', ['reward'])]) },
    });
    const send = (tenant: string) =>
      h.app.inject({
        method: 'POST',
        url: '/v1/reward',
        headers: bearer(tenant),
        payload: { ground_truth: GROUND_TRUTH, candidates: [candidate(0)] },
      });
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await send('eval')).statusCode);
    expect(statuses).toEqual([200, 200, 429]);
    const limited = await send('eval');
    expect(limited.json()).toMatchObject({ code: 'RW_RATE_LIMITED', details: { tenant: 'eval', rpm: 2 } });
    expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect((await send('run-a')).statusCode).toBe(200);
    // Routes that do not judge are not rated.
    expect(
      (await h.app.inject({ method: 'GET', url: '/v1/graphs', headers: bearer('eval') })).statusCode,
    ).toBe(200);
    const requests = h.metrics.tenants.requests;
    expect(await counterValue(requests, { tenant: 'eval', route: '/v1/reward', code: '200' })).toBe(2);
    expect(await counterValue(requests, { tenant: 'eval', route: '/v1/reward', code: '429' })).toBe(2);
    expect(await counterValue(requests, { tenant: 'run-a', route: '/v1/reward', code: '200' })).toBe(1);
    // Refused keys are no tenant: the label takes configured names only.
    await h.app.inject({ method: 'POST', url: '/v1/reward', headers: bearer('nobody'), payload: {} });
    const { values } = await requests.get();
    expect(new Set(values.map((v) => v.labels['tenant']))).toEqual(new Set(['eval', 'run-a']));
  });

  it('plans with the caller’s share: a second tenant is not planned behind the first one’s backlog', async () => {
    const h = await harness({
      env: {
        REWARD_KEYS: keysFile([entry('run-a', ['reward', 'plan', 'cancel']), entry('run-b', ['plan'])]),
      },
      fake: { fallback: { kind: 'hang' } },
    });
    // run-a's step: 64 judgments waiting on a hanging backend (its backlog) until it is cancelled below: a
    // deadline short enough to wait out (it was 1 s) could pass, on a loaded machine, before run-b plans.
    const step = h.app.inject({
      method: 'POST',
      url: '/v1/reward',
      headers: bearer('run-a'),
      payload: {
        ground_truth: GROUND_TRUTH,
        candidates: Array.from({ length: 64 }, (_, i) => candidate(i)),
        deadline_ms: 20_000,
        request_id: 'step-a',
      },
    });
    await waitFor(() => h.fake.callCount > 0, 'the step to start');
    const plan = async (tenant: string) =>
      (
        await h.app.inject({
          method: 'POST',
          url: '/v1/plan',
          headers: bearer(tenant),
          payload: { rollouts: 16, group_size: 16 },
        })
      ).json<Json>();
    const a = await plan('run-a');
    const b = await plan('run-b');
    expect(a.tenant).toEqual({ name: 'run-a', weight: 1, share: 1 });
    expect(b.tenant).toEqual({ name: 'run-b', weight: 1, share: 0.5 });
    // run-a's 16 more wait behind its own 64; run-b's drain beside them (16 of run-a's meanwhile).
    expect(a.backlog_wait_s).toBeGreaterThan(3 * b.backlog_wait_s);
    expect(b.backlog_wait_s).toBeGreaterThan(0);
    const cancelled = await h.app.inject({
      method: 'POST',
      url: '/v1/cancel',
      headers: bearer('run-a'),
      payload: { request_ids: ['step-a'] },
    });
    expect(cancelled.json<Json>().cancelled_requests).toBe(1);
    expect((await step).json<Json>().results.every((r: Json) => r.status === 'cancelled')).toBe(true);
  });
});
