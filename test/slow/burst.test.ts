/**
 * A whole GRPO step arriving at once (issue 13): 6 144 per-rollout `/get_reward` requests (groups of 16)
 * from an OpenRLHF-like client against a fake backend with 1 s latency and 256 serving slots, on loopback.
 * Slow (≈ 2 min), so in the `slow` vitest project: `npm test` runs it, `npm run test:unit` does not.
 *
 * The load client and the fake backend run in their own processes (a trainer and a GPU server are not
 * inside the reward server's event loop; the machine is shared, so CPU matters). Timing is
 * compared with a bound measured in the same run (the machine is shared): the backend-capacity bound is
 * the fake's total serving time (calls × the latency it actually served) / the server's in-flight calls.
 */
import { spawn } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';

import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';

import { BLOCK } from '../../bench/data.js';
import { loadConfig } from '../../src/config.js';
import { createOfflineBackend } from '../../src/judge/backends/offline.js';
import { createRouter } from '../../src/judge/routing.js';
import type { Router } from '../../src/judge/types.js';
import { buildApp } from '../../src/server/http/app.js';
import type { ClientReport } from './load-client.js';

const ROLLOUTS = 6144;
/** The default JUDGE_MAX_INFLIGHT, and the fake's serving slots. */
const BACKEND_SLOTS = 256;
const CLIENT = fileURLToPath(new URL('./load-client.ts', import.meta.url));
const FAKE = fileURLToPath(new URL('../../bench/fake.ts', import.meta.url));
/** Upper bound on one client run; the child is killed (by its PID) past it. */
const CLIENT_LIMIT_MS = 250_000;

interface FakeStats {
  calls: number;
  maxServing: number;
  servedMs: number;
}

/** The fake backend process (bench/fake.ts): its base URL, its stats on demand, and a way to stop it. */
interface FakeProcess {
  baseURL: string;
  stats(): Promise<FakeStats>;
  close(): Promise<void>;
}

function startFakeProcess(latencyMs: number): Promise<FakeProcess> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', FAKE, '--latency-ms', String(latencyMs), '--slots', String(BACKEND_SLOTS)],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  const waiting: Array<(line: string) => void> = [];
  let buffered = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk: string) => {
    buffered += chunk;
    let nl: number;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      waiting.shift()?.(line);
    }
  });
  const nextLine = (): Promise<string> =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('fake backend process: no answer in 60 s')), 60_000);
      waiting.push((line) => {
        clearTimeout(timer);
        resolve(line);
      });
    });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return nextLine().then((line) => {
    const match = /^LISTENING (\S+)/.exec(line);
    if (match?.[1] === undefined) throw new Error(`fake backend process: ${line}`);
    return {
      baseURL: match[1],
      async stats() {
        const answer = nextLine();
        child.stdin.write('STATS\n');
        return JSON.parse((await answer).replace(/^STATS /, '')) as FakeStats;
      },
      async close() {
        // Its stdin closing ends it (bench/child.ts); SIGKILL by PID if it does not go.
        child.stdin.end();
        const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
        await exited;
        clearTimeout(timer);
      },
    };
  });
}

interface Running {
  url: string;
  fake: FakeProcess;
  app: FastifyInstance;
  router: Router;
}

const median = (xs: readonly number[]): number => {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
};

let running: Running | undefined;
afterEach(async () => {
  if (running === undefined) return;
  const { app, router, fake } = running;
  running = undefined;
  await app.close();
  await Promise.all(router.backends().map(async (b) => b.close?.()));
  await fake.close();
});

async function start(env: Record<string, string>, latencyMs: number): Promise<Running> {
  const fake = await startFakeProcess(latencyMs);
  const config = loadConfig({ JUDGE_BASE_URL: fake.baseURL, JUDGE_MODEL: 'fake-model', ...env });
  const router = createRouter({ ...config.judge, offline: createOfflineBackend });
  const app = buildApp({ config, router });
  await app.listen({ port: 0, host: '127.0.0.1', backlog: 8192 });
  const { port } = app.server.address() as AddressInfo;
  running = { url: `http://127.0.0.1:${port}/get_reward`, fake, app, router };
  return running;
}

