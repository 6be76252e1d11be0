/** Shared fixtures for the server suites: an app wired to the fake OpenAI backend over real HTTP. */
import { Writable } from 'node:stream';

import type { FastifyInstance, FastifyServerOptions } from 'fastify';
import { afterEach } from 'vitest';

import { loadConfig, type Config } from '../../src/config.js';
import { createOfflineBackend } from '../../src/judge/backends/offline.js';
import { createOpenAICompatibleBackend } from '../../src/judge/backends/openai.js';
import type { BreakerOptions } from '../../src/judge/replicas.js';
import { createRouter } from '../../src/judge/routing.js';
import type { Router } from '../../src/judge/types.js';
import { buildApp } from '../../src/server/http/app.js';
import { createMetrics } from '../../src/server/observe/metrics.js';
import type { Metrics } from '../../src/server/observe/metric-types.js';
import type { TranscriptSink } from '../../src/server/observe/transcripts.js';
import type { Keyring } from '../../src/server/tenants/keyring.js';
import {
  startFakeOpenAI,
  universalReply,
  type FakeChatRequest,
  type FakeOpenAI,
  type FakeOpenAIOptions,
  type FakeReply,
} from '../fakes/openai.js';

/** Candidates containing this word get `match` from every role of the fake judge; others `no_match`. */
export const GOOD = 'GOODIDEA';

export const GROUND_TRUTH =
  'We align image and text encoders with a symmetric contrastive InfoNCE objective over large batches of ' +
  'paired web data, so that zero-shot classification works by comparing embeddings.';
export const QUESTION = 'How can vision and language representations be aligned without labels?';

/** A non-degenerate candidate (> 20 chars); `good` ones are judged `match` by `markerJudge`. */
export function candidate(i: number, good = i % 2 === 0): string {
  return `Idea ${i}: ${good ? GOOD : 'plainidea'} train paired encoders with a contrastive objective and batch negatives.`;
}

/** Fake reply policy: stance from the GOOD marker in the prompt (the candidate is embedded in it). */
export function markerJudge(body: FakeChatRequest): FakeReply {
  const user = body.messages?.find((m) => m.role === 'user')?.content ?? '';
  return { kind: 'json', body: universalReply(user.includes(GOOD) ? 'match' : 'no_match', 0.9) };
}

export interface Harness {
  app: FastifyInstance;
  fake: FakeOpenAI;
  metrics: Metrics;
  config: Config;
  router: Router;
  close(): Promise<void>;
}

export interface HarnessOptions {
  env?: Record<string, string>;
  fake?: FakeOpenAIOptions;
  transcripts?: TranscriptSink;
  /** The app's epoch-ms clock (request deadlines), e.g. to make a request arrive "later". */
  now?: () => number;
  /** The app's Fastify logger option (default off), e.g. `{ level: 'info', stream: logLines().stream }`. */
  logger?: FastifyServerOptions['logger'];
  /**
   * The backends' circuit-breaker options, e.g. `{ openMs: 50 }` so that a dead backend's calls wait 50 ms
   * for the open circuit instead of the production 5 s (default: the production breaker).
   */
  breaker?: BreakerOptions;
  /** The keys (REWARD_KEYS) the app serves, so a test can reload them (default: from `env`). */
  keyring?: Keyring;
}

/** A log destination that parses each JSON line the app writes into `lines`. */
export function logLines(): { stream: Writable; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n'))
        if (line !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { stream, lines };
}

/** An app on a fake backend (real HTTP on 127.0.0.1); `close` closes the app, its backends and the fake. */
export async function startHarness(options: HarnessOptions = {}): Promise<Harness> {
  const fake = await startFakeOpenAI({ fallback: markerJudge, ...options.fake });
  const config = loadConfig({
    JUDGE_BASE_URL: fake.baseURL,
    JUDGE_MODEL: 'fake-model',
    JUDGE_API_KEY: 'test',
    JUDGE_MAX_RETRIES: '0',
    JUDGE_TIMEOUT_MS: '10000',
    ...options.env,
  });
  const { breaker } = options;
  const router = createRouter({
    ...config.judge,
    offline: createOfflineBackend,
    ...(breaker === undefined
      ? {}
      : { createBackend: (settings, name) => createOpenAICompatibleBackend(settings, { name, breaker }) }),
  });
  const metrics = createMetrics({ recentWindow: config.recentWindow });
  const app = buildApp({
    config,
    router,
    metrics,
    transcripts: options.transcripts,
    now: options.now,
    logger: options.logger,
    keyring: options.keyring,
  });
  return {
    app,
    fake,
    metrics,
    config,
    router,
    async close() {
      await app.close();
      await Promise.all(router.backends().map(async (b) => b.close?.()));
      await fake.close();
    },
  };
}

/**
 * Call at the top level of a suite: returns `startHarness` for its tests, and closes every harness it
 * started after each test.
 */
export function useHarness(): (options?: HarnessOptions) => Promise<Harness> {
  const open: Harness[] = [];
  afterEach(async () => {
    for (const h of open.splice(0)) await h.close();
  });
  return async (options) => {
    const h = await startHarness(options);
    open.push(h);
    return h;
  };
}

/** An app on the offline backend (no network at all). */
export function offlineApp(env: Record<string, string> = {}): { app: FastifyInstance; metrics: Metrics } {
  const config = loadConfig(env);
  const router = createRouter({ ...config.judge, offline: createOfflineBackend });
  const metrics = createMetrics({ recentWindow: config.recentWindow });
  return { app: buildApp({ config, router, metrics }), metrics };
}

/** Polls `check` on the event loop (bounded) until it holds; for states driven by real I/O. */
export async function waitFor(
  check: () => boolean | Promise<boolean>,
  what: string,
  maxMs = 5000,
): Promise<void> {
  const until = Date.now() + maxMs;
  for (let i = 0; i < 100_000; i++) {
    if (await check()) return;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error(`gave up waiting for ${what}`);
}

/**
 * Waits until `n` items have joined a judgment already in flight: `reward_cache_lookups_total{result=
 * "coalesced"}` counts them in the same turn as they join (judge-service's countLookups, then startFlights).
 */
export function waitForJoins(metrics: Metrics, n = 1): Promise<void> {
  const joined = () => counterValue(metrics.cacheLookups, { result: 'coalesced' });
  return waitFor(async () => (await joined()) >= n, `${n} item(s) to join a flight`);
}

/** Sum of a counter's values whose labels match `labels`. */
export async function counterValue(
  metric: { get(): Promise<{ values: Array<{ value: number; labels: Record<string, string | number> }> }> },
  labels: Record<string, string> = {},
): Promise<number> {
  const { values } = await metric.get();
  let sum = 0;
  for (const v of values) {
    if (Object.entries(labels).every(([k, want]) => String(v.labels[k]) === want)) sum += v.value;
  }
  return sum;
}
