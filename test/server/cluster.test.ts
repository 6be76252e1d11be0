/**
 * WORKERS=2 against the built server (`node dist/server/main.js`, a real process killed by PID): one port
 * served by two worker processes, one merged /metrics that counts every judgment once, SIGTERM that loses
 * no request, and a killed worker that is replaced while its requests fail as connection errors.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, beforeAll, describe, expect, it } from 'vitest';

import { startFakeOpenAI, type FakeOpenAI } from '../fakes/openai.js';
import { describeRedis, startRedis } from '../fakes/redis.js';
import { requestOnce, startBuiltServer, type BuiltServer } from '../support/built-server.js';
import { DIST_ENTRY, ensureDist } from '../support/dist.js';
import { candidate, GROUND_TRUTH, markerJudge, QUESTION, waitFor } from './helpers.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- response bodies are checked field by field
type Json = any;

let server: BuiltServer | undefined;
let fake: FakeOpenAI | undefined;
let dir: string | undefined;

beforeAll(() => {
  ensureDist();
}, 240_000);

afterEach(async () => {
  if (server !== undefined && server.child.exitCode === null) {
    server.child.kill('SIGKILL');
    await server.exit;
  }
  server = undefined;
  await fake?.close();
  fake = undefined;
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

const group = (candidates: string[]) => ({ question: QUESTION, ground_truth: GROUND_TRUTH, candidates });

/** Sum of a metric's samples whose line contains `filter`. */
function metricSum(text: string, name: string, filter = ''): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (!line.includes(filter)) continue;
    sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

async function workerPids(url: string, n = 12): Promise<Set<number>> {
  const pids = new Set<number>();
  for (let i = 0; i < n; i++) {
    const res = await requestOnce(`${url}/readyz`, 'GET');
    pids.add((res.json() as Json).process.pid);
  }
  return pids;
}

async function start(env: Record<string, string> = {}): Promise<BuiltServer> {
  fake = await startFakeOpenAI({ fallback: markerJudge, latencyMs: 20 });
  server = await startBuiltServer(
    { WORKERS: '2', JUDGE_BASE_URL: fake.baseURL, JUDGE_MODEL: 'fake-model', JUDGE_MAX_RETRIES: '0', ...env },
    2,
  );
  return server;
}