/** Runs the load client in its own process and returns its report. */
function runClient(r: Running, from: number, n: number, policy: 'openrlhf' | 'once'): Promise<ClientReport> {
  return new Promise((resolve, reject) => {
    const job = JSON.stringify({ url: r.url, from, n, policy });
    const child = spawn(process.execPath, ['--import', 'tsx', CLIENT, job], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const chunks: Buffer[] = [];
    child.stdout.on('data', (c: Buffer) => chunks.push(c));
    const timer = setTimeout(() => child.kill('SIGKILL'), CLIENT_LIMIT_MS);
    child.once('error', reject);
    child.once('exit', (code) => {
      clearTimeout(timer);
      if (code !== 0) reject(new Error(`load client exited with ${code}`));
      else resolve(JSON.parse(Buffer.concat(chunks).toString()) as ClientReport);
    });
  });
}

describe('a GRPO step of per-rollout requests', () => {
  it('gives every one of 6 144 rollouts a reward at the default config, within 1.3 × the backend-capacity bound', async () => {
    expect(ROLLOUTS % BLOCK).toBe(0);
    const r = await start({}, 1000);
    const report = await runClient(r, 0, ROLLOUTS, 'openrlhf');
    const outcomes = report.rollouts;
    const wallS = (report.endedAt - report.startedAt) / 1000;

    const stats = await r.fake.stats();
    const calls = stats.calls;
    // calls / in-flight × latency, with the latency the fake actually served (machine load included).
    const boundS = stats.servedMs / BACKEND_SLOTS / 1000;
    const lost = outcomes.filter((o) => o.reward === undefined).length;
    const refused = outcomes.flatMap((o) => o.attempts).filter((a) => a.status === 503).length;
    console.log(
      `burst: ${ROLLOUTS} rollouts, ${lost} without a reward, ${refused} refused attempts, ${calls} calls, ` +
        `wall ${wallS.toFixed(1)} s, bound ${boundS.toFixed(1)} s, ratio ${(wallS / boundS).toFixed(3)}`,
    );
    expect(lost).toBe(0);
    expect(outcomes.every((o) => o.reward === 1)).toBe(true);
    // Each rollout judged once: 3 calls per analysts-2 judgment, no work repeated.
    expect(calls).toBe(ROLLOUTS * 3);
    expect(stats.maxServing).toBeLessThanOrEqual(BACKEND_SLOTS);
    expect(wallS).toBeLessThanOrEqual(1.3 * boundS);
  });

  it('refuses a burst that cannot fit the deadline early, with Retry-After within 2× the real wait, and times out ≤ 1 % of what it admitted beyond the drain it missed', async () => {
    // The same 1 s, 256-slot backend (256 calls/s ≈ 85 judgments/s); a 30 s deadline fits about 2 300 of the
    // 6 144 judgments. (Shorter deadlines are dominated by the time the server itself needs to parse a
    // storm of 6 144 requests on this shared 2-core machine: 10–18 s measured.)
    const deadlineS = 30;
    // GET_REWARD_HOLD_MS=0: /get_reward decides on the request deadline itself (by default it admits what
    // fits OpenRLHF's 180 s wait instead: test/server/get-reward-hold.test.ts).
    const r = await start({ REQUEST_DEADLINE_MS: String(deadlineS * 1000), GET_REWARD_HOLD_MS: '0' }, 1000);
    // Warm-up: a server that has answered anything knows its call latency (64 rollouts, no backlog).
    const warm = await runClient(r, ROLLOUTS, 64, 'once');
    expect(warm.rollouts.every((o) => o.reward === 1)).toBe(true);

    // The burst: each rollout is sent once; a refusal is recorded, not retried.
    const before = await r.fake.stats();
    const report = await runClient(r, 2 * ROLLOUTS, ROLLOUTS, 'once');
    const after = await r.fake.stats();
    const attempts = report.rollouts.flatMap((o) => o.attempts);
    const refused = attempts.filter((a) => a.code === 'RW_OVERLOADED');
    const admitted = attempts.filter((a) => a.code !== 'RW_OVERLOADED');
    const timedOut = admitted.filter((a) => a.status !== 200);
    // The real wait of a refusal: until the work admitted before it was done.
    const lastAdmittedDone = Math.max(...admitted.map((a) => a.answeredAt));
    const ratios = refused.map((a) => (a.retryAfterS ?? 0) / ((lastAdmittedDone - a.answeredAt) / 1000));
    const refusalLatencyS = refused.map((a) => (a.answeredAt - a.sentAt) / 1000);
    // Issue 31 item 4e: the drain the server decided at (its refusals say it) against the drain it got
    // (the backend's calls during the burst over the time the admitted work took). On this shared machine
    // the server's own CPU during the storm can slow the drain below the estimate; an admitted judgment
    // that times out for that shortfall is the machine's, one beyond it is admission's.
    const estimatedCallsPerS = median(refused.flatMap((a) => a.drainCallsPerS ?? []));
    const actualCallsPerS = (after.calls - before.calls) / ((lastAdmittedDone - report.startedAt) / 1000);
    const shortfall = Math.max(0, 1 - actualCallsPerS / estimatedCallsPerS);
    console.log(
      `deadline burst: ${admitted.length} admitted (${timedOut.length} failed), ${refused.length} refused ` +
        `in ≤ ${Math.max(...refusalLatencyS).toFixed(2)} s; Retry-After / real wait ` +
        `${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)}; admitted work done after ` +
        `${((lastAdmittedDone - report.startedAt) / 1000).toFixed(1)} s; drain ` +
        `${actualCallsPerS.toFixed(0)} calls/s against the ${estimatedCallsPerS.toFixed(0)} estimated`,
    );
    expect(attempts.every((a) => a.status === 200 || a.status === 503)).toBe(true);
    // Both paths exercised: a real share admitted, a real share refused.
    expect(admitted.length).toBeGreaterThan(ROLLOUTS * 0.25);
    expect(refused.length).toBeGreaterThan(ROLLOUTS * 0.25);
    // Early: a refusal comes back at once, not after waiting in a queue towards the deadline.
    expect(Math.max(...refusalLatencyS)).toBeLessThan(0.5 * deadlineS);
    for (const ratio of ratios) {
      expect(ratio).toBeGreaterThanOrEqual(0.5);
      expect(ratio).toBeLessThanOrEqual(2);
    }
    // The estimate is near what the backend did (a capacity model off by far fails here, whatever the
    // timeouts), and the timeouts within 1 % plus what the measured shortfall explains.
    expect(actualCallsPerS / estimatedCallsPerS).toBeGreaterThan(0.7);
    expect(timedOut.length).toBeLessThanOrEqual(admitted.length * (0.01 + shortfall));
  });
});
