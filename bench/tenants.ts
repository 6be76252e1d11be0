/**
 * Two tenants, one judge fleet (issue 30 item 3): tenant A sends a step of `rolloutsA` rollouts and tenant B
 * one of `rolloutsB` at the same moment (`order`: interleaved, or B's right behind A's), each with its own key
 * (REWARD_KEYS, weights `weightA`:`weightB`), as `/v1/reward` groups of `groupSize`, against the production
 * build (`node dist/server/main.js`) and the fake backend (bench/fake.ts: `latencyMs` per call, `slots`
 * serving slots = JUDGE_MAX_INFLIGHT), each in its own process. Run once with FAIR_QUEUING on and once off.
 *
 * What B's share predicts: B's calls drain at its weighted share of the fleet while A has work, so its step
 * takes B's calls × L / (share × slots) + (critical path − 1) × L, with L the call latency the fake
 * actually served (its served time / calls). B's ratio = measured / predicted (target ≤ 1.3 with fair
 * queuing). A loses nothing: every one of its rollouts gets a reward, and it ends within what the whole
 * work (A's and B's calls) takes the fleet (`aBoundS`, the ratio `aRatio`).
 *
 *   npm run build && npx tsx bench/tenants.ts                       # 6 144 + 512 at 1 s, fair on and off
 *   npx tsx bench/tenants.ts --rollouts-a 384 --rollouts-b 64 --latency-ms 100 --slots 32 --max-concurrent 128
 *
 * Prints one JSON line per mode and a markdown table.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

import { Agent, request } from 'undici';

import { hashKey } from '../src/config.js';
import { BLOCK, loadCorpus, tripleAt, type Corpus } from './data.js';
import { ROOT } from './options.js';
import {
  freePort,
  installCleanup,
  machineBusyMs,
  procCpuMs,
  spawnTracked,
  stopProcess,
  waitForLine,
  waitHttpOk,
} from './procs.js';
import { benchScriptArgs } from './services.js';

export interface TenantBurstOptions {
  rolloutsA: number;
  rolloutsB: number;
  /** Candidates per `/v1/reward` request (≤ 16: one GRPO group of one ground truth). */
  groupSize: number;
  latencyMs: number;
  /** The fake's serving slots and JUDGE_MAX_INFLIGHT. */
  slots: number;
  /** MAX_CONCURRENT_JUDGMENTS (default: the server's, 512). */
  maxConcurrent?: number | undefined;
  fair: boolean;
  weightA?: number | undefined;
  weightB?: number | undefined;
  /** The server's entry (default `dist/server/main.js`). */
  serverEntry?: string | undefined;
  /**
   * The order the requests are sent in: `interleaved` (default: both runs start at the same moment, so B's
   * requests are spread among A's as they go out) or `a-first` (every A request on the wire before B's
   * first: B also waits for the server to read and prepare all of A's requests, which is first come,
   * first served).
   */
  order?: 'interleaved' | 'a-first' | undefined;
  /** Print each tenant's running / queued judgments every `traceMs` ms to stderr (GET /v1/tenants). */
  traceMs?: number | undefined;
}

export interface TenantOutcome {
  rollouts: number;
  requests: number;
  /** Rollouts answered with a reward (200 and a non-null reward). */
  rewarded: number;
  /** Requests that did not answer 200 (refused, failed). */
  refused: number;
  /** From the common start to the tenant's last answer, s. */
  wallS: number;
}

export interface TenantBurstResult {
  fair: boolean;
  order: 'interleaved' | 'a-first';
  latencyMs: number;
  slots: number;
  a: TenantOutcome;
  b: TenantOutcome;
  /** Backend calls the fake served, and their mean served latency, ms. */
  calls: number;
  servedLatencyMs: number;
  /** B's share of the fleet while A has work: weightB / (weightA + weightB). */
  shareB: number;
  /** What B's share predicts for its step, s, and measured / predicted. */
  bPredictedS: number;
  bRatio: number;
  /**
   * The same prediction at the rate the fleet actually served the burst (all calls / A's wall: below
   * slots / latency when the machine's CPU is short, for both tenants alike), and measured / it.
   */
  bPredictedAtRateS: number;
  bRatioAtRate: number;
  /** What the whole work takes the fleet (A's step can end no sooner with B beside it), s; A's wall / it. */
  aBoundS: number;
  aRatio: number;
  /** CPU the server used during the burst, s; and the machine's busy cores meanwhile (every process). */
  serverCpuS: number;
  machineBusyCores: number;
}

