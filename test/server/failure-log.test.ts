import { afterEach, describe, expect, it } from 'vitest';

import { loadConfig } from '../../src/config.js';
import { createOfflineBackend } from '../../src/judge/backends/offline.js';
import { createOpenAICompatibleBackend } from '../../src/judge/backends/openai.js';
import { failedJudgment, okJudgment } from '../../src/judge/judgment.js';
import { getPreset } from '../../src/judge/presets.js';
import { createRouter } from '../../src/judge/routing.js';
import type { Router } from '../../src/judge/types.js';
import { buildApp } from '../../src/server/http/app.js';
import { createFailureMonitor } from '../../src/server/observe/failure-log.js';
import { startFakeOpenAI, universalReply, type FakeOpenAI } from '../fakes/openai.js';
import { candidate, GROUND_TRUTH, logLines, QUESTION } from './helpers.js';

const graph = getPreset('single-judge')!;
const ok = () =>
  okJudgment(
    graph,
    { verdict: 'match', score: 0.9, stopReason: 'single_round' },
    {
      rounds: 1,
      transcript: [],
      usage: { calls: 1, promptTokens: 0, completionTokens: 0, cachedPromptTokens: null },
      latencyMs: 1,
    },
  );
const timeout = () =>
  failedJudgment(graph, {
    status: 'timeout',
    code: 'RW_JUDGE_TIMEOUT',
    message: 'm',
    reason: 'deadline',
    stopReason: 'deadline',
  });
const unavailable = () =>
  failedJudgment(graph, {
    status: 'judge_error',
    code: 'RW_JUDGE_UNAVAILABLE',
    message: 'm',
    reason: 'x',
    stopReason: 'node_failed',
  });

function monitor(rate = 0.1) {
  let t = 0;
  const warnings: Array<Record<string, unknown>> = [];
  const m = createFailureMonitor({
    rate,
    intervalMs: 60_000,
    minJudgments: 20,
    now: () => t,
    warn: (fields) => warnings.push(fields),
  });
  return { m, warnings, advance: (ms: number) => (t += ms) };
}

describe('createFailureMonitor', () => {
  it('warns once the failure rate passes the threshold, with counts by reason', () => {
    const { m, warnings } = monitor(0.1);
    for (let i = 0; i < 16; i++) m.record(ok());
    m.record(timeout());
    m.record(timeout());
    m.record(unavailable());
    expect(warnings).toHaveLength(0); // 19 judgments: below the minimum
    m.record(ok());
    expect(warnings).toEqual([
      {
        failed: 3,
        judgments: 20,
        failure_rate: 0.15,
        window_s: 0,
        by_reason: { timeout: 2, RW_JUDGE_UNAVAILABLE: 1 },
      },
    ]);
  });

  it('is rate-limited to one warning per interval, and warns again after it', () => {
    const { m, warnings, advance } = monitor(0.1);
    for (let i = 0; i < 100; i++) m.record(unavailable());
    expect(warnings).toHaveLength(1);
    advance(30_000);
    for (let i = 0; i < 100; i++) m.record(unavailable());
    expect(warnings).toHaveLength(1);
    advance(30_000);
    m.record(unavailable());
    expect(warnings).toHaveLength(2);
    expect(warnings[1]).toMatchObject({ failed: 181, judgments: 181 });
  });

  it('stays quiet below the threshold', () => {
    const { m, warnings } = monitor(0.1);
    for (let i = 0; i < 1_000; i++) m.record(i % 20 === 0 ? timeout() : ok());
    expect(warnings).toHaveLength(0);
  });
});

let fake: FakeOpenAI | undefined;
let router: Router | undefined;
afterEach(async () => {
  for (const b of router?.backends() ?? []) await b.close?.();
  await fake?.close();
  fake = undefined;
  router = undefined;
});

describe('the failure warning at LOG_LEVEL info', () => {
  it('a failing backend produces one warning naming the reason; healthy judging none', async () => {
    fake = await startFakeOpenAI({
      script: Array.from({ length: 24 }, () => ({ kind: 'json' as const, body: universalReply('match') })),
      fallback: { kind: 'status', status: 503 },
    });
    const config = loadConfig({
      JUDGE_BASE_URL: fake.baseURL,
      JUDGE_MODEL: 'fake-model',
      JUDGE_MAX_RETRIES: '0',
      DEFAULT_GRAPH: 'single-judge',
    });
    router = createRouter({
      ...config.judge,
      offline: createOfflineBackend,
      // The dead backend's calls wait once for the open circuit: 50 ms here, not the production 5 s.
      createBackend: (settings, name) =>
        createOpenAICompatibleBackend(settings, { name, breaker: { openMs: 50 } }),
    });
    const { stream, lines } = logLines();
    const app = buildApp({ config, router, logger: { level: 'info', stream } });
    const post = (from: number) =>
      app.inject({
        method: 'POST',
        url: '/v1/reward',
        payload: {
          question: QUESTION,
          ground_truth: GROUND_TRUTH,
          candidates: Array.from({ length: 24 }, (_, i) => candidate(from + i)),
        },
      });
    expect((await post(0)).json<{ rewards: unknown[] }>().rewards.every((r) => r !== null)).toBe(true);
    const warnings = () => lines.filter((l) => l['msg'] === 'judge failures above threshold');
    expect(warnings()).toHaveLength(0);
    expect((await post(100)).json<{ rewards: unknown[] }>().rewards.every((r) => r === null)).toBe(true);
    await post(200);
    expect(warnings()).toHaveLength(1);
    expect(warnings()[0]).toMatchObject({
      level: 40,
      by_reason: { RW_JUDGE_UNAVAILABLE: expect.any(Number) },
    });
    await app.close();
  });
});
