/**
 * Serving against a judge fleet: a queueing server (slots, no 429) and replica metrics, through the real
 * app (fastify inject) on real fake backends over 127.0.0.1.
 */
import { afterEach, describe, expect, it } from 'vitest';

import { loadConfig } from '../../src/config.js';
import { createOfflineBackend } from '../../src/judge/backends/offline.js';
import { createRouter } from '../../src/judge/routing.js';
import { buildApp } from '../../src/server/http/app.js';
import { createMetrics } from '../../src/server/observe/metrics.js';
import { startFakeOpenAI, type FakeOpenAI } from '../fakes/openai.js';
import { candidate, GROUND_TRUTH, markerJudge, QUESTION } from './helpers.js';

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

function serve(fakes: FakeOpenAI[], env: Record<string, string>) {
  const config = loadConfig({
    JUDGE_BASE_URL: fakes.map((f) => f.baseURL).join(','),
    JUDGE_MODEL: 'fake-model',
    ...env,
  });
  const router = createRouter({ ...config.judge, offline: createOfflineBackend });
  const metrics = createMetrics();
  const app = buildApp({ config, router, metrics });
  closers.push(async () => {
    await app.close();
    await Promise.all(router.backends().map(async (b) => b.close?.()));
  });
  return { app, router };
}

async function fake(options: Parameters<typeof startFakeOpenAI>[0]) {
  const f = await startFakeOpenAI({ fallback: markerJudge, ...options });
  closers.push(() => f.close());
  return f;
}

/** One GRPO group of 32 candidates, one call each (`single-judge`), against a 4-slot queueing server. */
async function group32(adaptive: boolean) {
  // 800 ms of service per call on 4 slots: 32 calls at once leave the last 4 queued for 5.6 s, so with a
  // 6 s per-attempt timer the last 8 time out while they wait; the adaptive limit keeps the queue short.
  const slotted = await fake({ slots: 4, latencyMs: 800 });
  const { app } = serve([slotted], {
    JUDGE_TIMEOUT_MS: '6000',
    JUDGE_MAX_RETRIES: '0',
    JUDGE_ADAPTIVE_INFLIGHT: String(adaptive),
  });
  const candidates = Array.from({ length: 32 }, (_, i) => candidate(i));
  const res = await app.inject({
    method: 'POST',
    url: '/v1/reward',
    payload: { question: QUESTION, ground_truth: GROUND_TRUTH, candidates, graph: 'single-judge' },
  });
  const queuedMs = slotted.calls.map((c) => (c.startedAt ?? Infinity) - c.arrivedAt);
  return { res, slotted, queuedMs };
}

describe('a judge server that queues instead of answering 429', () => {
  it('the adaptive limit completes a 32-candidate group with JUDGE_TIMEOUT_MS=6000, no attempt timing out in the queue', async () => {
    const [adaptive, fixed] = await Promise.all([group32(true), group32(false)]);

    expect(adaptive.res.statusCode).toBe(200);
    const body = adaptive.res.json();
    expect(body.results.map((r: { status: string }) => r.status)).toEqual(Array(32).fill('ok'));
    expect(body.rewards).toEqual(Array.from({ length: 32 }, (_, i) => (i % 2 === 0 ? 1 : 0)));
    // Every call was answered (none abandoned by our timer) and none waited near the timeout.
    expect(adaptive.slotted.calls).toHaveLength(32);
    expect(adaptive.slotted.calls.every((c) => c.outcome === 'replied')).toBe(true);
    expect(Math.max(...adaptive.queuedMs)).toBeLessThan(6000 - 800);

    // The same group with the fixed limit (256): the queue eats the timer. A null, never a 0.
    const fixedBody = fixed.res.json();
    const timedOut = fixed.slotted.calls.filter((c) => c.outcome === 'client_closed').length;
    expect(timedOut).toBeGreaterThan(0);
    expect(fixedBody.rewards.filter((r: number | null) => r === null).length).toBe(timedOut);
  }, 40_000);
});

describe('replica metrics', () => {
  it('exports per-replica health, in-flight, limit, attempts and circuit state on /metrics', async () => {
    const healthy = await fake({});
    const sick = await fake({ fallback: { kind: 'status', status: 500 } });
    const { app } = serve([healthy, sick], {
      JUDGE_MAX_RETRIES: '3',
      JUDGE_REPLICA_POLICY: 'round_robin',
    });
    const candidates = Array.from({ length: 16 }, (_, i) => candidate(i));
    const res = await app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: { question: QUESTION, ground_truth: GROUND_TRUTH, candidates, graph: 'single-judge' },
    });
    expect(res.json().results.map((r: { status: string }) => r.status)).toEqual(Array(16).fill('ok'));
    const text = (await app.inject({ method: 'GET', url: '/metrics' })).body;
    const host = (f: FakeOpenAI) => new URL(f.baseURL).host;
    const line = (name: string, labels: string) =>
      text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
    const value = (name: string, labels: string) => Number(line(name, labels)?.split(' ').at(-1));
    const b = 'backend="default"';
    expect(value('reward_backend_replica_up', `${b},replica="${host(healthy)}"`)).toBe(1);
    expect(value('reward_backend_replica_up', `${b},replica="${host(sick)}"`)).toBe(0);
    expect(value('reward_backend_replica_circuit_state', `${b},replica="${host(sick)}"`)).toBe(2);
    expect(value('reward_backend_replica_circuit_opens_total', `${b},replica="${host(sick)}"`)).toBe(1);
    expect(
      value('reward_backend_replica_attempts_total', `${b},replica="${host(sick)}",outcome="http_5xx"`),
    ).toBe(sick.callCount);
    expect(
      value('reward_backend_replica_attempts_total', `${b},replica="${host(healthy)}",outcome="ok"`),
    ).toBe(16);
    expect(value('reward_backend_replica_inflight', `${b},replica="${host(healthy)}"`)).toBe(0);
    expect(value('reward_backend_replica_inflight_limit', `${b},replica="${host(healthy)}"`)).toBeGreaterThan(
      0,
    );
    expect(text).toContain('# TYPE reward_backend_replica_attempts_total counter');
  });
});
