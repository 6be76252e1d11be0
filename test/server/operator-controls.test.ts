/**
 * Issue 21 items 4–6 against the built server (`node dist/server/main.js`) and the fake backend: the priority
 * lane on a trainer adapter (header), the token budget's 429 / Retry-After / readyz / gauge / log line, and
 * a calibrated capacity plan.
 */
import { afterEach, beforeAll, describe, expect, it } from 'vitest';

import { startFakeOpenAI, type FakeOpenAI } from '../fakes/openai.js';
import { startBuiltServer, type BuiltServer } from '../support/built-server.js';
import { ensureDist } from '../support/dist.js';
import { candidate, GROUND_TRUTH, markerJudge, QUESTION } from './helpers.js';

let fake: FakeOpenAI | undefined;
let server: BuiltServer | undefined;

beforeAll(() => {
  ensureDist();
}, 180_000);

afterEach(async () => {
  if (server !== undefined && server.child.exitCode === null) {
    server.child.kill('SIGKILL');
    await server.exit;
  }
  server = undefined;
  await fake?.close();
  fake = undefined;
});

async function start(env: Record<string, string>, latencyMs = 0): Promise<string> {
  fake = await startFakeOpenAI({ latencyMs, fallback: markerJudge });
  server = await startBuiltServer({
    JUDGE_BASE_URL: fake.baseURL,
    JUDGE_MODEL: 'fake-model',
    JUDGE_API_KEY: 'test',
    JUDGE_MAX_RETRIES: '0',
    ...env,
  });
  return server.url;
}

async function post(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; json: Record<string, unknown> }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  return { status: res.status, headers: res.headers, json: (await res.json()) as Record<string, unknown> };
}

const judge = (i: number) => ({ question: QUESTION, ground_truth: GROUND_TRUTH, candidate: candidate(i) });

describe('operator controls on the built server', () => {
  it('refuses new work with 429 RW_BUDGET_EXHAUSTED and shows it in /readyz, /metrics and the log', async () => {
    const url = await start({ JUDGE_TOKEN_BUDGET: '1', JUDGE_BUDGET_WINDOW_S: '3600' });
    expect((await post(`${url}/v1/judge`, judge(0))).status).toBe(200);
    const refused = await post(`${url}/v1/judge`, judge(1));
    expect(refused.status).toBe(429);
    expect(refused.json['code']).toBe('RW_BUDGET_EXHAUSTED');
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(3600);
    const ready = (await (await fetch(`${url}/readyz`)).json()) as { budget: Record<string, unknown> };
    expect(ready.budget).toMatchObject({
      budget_tokens: 1,
      remaining_tokens: 0,
      exhausted: true,
      window_s: 3600,
    });
    expect(await (await fetch(`${url}/metrics`)).text()).toContain(
      'reward_budget_remaining_tokens{window_s="3600"} 0',
    );
    expect(server?.logs.some((l) => String(l['msg']).startsWith('token budget exhausted'))).toBe(true);
  }, 30_000);

  it('serves a high-priority /slime behind a queued step within 3x its unloaded latency, then plans', async () => {
    const url = await start({ JUDGE_MAX_INFLIGHT: '8', JUDGE_PREFIX_STAGGER_MS: '0' }, 40);
    const other = 'A different paper: we fine-tune a transformer with a masked-token objective on text.';
    const slime = (i: number) =>
      post(
        `${url}/slime`,
        { prompt: QUESTION, response: candidate(10_000 + i), label: other },
        { 'x-reward-priority': 'high' },
      );
    await slime(0);
    const unloaded: number[] = [];
    for (let i = 1; i <= 3; i++) {
      const t0 = performance.now();
      expect((await slime(i)).status).toBe(200);
      unloaded.push(performance.now() - t0);
    }
    unloaded.sort((a, b) => a - b);
    const step = post(`${url}/v1/reward`, {
      question: QUESTION,
      ground_truth: GROUND_TRUTH,
      candidates: Array.from({ length: 120 }, (_, i) => candidate(i)),
    });
    await fake!.waitForCalls(fake!.callCount + 32);
    const t0 = performance.now();
    const high = await slime(100);
    const highMs = performance.now() - t0;
    expect(high.status).toBe(200);
    expect(high.json['status']).toBe('ok');
    // 120 × 3 calls at 8 slots × 40 ms ≈ 1.8 s of work; the high judgment needs ≈ 2 calls' time.
    expect(highMs).toBeLessThan(3 * unloaded[1]! + 50);
    expect((await step).status).toBe(200);

    const plan = await post(`${url}/v1/plan`, { rollouts: 6144, group_size: 8, timeout_s: 180 });
    expect(plan.status).toBe(200);
    expect(plan.json).toMatchObject({ calls: 6144 * 3, calibrated: true, requests: 768 });
    expect(plan.json['prompt_tokens']).toBeGreaterThan(0);
  }, 60_000);
});
