/**
 * Issue 13 item 7: bounded work per request, on a real listening server (127.0.0.1). A partial body is cut
 * off after REQUEST_TIMEOUT_MS; the offline backend yields so /healthz stays fast during a 1 MB request; a
 * client that drops mid-body is logged as a client abort, not an internal error.
 */
import { connect } from 'node:net';
import { Writable } from 'node:stream';

import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';

import { loadConfig } from '../../src/config.js';
import { createOfflineBackend } from '../../src/judge/backends/offline.js';
import { createRouter } from '../../src/judge/routing.js';
import { buildApp } from '../../src/server/http/app.js';
import { candidate, GROUND_TRUTH, QUESTION, waitFor, useHarness } from './helpers.js';

let app: FastifyInstance | undefined;
const harness = useHarness();
afterEach(async () => {
  await app?.close();
  app = undefined;
});

/** An offline-backend app listening on 127.0.0.1; `lines` collects its JSON log lines. */
async function listenOffline(
  env: Record<string, string> = {},
): Promise<{ url: string; port: number; lines: string[] }> {
  const config = loadConfig(env);
  const router = createRouter({ ...config.judge, offline: createOfflineBackend });
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(
        ...chunk
          .toString()
          .split('\n')
          .filter((l) => l !== ''),
      );
      done();
    },
  });
  app = buildApp({ config, router, logger: { level: 'info', stream } });
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  return { url, port: new URL(url).port === '' ? 80 : Number(new URL(url).port), lines };
}

interface RawResult {
  response: string;
  closedAfterMs: number;
}

/** Sends `head` and `body` on a raw socket and waits (≤ maxMs) for the server to answer and close. */
function rawRequest(port: number, head: string, body: string, maxMs: number): Promise<RawResult> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const socket = connect({ host: '127.0.0.1', port });
    let response = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`socket still open after ${maxMs} ms; got ${JSON.stringify(response.slice(0, 200))}`));
    }, maxMs);
    socket.on('data', (chunk: Buffer) => (response += chunk.toString()));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ response, closedAfterMs: Date.now() - started });
    });
    socket.write(head + body);
  });
}

const postHead = (path: string, length: number) =>
  `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;

describe('REQUEST_TIMEOUT_MS', () => {
  it('cuts off a partial body: 408 RW_REQUEST_TIMEOUT and the connection closes', async () => {
    const { port } = await listenOffline({ REQUEST_TIMEOUT_MS: '600' });
    const partial = '{"question": "q", "ground_truth": "g", "candidates": ["';
    const result = await rawRequest(port, postHead('/v1/reward', 100_000), partial, 10_000);
    expect(result.response).toMatch(/^HTTP\/1\.1 408 /);
    expect(result.response).toContain('RW_REQUEST_TIMEOUT');
    // Not before the timeout; within it plus the ≤ 1 s check interval (and generous room for a loaded machine).
    expect(result.closedAfterMs).toBeGreaterThanOrEqual(550);
    expect(result.closedAfterMs).toBeLessThan(6000);
  });

  it('does not limit judging: a complete request answers after the timeout has passed', async () => {
    const h = await harness({ env: { REQUEST_TIMEOUT_MS: '300' }, fake: { latencyMs: 1200 } });
    const url = await h.app.listen({ port: 0, host: '127.0.0.1' });
    const started = Date.now();
    const res = await fetch(`${url}/v1/judge`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        question: QUESTION,
        ground_truth: GROUND_TRUTH,
        candidate: candidate(0),
        graph: 'single-judge',
      }),
    });
    expect(res.status).toBe(200);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1100);
  });
});

/** Polls /healthz every ~20 ms until `done` settles: each answer's latency, in ms. */
async function healthDuring(url: string, done: Promise<unknown>): Promise<number[]> {
  let finished = false;
  void done.finally(() => (finished = true));
  const latencies: number[] = [];
  const until = Date.now() + 60_000;
  while (!finished && Date.now() < until) {
    const t = performance.now();
    const res = await fetch(`${url}/healthz`);
    await res.arrayBuffer();
    expect(res.status).toBe(200);
    latencies.push(performance.now() - t);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return latencies;
}

describe('offline backend under a 1 MB request', () => {
  it('/healthz answers in < 250 ms while 1 MB of candidates is judged', async () => {
    const { url } = await listenOffline();
    // ~1 MB: 250 distinct candidates of ~4 000 characters, 3 offline calls each. (With 1 000 candidates
    // the engine's synchronous start of 512 judgments is itself a ~300 ms block on a loaded machine.)
    const filler = ' with a contrastive objective over paired image and text encoders and large batches';
    const candidates = Array.from({ length: 250 }, (_, i) => `Idea ${i}:${filler.repeat(49)}`);
    const body = JSON.stringify({ question: QUESTION, ground_truth: GROUND_TRUTH, candidates });
    expect(body.length).toBeGreaterThan(1_000_000);
    const started = Date.now();
    const request = fetch(`${url}/v1/reward`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    }).then(async (res) => ({ status: res.status, json: (await res.json()) as { rewards: unknown[] } }));
    // Wait for the request to be under way before polling (its body upload is on the same loop).
    await new Promise((resolve) => setTimeout(resolve, 50));
    const latencies = await healthDuring(url, request);
    const res = await request;
    expect(res.status).toBe(200);
    expect(res.json.rewards).toHaveLength(250);
    // The request ran long enough for the polls to mean something.
    expect(Date.now() - started).toBeGreaterThan(200);
    expect(latencies.length).toBeGreaterThanOrEqual(3);
    // 250 ms for the median and the 90th percentile. The slowest answer gets 1 s: the machine that runs
    // this suite is shared (load average 12–15 on 2 cores while this was written), where one scheduling
    // gap alone can pass 250 ms. Before the offline work was sliced, 2–3 polls fit in 3.6 s (max 2.3 s).
    const sorted = latencies.slice().sort((a, b) => a - b);
    const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Infinity;
    expect(at(0.5)).toBeLessThan(250);
    expect(at(0.9)).toBeLessThan(250);
    expect(sorted[sorted.length - 1]).toBeLessThan(1000);
  }, 90_000);

  it('a 1 MB ground truth is a quick 400 naming the limit, not seconds of blocked event loop', async () => {
    const { url } = await listenOffline();
    const started = Date.now();
    const res = await fetch(`${url}/v1/reward`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        question: QUESTION,
        ground_truth: 'abstract '.repeat(116_000),
        candidates: [candidate(0)],
      }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { message: string }).message).toMatch(
      /ground_truth: too long.*MAX_GROUND_TRUTH_CHARS/,
    );
    expect(Date.now() - started).toBeLessThan(5000);
  });
});

describe('a client that drops mid-body', () => {
  it('is logged as a client abort at info, with no error and no stack', async () => {
    const { port, lines } = await listenOffline();
    await new Promise<void>((resolve) => {
      const socket = connect({ host: '127.0.0.1', port }, () => {
        socket.write(postHead('/v1/reward', 50_000) + '{"question": "q", "ground_truth": "');
        setTimeout(() => {
          socket.destroy();
          resolve();
        }, 100);
      });
      socket.on('error', () => undefined);
    });
    await waitFor(() => lines.some((l) => l.includes('client aborted')), 'the client-abort log line', 5000);
    const entries = lines.map((l) => JSON.parse(l) as { level: number; msg: string; err?: unknown });
    const abort = entries.find((e) => e.msg.includes('client aborted'));
    expect(abort?.level).toBe(30);
    expect(entries.filter((e) => e.level >= 50)).toEqual([]);
    expect(lines.join('\n')).not.toMatch(/"stack"/);
  });
});