/** Critical path and calls per judgment of the default graph (analysts-2). */
const CALLS_PER_JUDGMENT = 3;
const CRITICAL_PATH = 2;

function keysFile(weightA: number, weightB: number): string {
  const path = join(mkdtempSync(join(tmpdir(), 'reward-tenants-')), 'keys.json');
  const key = (name: string, weight: number) => ({
    name,
    sha256: hashKey(`bench-key-${name}`),
    scopes: ['reward'],
    weight,
  });
  // `ops` (admin, weight irrelevant: it judges nothing) reads GET /v1/tenants for --trace.
  const ops = { ...key('ops', 1), scopes: ['admin'] };
  writeFileSync(path, JSON.stringify({ keys: [key('run-a', weightA), key('run-b', weightB), ops] }));
  return path;
}

/** The `/v1/reward` bodies of `rollouts` rollouts from index `from` (groups of one ground truth each). */
function bodies(corpus: Corpus, from: number, rollouts: number, groupSize: number): string[] {
  const out: string[] = [];
  for (let start = 0; start < rollouts; start += groupSize) {
    const n = Math.min(groupSize, rollouts - start);
    const k = from + (start / groupSize) * BLOCK;
    const triples = Array.from({ length: n }, (_, j) => tripleAt(corpus, k + j));
    out.push(
      JSON.stringify({
        question: triples[0]?.question,
        ground_truth: triples[0]?.groundTruth,
        candidates: triples.map((t) => t.candidate),
      }),
    );
  }
  return out;
}

async function send(
  url: string,
  key: string,
  body: string,
  agent: Agent,
): Promise<{ status: number; rewarded: number; at: number }> {
  const res = await request(`${url}/v1/reward`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body,
    dispatcher: agent,
    signal: AbortSignal.timeout(600_000),
  });
  const json = (await res.body.json()) as { rewards?: Array<number | null> };
  const rewarded = res.statusCode === 200 ? (json.rewards ?? []).filter((r) => r !== null).length : 0;
  return { status: res.statusCode, rewarded, at: performance.now() };
}

/** Polls GET /v1/tenants (the `ops` key) every `everyMs` ms, one stderr line each, until stopped. */
function traceTenants(url: string, start: number, everyMs: number): { stop(): void } {
  const timer = setInterval(() => {
    void request(`${url}/v1/tenants`, { headers: { authorization: 'Bearer bench-key-ops' } })
      .then(async (res) => {
        const json = (await res.body.json()) as {
          tenants: Array<{ name: string; running: number; queued: number; backlog_calls: number }>;
        };
        const at = ((performance.now() - start) / 1000).toFixed(1);
        const rows = json.tenants
          .filter((t) => t.name !== 'ops')
          .map((t) => `${t.name} running ${t.running} queued ${t.queued} backlog ${t.backlog_calls}`);
        process.stderr.write(`${at}s ${rows.join(' | ')}\n`);
      })
      .catch(() => undefined);
  }, everyMs);
  return { stop: () => clearInterval(timer) };
}

function outcome(
  answers: Array<{ status: number; rewarded: number; at: number }>,
  rollouts: number,
  start: number,
): TenantOutcome {
  return {
    rollouts,
    requests: answers.length,
    rewarded: answers.reduce((n, a) => n + a.rewarded, 0),
    refused: answers.filter((a) => a.status !== 200).length,
    wallS: (Math.max(...answers.map((a) => a.at)) - start) / 1000,
  };
}