describe('WORKERS=2 (node dist/server/main.js)', () => {
  it('answers on one port from two worker processes, neither of them the primary', async () => {
    const s = await start();
    const pids = await workerPids(s.url);
    expect(pids.size).toBe(2);
    expect(pids.has(s.child.pid!)).toBe(false);
    const metrics = (await requestOnce(`${s.url}/metrics`, 'GET')).text;
    expect(metricSum(metrics, 'reward_workers')).toBe(2);
  });

  it('merges /metrics: every judgment and request counted once, whichever worker answers the scrape', async () => {
    const s = await start();
    for (let i = 0; i < 20; i++) {
      const res = await requestOnce(`${s.url}/v1/reward`, 'POST', group([candidate(100 + i)]));
      expect(res.status).toBe(200);
      expect((res.json() as Json).results[0].status).toBe('ok');
    }
    expect(fake!.callCount).toBe(60);
    // Two scrapes land on different workers; both answer the merged totals.
    const scrapes = [(await requestOnce(`${s.url}/metrics`, 'GET')).text];
    scrapes.push((await requestOnce(`${s.url}/metrics`, 'GET')).text);
    for (const text of scrapes) {
      expect(metricSum(text, 'reward_judgments_total')).toBe(20);
      expect(metricSum(text, 'reward_requests_total', 'route="/v1/reward"')).toBe(20);
      expect(metricSum(text, 'reward_cache_lookups_total', 'result="miss"')).toBe(20);
      expect(metricSum(text, 'reward_llm_calls_total')).toBe(60);
      expect(metricSum(text, 'reward_judgment_duration_seconds_count')).toBe(20);
      // One HELP/TYPE per metric: merged, not concatenated.
      expect(text.match(/^# TYPE reward_judgments_total /gm)).toHaveLength(1);
    }
  });

  it('SIGTERM: every request in flight on either worker finishes, transcripts complete, exit 0', async () => {
    dir = mkdtempSync(join(tmpdir(), 'cluster-'));
    const transcripts = join(dir, 'judgments.jsonl');
    fake = await startFakeOpenAI({ fallback: markerJudge, latencyMs: 400 });
    server = await startBuiltServer(
      {
        WORKERS: '2',
        JUDGE_BASE_URL: fake.baseURL,
        JUDGE_MODEL: 'fake-model',
        TRANSCRIPTS_PATH: transcripts,
        SHUTDOWN_GRACE_MS: '10000',
      },
      2,
    );
    const s = server;
    const inFlight = Array.from({ length: 8 }, (_, i) =>
      requestOnce(`${s.url}/v1/reward`, 'POST', group([candidate(10 * i), candidate(10 * i + 1)])),
    );
    const f = fake;
    // 8 requests × 2 candidates × 2 analysts in parallel = 32 calls in flight at once.
    await waitFor(() => f.inflight() === 32, 'every analyst call to reach the backend');
    s.child.kill('SIGTERM');
    const answers = await Promise.all(inFlight);
    for (const res of answers) {
      expect(res.status).toBe(200);
      expect((res.json() as Json).rewards).toEqual([1, 0]); // candidate(even) is the marker's match
    }
    expect(await s.exit).toBe(0);
    const lines = readFileSync(transcripts, 'utf8')
      .split('\n')
      .filter((l) => l !== '');
    expect(lines).toHaveLength(16);
    const ids = new Set(lines.map((l) => JSON.parse(l).judgment_id));
    expect(ids.size).toBe(16);
    expect(fake.callCount).toBe(48);
    const stopped = s.logs.filter((l) => l['msg'] === 'worker stopped');
    expect(stopped.map((l) => l['code'])).toEqual([0, 0]);
  });

  it('stops with exit 1 instead of restarting forever when no worker can start (port taken)', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as { port: number }).port;
    try {
      const child = spawn(process.execPath, [DIST_ENTRY], {
        env: { PATH: process.env['PATH'] ?? '', PORT: String(port), HOST: '127.0.0.1', WORKERS: '2' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
      const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
      expect(code).toBe(1);
      expect(out).toContain('start-up failed');
      expect(out).not.toContain('starting a replacement');
    } finally {
      taken.close();
    }
  });

  it('a killed worker is replaced; its requests fail as connection errors (never a reward), a retry succeeds', async () => {
    const s = await start();
    fake!.setScript([], (body) => ({ kind: 'slow', ms: 1500, then: markerJudge(body) }));
    const [victim] = [...(await workerPids(s.url))];
    const requests = Array.from({ length: 6 }, (_, i) =>
      requestOnce(`${s.url}/v1/reward`, 'POST', group([candidate(200 + i)])).then(
        (res) => ({ ok: true as const, res }),
        (err: unknown) => ({ ok: false as const, err }),
      ),
    );
    const f = fake!;
    await waitFor(() => f.inflight() === 12, 'every request to reach the backend');
    process.kill(victim!, 'SIGKILL');
    const outcomes = await Promise.all(requests);
    const failed = outcomes.filter((o) => !o.ok);
    const answered = outcomes.filter((o) => o.ok);
    // Connections are handed out in turn: the victim held some, the survivor the rest.
    expect(failed.length).toBeGreaterThan(0);
    expect(answered.length).toBeGreaterThan(0);
    for (const o of failed) expect(String(o.err)).toMatch(/socket hang up|ECONNRESET/);
    for (const o of answered) {
      expect(o.res.status).toBe(200);
      expect((o.res.json() as Json).results[0].status).toBe('ok');
    }
    await waitFor(
      () => s.logs.filter((l) => l['msg'] === 'reward server listening').length === 3,
      'the replacement worker to listen',
      10_000,
    );
    const died = s.logs.find((l) => String(l['msg']).startsWith('worker died'));
    expect(died).toMatchObject({ worker_pid: victim, signal: 'SIGKILL', level: 50 });
    fake!.setScript([], markerJudge);
    const retry = await requestOnce(`${s.url}/v1/reward`, 'POST', group([candidate(200)]));
    expect(retry.status).toBe(200);
    const pids = await workerPids(s.url);
    expect(pids.size).toBe(2);
    expect(pids.has(victim!)).toBe(false);
    const metrics = (await requestOnce(`${s.url}/metrics`, 'GET')).text;
    expect(metricSum(metrics, 'reward_worker_restarts_total', 'reason="signal"')).toBe(1);
    expect(metricSum(metrics, 'reward_workers')).toBe(2);
  });
});

describeRedis('WORKERS=2 with REDIS_URL (node dist/server/main.js)', () => {
  it('16 identical requests on 16 connections, spread over both workers, cost one judgment', async () => {
    const redis = await startRedis();
    try {
      const s = await start({ REDIS_URL: redis.url });
      fake!.setScript([], (body) => ({ kind: 'slow', ms: 300, then: markerJudge(body) }));
      expect((await requestOnce(`${s.url}/readyz`, 'GET')).json()).toMatchObject({
        shared_state: { kind: 'redis', degraded: false },
      });
      const answers = await Promise.all(
        Array.from({ length: 16 }, () => requestOnce(`${s.url}/v1/reward`, 'POST', group([candidate(0)]))),
      );
      const results = answers.map((r) => (r.json() as Json).results[0]);
      expect(results.every((r: Json) => r.status === 'ok' && r.reward === 1)).toBe(true);
      expect(new Set(results.map((r: Json) => r.judgment_id)).size).toBe(1);
      expect(fake!.callCount).toBe(3);
      const metrics = (await requestOnce(`${s.url}/metrics`, 'GET')).text;
      expect(metricSum(metrics, 'reward_judgments_total')).toBe(1);
      expect(metricSum(metrics, 'reward_shared_state_degraded')).toBe(0);
    } finally {
      if (server !== undefined && server.child.exitCode === null) {
        server.child.kill('SIGTERM');
        await server.exit;
      }
      await redis.stop();
    }
  });
});
