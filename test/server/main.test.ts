/**
 * The built server as the Docker image runs it: `dist/` (built here only if stale, see test/support/dist.ts),
 * then `node dist/server/main.js` as a real process on a free loopback port.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { afterEach, beforeAll, describe, expect, it } from 'vitest';

import { llamaSchemaFailed, startFakeOpenAI, universalReply, type FakeOpenAI } from '../fakes/openai.js';
import { DIST_ENTRY as MAIN, ensureDist } from '../support/dist.js';
import { candidate, GROUND_TRUTH, QUESTION, waitFor } from './helpers.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- response bodies are checked field by field
type Json = any;

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

interface Server {
  child: ChildProcess;
  url: string;
  /** The `reward server listening` log entry. */
  listening: Json;
  stdout: () => string;
  stderr: () => string;
  exit: Promise<number | null>;
}

const children: ChildProcess[] = [];
let fake: FakeOpenAI | undefined;
let dir: string | undefined;

afterEach(async () => {
  for (const child of children.splice(0)) if (child.exitCode === null) child.kill('SIGKILL');
  await fake?.close();
  fake = undefined;
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

beforeAll(() => {
  ensureDist();
}, 180_000);

/** Starts dist/server/main.js on a free port and resolves once it logs its URL. */
async function startServer(env: Record<string, string>): Promise<Server> {
  const child = spawn(process.execPath, [MAIN], {
    cwd: ROOT,
    env: { PATH: process.env['PATH'] ?? '', PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let buffer = '';
  const listening = await new Promise<Json>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      buffer += chunk.toString();
      for (const line of buffer.split('\n')) {
        if (!line.startsWith('{')) continue;
        try {
          const entry = JSON.parse(line);
          if (entry.msg === 'reward server listening') resolve(entry);
        } catch {
          // a partial line; wait for the rest
        }
      }
    });
    child.once('exit', (code) => reject(new Error(`server exited (${code}) before listening: ${stderr}`)));
  });
  return { child, url: listening.url, listening, stdout: () => buffer, stderr: () => stderr, exit };
}

const group = (candidates: string[]) => ({ question: QUESTION, ground_truth: GROUND_TRUTH, candidates });

async function post(url: string, body: unknown): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

describe('node dist/server/main.js', () => {
  it('names backend URL (no secrets), model, response format, auth and transcripts in its start-up line', async () => {
    fake = await startFakeOpenAI({});
    dir = mkdtempSync(join(tmpdir(), 'main-'));
    const transcripts = join(dir, 'judgments.jsonl');
    const secretUrl = fake.baseURL.replace('http://', 'http://user:hunter2@') + '?api-key=hunter3';
    const server = await startServer({
      JUDGE_BASE_URL: secretUrl,
      JUDGE_MODEL: 'fake-model',
      JUDGE_API_KEY: 'sk-hunter4',
      JUDGE_CONTEXT_TOKENS: '4096',
      REWARD_API_KEY: 'hunter5',
      TRANSCRIPTS_PATH: transcripts,
    });
    expect(server.listening).toMatchObject({
      level: 30,
      backend: 'openai-compatible',
      backends: [
        {
          name: 'default',
          urls: [`${fake.baseURL}?…`],
          model: 'fake-model',
          response_format: 'json_schema',
          context_tokens: 4096,
          api_key: 'set',
        },
      ],
      auth: 'on',
      transcripts,
    });
    expect(server.stdout() + server.stderr()).not.toMatch(/hunter/);
    server.child.kill('SIGTERM');
    expect(await server.exit).toBe(0);
  });

  it('logs each response-format switch of a replica once, with its evidence (issue 23)', async () => {
    let refuse = true;
    const match = { kind: 'json', body: universalReply('match', 0.9) } as const;
    fake = await startFakeOpenAI({
      fallback: (body) =>
        refuse && body.response_format?.type === 'json_schema' ? llamaSchemaFailed(400) : match,
    });
    const server = await startServer({
      JUDGE_BASE_URL: fake.baseURL,
      JUDGE_MODEL: 'fake-model',
      JUDGE_SCHEMA_REPROBE_MS: '300',
    });
    const switches = (): Json[] =>
      server
        .stdout()
        .split('\n')
        .filter((l) => l.includes('"evidence"'))
        .map((l) => JSON.parse(l));
    // Fresh candidates each time: a cached judgment would make no backend call.
    let next = 0;
    const judged = async (): Promise<Json> => {
      next += 2;
      return (await post(`${server.url}/v1/reward`, group([candidate(next), candidate(next + 1)]))).json();
    };
    expect((await judged()).rewards).toEqual([1, 1]);
    await waitFor(() => switches().length === 1, 'the switch to json_object to be logged');
    expect(switches()[0]).toMatchObject({
      level: 40,
      backend: 'default',
      replica: new URL(fake.baseURL).host,
      from: 'json_schema',
      to: 'json_object',
      status: 400,
      reprobeInMs: 300,
    });
    expect(switches()[0].evidence).toContain('JSON schema conversion failed');
    refuse = false;
    await new Promise((resolve) => setTimeout(resolve, 350));
    await judged();
    await waitFor(() => switches().length === 2, 'the switch back to be logged');
    expect(switches()[1]).toMatchObject({ from: 'json_object', to: 'json_schema' });
    await judged();
    expect(switches()).toHaveLength(2);
    server.child.kill('SIGTERM');
    expect(await server.exit).toBe(0);
  });

  it('refuses to start with JUDGE_MODEL but no JUDGE_BASE_URL (no silent offline run)', async () => {
    const child = spawn(process.execPath, [MAIN], {
      cwd: ROOT,
      env: { PATH: process.env['PATH'] ?? '', PORT: '0', JUDGE_MODEL: 'qwen' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code).toBe(1);
    expect(stderr).toContain('JUDGE_BASE_URL');
    expect(stderr).not.toContain('OFFLINE BACKEND');
  });

  it('serves offline with a loud banner, answers /healthz, and exits 0 on SIGTERM', async () => {
    const server = await startServer({});
    expect(server.stderr()).toContain('OFFLINE BACKEND');
    const health = await fetch(`${server.url}/healthz`);
    expect(health.status).toBe(200);
    const res = await post(`${server.url}/v1/reward`, group([GROUND_TRUTH, candidate(1)]));
    expect(res.status).toBe(200);
    const body = (await res.json()) as Json;
    expect(body.backend).toBe('offline');
    expect(body.rewards[0]).toBe(1);
    server.child.kill('SIGTERM');
    expect(await server.exit).toBe(0);
  });

  it('refuses to start on a blank numeric variable, naming it (exit 1, no silent 0)', async () => {
    await expect(startServer({ FAILURE_REWARD: ' ' })).rejects.toThrow(
      /server exited \(1\)[\s\S]*FAILURE_REWARD: must be a decimal number/,
    );
    await expect(startServer({ PORT: ' ' })).rejects.toThrow(/PORT: must be a decimal integer/);
  });

  it('lets a request in flight at SIGTERM finish, writes its transcripts, refuses new work and exits 0', async () => {
    fake = await startFakeOpenAI({
      latencyMs: 300,
      fallback: { kind: 'json', body: universalReply('match') },
    });
    dir = mkdtempSync(join(tmpdir(), 'main-'));
    const transcripts = join(dir, 'judgments.jsonl');
    const server = await startServer({
      JUDGE_BASE_URL: fake.baseURL,
      JUDGE_MODEL: 'fake-model',
      TRANSCRIPTS_PATH: transcripts,
      SHUTDOWN_GRACE_MS: '10000',
    });
    expect(server.stderr()).not.toContain('OFFLINE BACKEND');
    const inFlight = post(`${server.url}/v1/reward`, group([candidate(0), candidate(1), candidate(2)]));
    const f = fake;
    await waitFor(() => f.inflight() > 0, 'the judgments to reach the backend');
    server.child.kill('SIGTERM');

    const res = await inFlight;
    expect(res.status).toBe(200);
    const body = (await res.json()) as Json;
    expect(body.rewards).toEqual([1, 1, 1]);

    // New work is refused once shutdown started: the port is closed (or a kept-alive socket gets 503).
    const late = await post(`${server.url}/v1/reward`, group([candidate(3)])).then(
      (r) => r.status,
      () => 'refused',
    );
    expect([503, 'refused']).toContain(late);

    expect(await server.exit).toBe(0);
    const lines = readFileSync(transcripts, 'utf8')
      .split('\n')
      .filter((l) => l !== '');
    expect(lines).toHaveLength(3);
    const records = lines.map((l) => JSON.parse(l));
    expect(records.map((r) => r.judgment_id).sort()).toEqual(
      body.results.map((r: { judgment_id: string }) => r.judgment_id).sort(),
    );
    for (const r of records) expect(r).toMatchObject({ status: 'ok', verdict: 'match', reward: 1 });
    expect(fake.callCount).toBe(9);
  });

  it('lets a /v1/rank in flight at SIGTERM finish with every comparison, and exits 0', async () => {
    fake = await startFakeOpenAI({
      latencyMs: 200,
      fallback: {
        kind: 'json',
        body: { reasoning: 'r', winner: 'A', margin: 'slight', confidence: 0.6 },
      },
    });
    const server = await startServer({
      JUDGE_BASE_URL: fake.baseURL,
      JUDGE_MODEL: 'fake-model',
      SHUTDOWN_GRACE_MS: '10000',
    });
    const inFlight = post(`${server.url}/v1/rank`, group([candidate(0), candidate(1), candidate(2)]));
    const f = fake;
    await waitFor(() => f.inflight() > 0, 'the comparisons to reach the backend');
    server.child.kill('SIGTERM');
    const res = await inFlight;
    expect(res.status).toBe(200);
    const body = (await res.json()) as Json;
    expect(body.comparisons).toMatchObject({ scheduled: 3, ok: 3, failed: 0 });
    // An always-"A" judge: every pair is a position-bias event and a tie.
    expect(body.position_bias.rate).toBe(1);
    expect(fake.callCount).toBe(6);
    expect(await server.exit).toBe(0);
  });

  it('aborts judgments still running when SHUTDOWN_GRACE_MS runs out, answers them as failures, and exits 0', async () => {
    fake = await startFakeOpenAI({ fallback: { kind: 'hang' } });
    const server = await startServer({
      JUDGE_BASE_URL: fake.baseURL,
      JUDGE_MODEL: 'fake-model',
      SHUTDOWN_GRACE_MS: '300',
    });
    const inFlight = post(`${server.url}/v1/reward`, group([candidate(0)]));
    const f = fake;
    await waitFor(() => f.inflight() === 2, 'the analysts to hang');
    server.child.kill('SIGTERM');
    const res = await inFlight;
    expect(res.status).toBe(200);
    const body = (await res.json()) as Json;
    expect(body.rewards).toEqual([null]);
    expect(body.results[0].status).toBe('judge_error');
    expect(await server.exit).toBe(0);
  });
});