/** One burst of both tenants in one mode; every process it starts is stopped before it returns. */
export async function tenantBurst(options: TenantBurstOptions): Promise<TenantBurstResult> {
  const weightA = options.weightA ?? 1;
  const weightB = options.weightB ?? 1;
  const fake = spawnTracked(
    'fake',
    process.execPath,
    benchScriptArgs('fake.ts', ['--latency-ms', String(options.latencyMs), '--slots', String(options.slots)]),
    { cwd: ROOT, stdio: ['pipe', 'pipe', 'inherit'] },
  );
  let server: ReturnType<typeof spawnTracked> | undefined;
  const agent = new Agent({ connections: null, headersTimeout: 0, bodyTimeout: 0, keepAliveTimeout: 60_000 });
  try {
    const [, baseURL] = await waitForLine(fake, /^LISTENING (\S+)/, 20_000);
    const port = await freePort();
    server = spawnTracked(
      'server',
      process.execPath,
      [options.serverEntry ?? join(ROOT, 'dist/server/main.js')],
      {
        cwd: ROOT,
        stdio: ['ignore', 'ignore', 'inherit'],
        env: {
          PATH: process.env['PATH'] ?? '/usr/bin:/bin',
          NODE_ENV: 'production',
          HOST: '127.0.0.1',
          PORT: String(port),
          LOG_LEVEL: 'warn',
          JUDGE_BASE_URL: baseURL ?? '',
          JUDGE_MODEL: 'bench-model',
          JUDGE_MAX_INFLIGHT: String(options.slots),
          JUDGE_TIMEOUT_MS: String(Math.max(30_000, 20 * options.latencyMs)),
          REQUEST_DEADLINE_MS: '600000',
          REWARD_KEYS: keysFile(weightA, weightB),
          FAIR_QUEUING: String(options.fair),
          ...(options.maxConcurrent === undefined
            ? {}
            : { MAX_CONCURRENT_JUDGMENTS: String(options.maxConcurrent) }),
        },
      },
    );
    const url = `http://127.0.0.1:${port}`;
    await waitHttpOk(`${url}/healthz`, 30_000, server);
    const corpus = loadCorpus();
    const aBodies = bodies(corpus, 0, options.rolloutsA, options.groupSize);
    // B's rollouts far from A's: no judgment of B's is one of A's (no cache hit between them).
    const bFrom = Math.ceil(options.rolloutsA / options.groupSize) * BLOCK + 1000 * BLOCK;
    const bBodies = bodies(corpus, bFrom, options.rolloutsB, options.groupSize);
    const cpuBefore = procCpuMs(server.pid);
    const busyBefore = machineBusyMs();
    const start = performance.now();
    const aAnswers: Array<ReturnType<typeof send>> = [];
    const bAnswers: Array<ReturnType<typeof send>> = [];
    const sendA = (body: string) => aAnswers.push(send(url, 'bench-key-run-a', body, agent));
    const sendB = (body: string) => bAnswers.push(send(url, 'bench-key-run-b', body, agent));
    if (options.order === 'a-first') {
      aBodies.forEach(sendA);
      bBodies.forEach(sendB);
    } else {
      // B's i-th request goes out when A's share of the sends so far is what it is of the whole.
      const every = aBodies.length / Math.max(1, bBodies.length);
      let nextB = 0;
      aBodies.forEach((body, i) => {
        while (nextB < bBodies.length && nextB * every <= i) sendB(bBodies[nextB++] ?? '');
        sendA(body);
      });
      while (nextB < bBodies.length) sendB(bBodies[nextB++] ?? '');
    }
    const trace = options.traceMs === undefined ? undefined : traceTenants(url, start, options.traceMs);
    const [a, b] = await Promise.all([Promise.all(aAnswers), Promise.all(bAnswers)]).finally(() =>
      trace?.stop(),
    );
    const elapsedMs = performance.now() - start;
    const serverCpuS = (procCpuMs(server.pid) - cpuBefore) / 1000;
    const machineBusyCores = (machineBusyMs() - busyBefore) / elapsedMs;
    const stats = waitForLine(fake, /^STATS (.*)$/, 10_000);
    fake.child.stdin?.write('STATS\n');
    const [, json] = await stats;
    const served = JSON.parse(json ?? '{}') as { calls: number; servedMs: number };
    const latency = served.servedMs / Math.max(1, served.calls) / 1000;
    const shareB = weightB / (weightA + weightB);
    const bCalls = options.rolloutsB * CALLS_PER_JUDGMENT;
    const bPredictedS = (bCalls * latency) / (shareB * options.slots) + (CRITICAL_PATH - 1) * latency;
    const aBoundS =
      ((options.rolloutsA + options.rolloutsB) * CALLS_PER_JUDGMENT * latency) / options.slots +
      (CRITICAL_PATH - 1) * latency;
    const aOutcome = outcome(a, options.rolloutsA, start);
    const bOutcome = outcome(b, options.rolloutsB, start);
    const rate = served.calls / aOutcome.wallS;
    const bAtRateS = bCalls / (shareB * rate) + (CRITICAL_PATH - 1) * latency;
    return {
      fair: options.fair,
      order: options.order ?? 'interleaved',
      latencyMs: options.latencyMs,
      slots: options.slots,
      a: aOutcome,
      b: bOutcome,
      calls: served.calls,
      servedLatencyMs: Math.round(latency * 10_000) / 10,
      shareB,
      bPredictedS: Math.round(bPredictedS * 100) / 100,
      bRatio: Math.round((bOutcome.wallS / bPredictedS) * 100) / 100,
      bPredictedAtRateS: Math.round(bAtRateS * 100) / 100,
      bRatioAtRate: Math.round((bOutcome.wallS / bAtRateS) * 100) / 100,
      aBoundS: Math.round(aBoundS * 100) / 100,
      aRatio: Math.round((aOutcome.wallS / aBoundS) * 100) / 100,
      serverCpuS: Math.round(serverCpuS * 10) / 10,
      machineBusyCores: Math.round(machineBusyCores * 100) / 100,
    };
  } finally {
    await agent.close();
    if (server !== undefined) await stopProcess(server, 10_000);
    fake.child.stdin?.end();
    await stopProcess(fake, 5_000);
  }
}

function table(results: readonly TenantBurstResult[]): string {
  const rows = results.map(
    (r) =>
      `| ${r.fair ? 'on' : 'off'} | ${r.order} | ${r.a.rollouts} + ${r.b.rollouts} | ${r.latencyMs} ms × ${r.slots} | ` +
      `${r.b.wallS.toFixed(1)} s | ${r.bPredictedS.toFixed(1)} s | **${r.bRatio.toFixed(2)}** | ` +
      `${r.bPredictedAtRateS.toFixed(1)} s (${r.bRatioAtRate.toFixed(2)}) | ` +
      `${r.a.wallS.toFixed(1)} s | ${r.aBoundS.toFixed(1)} s (${r.aRatio.toFixed(2)}) | ` +
      `${r.a.rewarded}/${r.a.rollouts}, ${r.b.rewarded}/${r.b.rollouts} |`,
  );
  return [
    '| fair queuing | sent | rollouts A + B | judge | B measured | B predicted by its share | B ratio | at the measured rate (ratio) | A measured | whole work (A ratio) | rewarded A, B |',
    '| --- | --- | --- | --- | --: | --: | --: | --: | --: | --: | --- |',
    ...rows,
  ].join('\n');
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      'rollouts-a': { type: 'string', default: '6144' },
      'rollouts-b': { type: 'string', default: '512' },
      'group-size': { type: 'string', default: '16' },
      'latency-ms': { type: 'string', default: '1000' },
      slots: { type: 'string', default: '256' },
      'max-concurrent': { type: 'string' },
      modes: { type: 'string', default: 'on,off' },
      'weight-a': { type: 'string', default: '1' },
      'weight-b': { type: 'string', default: '1' },
      'server-entry': { type: 'string' },
      'trace-ms': { type: 'string' },
      order: { type: 'string', default: 'interleaved' },
    },
    strict: true,
  });
  const uninstall = installCleanup();
  const results: TenantBurstResult[] = [];
  try {
    for (const mode of (values.modes ?? 'on,off').split(',')) {
      const r = await tenantBurst({
        rolloutsA: Number(values['rollouts-a']),
        rolloutsB: Number(values['rollouts-b']),
        groupSize: Number(values['group-size']),
        latencyMs: Number(values['latency-ms']),
        slots: Number(values.slots),
        maxConcurrent: values['max-concurrent'] === undefined ? undefined : Number(values['max-concurrent']),
        fair: mode === 'on',
        weightA: Number(values['weight-a']),
        weightB: Number(values['weight-b']),
        serverEntry: values['server-entry'],
        traceMs: values['trace-ms'] === undefined ? undefined : Number(values['trace-ms']),
        order: values.order === 'a-first' ? 'a-first' : 'interleaved',
      });
      process.stdout.write(`${JSON.stringify(r)}\n`);
      results.push(r);
    }
  } finally {
    uninstall();
  }
  process.stdout.write(`\n${table(results)}\n`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
