/**
 * Benchmark orchestrator: starts the fake backend, the production server and the load generator / floor
 * client as separate processes on 127.0.0.1, runs the scenarios, and measures the server from outside
 * (/proc CPU and memory, backend calls counted by the fake). Every child is ours, tracked by PID, bounded
 * in time, and reaped on exit or error (bench/procs.ts).
 */
import { closeSync, mkdtempSync, openSync, readdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { setTimeout as delay } from 'node:timers/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { getPreset } from '../src/judge/presets.js';
import { BLOCK, DEFAULT_DATASET } from './data.js';
import type { FloorResult } from './floor.js';
import type { LoadResult } from './load.js';
import {
  freePort,
  machineBusyMs,
  procCpuMs,
  procMemMb,
  spawnTracked,
  stopProcess,
  waitForLine,
  waitHttpOk,
  type Spawned,
} from './procs.js';
import { spread, type Spread } from './stats.js';

export const ROOT = fileURLToPath(new URL('..', import.meta.url));

export interface BenchOptions {
  /** Independent repetitions (fresh fake and server each); reported as median (min–max). */
  runs: number;
  /** Fake backend latency L, ms. */
  latencyMs: number;
  /** Judgments in flight in the throughput scenarios (groups: inflight / groupSize requests). */
  inflight: number;
  groupSize: number;
  /** Judgments per throughput scenario (and per floor run). */
  judgments: number;
  warmupJudgments: number;
  /** Groups sent one at a time for the light-load latency. */
  lightGroups: number;
  /** Hard bound on each scenario. */
  maxScenarioSeconds: number;
  /**
   * Before each repetition, wait up to this many seconds for the machine to be quiet (other processes
   * below 0.15 cores over 2 s); 0 = don't wait. The background load is reported either way.
   */
  quietWaitSeconds: number;
  /** No new repetition starts if it would likely end after this many seconds (≥ 1 repetition always runs). */
  budgetSeconds: number;
  /** Server env JUDGE_MAX_INFLIGHT: backend calls in flight (analysts-2 peaks at 2 per judgment). */
  judgeMaxInflight: number;
  /** Server CACHE_SIZE (replays are clamped to it so that they are all hits). */
  cacheSize: number;
  /** `dist`: node dist/server/main.js (production build); `src`: the TypeScript sources via tsx. */
  server: 'dist' | 'src';
  /** With `server: 'dist'`: the built entry point to run (default dist/server/main.js; e.g. a prototype's). */
  serverEntry?: string | undefined;
  graph: string;
  dataset: string;
  /** Extra node flags for the server process (e.g. --cpu-prof). */
  serverNodeArgs: string[];
  /** Extra server environment. */
  serverEnv: Record<string, string>;
  log: (line: string) => void;
}

export const DEFAULT_OPTIONS: BenchOptions = {
  runs: 3,
  latencyMs: 20,
  inflight: 256,
  groupSize: BLOCK,
  judgments: 8000,
  warmupJudgments: 2000,
  lightGroups: 30,
  maxScenarioSeconds: 60,
  budgetSeconds: 3600,
  quietWaitSeconds: 0,
  judgeMaxInflight: 512,
  cacheSize: 10_000,
  server: 'dist',
  graph: 'analysts-2',
  dataset: DEFAULT_DATASET,
  // What `npm start` and the Dockerfile run: a larger young generation (measured: +7% judgments/s).
  serverNodeArgs: ['--max-semi-space-size=32'],
  serverEnv: {},
  log: () => {},
};

/** What one scenario measured. Rates are per second of the load generator's wall time. */
export interface ScenarioResult {
  name: string;
  load: LoadResult;
  judgmentsPerSecond: number;
  backendCalls: number;
  backendCallsPerSecond: number;
  serverCpuMs: number;
  /** Server CPU / wall: cores busy. */
  serverCores: number;
  serverCpuMsPerCall: number;
  serverCpuMsPerJudgment: number;
  fakeCores: number;
  fakeCpuMsPerCall: number;
  loadCores: number;
  /** CPU of every other process on the machine during the scenario, in cores: noise when well above 0. */
  otherCores: number;
  /** Peak backend calls in flight seen by the fake. */
  fakeMaxInflight: number;
  /** Server log bytes written during the scenario. */
  logBytes: number;
  /** Cache hits counted by the server's /metrics (undefined when not scrapeable). */
  metricCacheHits: number | undefined;
}

export interface FloorRun {
  result: FloorResult;
  judgmentsPerSecond: number;
  callsPerSecond: number;
  clientCpuMsPerCall: number;
  fakeCores: number;
  fakeCpuMsPerCall: number;
  otherCores: number;
}

export interface RepetitionResult {
  /** Cores used by other processes just before the run. */
  backgroundCores: number;
  floor: FloorRun;
  floorLight: FloorRun;
  groups: ScenarioResult;
  groupsCached: ScenarioResult;
  rollouts: ScenarioResult;
  rolloutsCached: ScenarioResult;
  light: ScenarioResult;
  peakRssMb: number;
  rssEndMb: number;
}

interface Fake {
  proc: Spawned;
  baseURL: string;
  stats(): Promise<{ calls: number; maxInflight: number; inflight: number }>;
  reset(): void;
}

const TSX = ['--import', 'tsx'];

function benchScript(name: string): string {
  return join(ROOT, 'bench', name);
}

export async function startFake(latencyMs: number): Promise<Fake> {
  const proc = spawnTracked(
    'fake',
    process.execPath,
    [...TSX, benchScript('fake.ts'), '--latency-ms', String(latencyMs)],
    {
      cwd: ROOT,
      stdio: ['pipe', 'pipe', 'inherit'],
    },
  );
  const [, baseURL] = await waitForLine(proc, /^LISTENING (\S+)/, 20_000);
  let pending = Promise.resolve();
  const stats = (): Promise<{ calls: number; maxInflight: number; inflight: number }> => {
    // One outstanding STATS at a time: answers come back in order on one stdout.
    const next = pending.then(async () => {
      const line = waitForLine(proc, /^STATS (.*)$/, 10_000);
      proc.child.stdin?.write('STATS\n');
      const [, json] = await line;
      return JSON.parse(json!) as { calls: number; maxInflight: number; inflight: number };
    });
    pending = next.then(
      () => undefined,
      () => undefined,
    );
    return next;
  };
  return { proc, baseURL: baseURL!, stats, reset: () => proc.child.stdin?.write('RESET\n') };
}

export interface Server {
  proc: Spawned;
  url: string;
  logPath: string;
}

export async function startServer(options: BenchOptions, fake: Fake, logDir: string): Promise<Server> {
  const port = await freePort();
  const logPath = join(logDir, `server-${port}.log`);
  const logFd = openSync(logPath, 'a');
  const entry =
    options.server === 'dist'
      ? [...options.serverNodeArgs, options.serverEntry ?? join(ROOT, 'dist/server/main.js')]
      : [...options.serverNodeArgs, ...TSX, join(ROOT, 'src/server/main.ts')];
  const env: Record<string, string> = {
    PATH: process.env['PATH'] ?? '/usr/bin:/bin',
    NODE_ENV: 'production',
    HOST: '127.0.0.1',
    PORT: String(port),
    LOG_LEVEL: 'info',
    JUDGE_BASE_URL: fake.baseURL,
    JUDGE_MODEL: 'bench-model',
    JUDGE_MAX_INFLIGHT: String(options.judgeMaxInflight),
    DEFAULT_GRAPH: options.graph,
    CACHE_SIZE: String(options.cacheSize),
    METRICS_PUBLIC: 'true',
    SHUTDOWN_GRACE_MS: '5000',
    ...options.serverEnv,
  };
  let proc: Spawned;
  try {
    proc = spawnTracked('server', process.execPath, entry, {
      cwd: ROOT,
      env,
      stdio: ['ignore', logFd, logFd],
    });
  } finally {
    closeSync(logFd);
  }
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitHttpOk(`${url}/healthz`, 30_000, proc);
    await waitHttpOk(`${url}/readyz`, 30_000, proc);
  } catch (err) {
    await stopProcess(proc, 2_000);
    throw new Error(
      `server did not start (log: ${logPath}): ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  return { proc, url, logPath };
}

/** Sums every sample of a metric (all label sets) in a Prometheus text exposition; filter by a label. */
export function sumMetric(text: string, name: string, label?: string): number {
  let total = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (!(rest.startsWith('{') || rest.startsWith(' '))) continue;
    if (label !== undefined && !rest.includes(label)) continue;
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (Number.isFinite(value)) total += value;
  }
  return total;
}

async function scrapeCacheHits(server: Server): Promise<number | undefined> {
  try {
    const res = await fetch(`${server.url}/metrics`, { signal: AbortSignal.timeout(5_000) });
    const text = await res.text();
    if (!res.ok || !text.includes('reward_cache_lookups_total')) return undefined;
    return sumMetric(text, 'reward_cache_lookups_total', 'result="hit"');
  } catch {
    return undefined;
  }
}

const fileSize = (path: string): number => {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
};

/** Spawns a bench worker, sends GO after READY, resolves with its RESULT; bounded by `timeoutMs`. */
async function runWorker<T>(
  script: string,
  args: string[],
  timeoutMs: number,
  hooks: { beforeGo?: (() => Promise<void>) | undefined; afterGo?: (() => void) | undefined } = {},
): Promise<T> {
  const proc = spawnTracked(script, process.execPath, [...TSX, benchScript(script), ...args], {
    cwd: ROOT,
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  try {
    await waitForLine(proc, /^READY$/, Math.max(30_000, timeoutMs));
    const resultLine = waitForLine(proc, /^RESULT (.*)$/, timeoutMs);
    await hooks.beforeGo?.();
    proc.child.stdin?.write('GO\n');
    hooks.afterGo?.();
    const [, json] = await resultLine;
    return JSON.parse(json!) as T;
  } finally {
    proc.child.stdin?.end();
    await stopProcess(proc, 5_000);
  }
}

export interface LoadSpec {
  name: string;
  mode: 'groups' | 'rollouts';
  start: number;
  count: number;
  /** Requests in flight. */
  concurrency: number;
  maxSeconds: number;
  /** Called right after the load generator was told to start. */
  onStart?: () => void;
}

export async function runScenario(
  options: BenchOptions,
  server: Server,
  fake: Fake,
  spec: LoadSpec,
): Promise<ScenarioResult> {
  let cpu0 = 0;
  let fake0 = { calls: 0 };
  let fakeCpu0 = 0;
  let log0 = 0;
  let hits0: number | undefined;
  let machine0 = 0;
  const load = await runWorker<LoadResult>(
    'load.ts',
    [
      '--url',
      server.url,
      '--mode',
      spec.mode,
      '--start',
      String(spec.start),
      '--count',
      String(spec.count),
      '--concurrency',
      String(spec.concurrency),
      '--group-size',
      String(options.groupSize),
      '--max-seconds',
      String(spec.maxSeconds),
      '--dataset',
      options.dataset,
      '--graph',
      options.graph,
    ],
    (spec.maxSeconds + 60) * 1000,
    {
      beforeGo: async () => {
        hits0 = await scrapeCacheHits(server);
        fake.reset();
        fake0 = await fake.stats();
        log0 = fileSize(server.logPath);
        fakeCpu0 = procCpuMs(fake.proc.pid);
        cpu0 = procCpuMs(server.proc.pid);
        machine0 = machineBusyMs();
      },
      afterGo: spec.onStart,
    },
  );
  const machineMs = machineBusyMs() - machine0;
  const serverCpuMs = procCpuMs(server.proc.pid) - cpu0;
  const fakeCpuMs = procCpuMs(fake.proc.pid) - fakeCpu0;
  const fake1 = await fake.stats();
  const logBytes = fileSize(server.logPath) - log0;
  const hits1 = await scrapeCacheHits(server);
  const calls = fake1.calls - fake0.calls;
  const seconds = load.wallMs / 1000;
  return {
    name: spec.name,
    load,
    judgmentsPerSecond: load.rewarded / seconds,
    backendCalls: calls,
    backendCallsPerSecond: calls / seconds,
    serverCpuMs,
    serverCores: serverCpuMs / load.wallMs,
    serverCpuMsPerCall: calls > 0 ? serverCpuMs / calls : NaN,
    serverCpuMsPerJudgment: load.rewarded > 0 ? serverCpuMs / load.rewarded : NaN,
    fakeCores: fakeCpuMs / load.wallMs,
    fakeCpuMsPerCall: calls > 0 ? fakeCpuMs / calls : NaN,
    loadCores: load.cpuMs / load.wallMs,
    otherCores: Math.max(0, machineMs - serverCpuMs - fakeCpuMs - load.cpuMs) / load.wallMs,
    fakeMaxInflight: fake1.maxInflight,
    logBytes,
    metricCacheHits: hits0 !== undefined && hits1 !== undefined ? hits1 - hits0 : undefined,
  };
}

export async function runFloor(
  options: BenchOptions,
  fake: Fake,
  spec: {
    start: number;
    count: number;
    concurrency: number;
    groupSize: number;
    maxSeconds: number;
    warmup: number;
  },
): Promise<FloorRun> {
  let fakeCpu0 = 0;
  let calls0 = 0;
  let machine0 = 0;
  const result = await runWorker<FloorResult>(
    'floor.ts',
    [
      '--base',
      fake.baseURL,
      '--start',
      String(spec.start),
      '--count',
      String(spec.count),
      '--concurrency',
      String(spec.concurrency),
      '--group-size',
      String(spec.groupSize),
      '--max-seconds',
      String(spec.maxSeconds),
      '--warmup',
      String(spec.warmup),
      '--dataset',
      options.dataset,
    ],
    (2 * spec.maxSeconds + 60) * 1000,
    {
      beforeGo: async () => {
        calls0 = (await fake.stats()).calls;
        fakeCpu0 = procCpuMs(fake.proc.pid);
        machine0 = machineBusyMs();
      },
    },
  );
  const machineMs = machineBusyMs() - machine0;
  const fakeCpuMs = procCpuMs(fake.proc.pid) - fakeCpu0;
  const calls = (await fake.stats()).calls - calls0;
  const seconds = result.wallMs / 1000;
  return {
    result,
    judgmentsPerSecond: result.judgments / seconds,
    callsPerSecond: calls / seconds,
    clientCpuMsPerCall: calls > 0 ? result.cpuMs / calls : NaN,
    fakeCores: fakeCpuMs / result.wallMs,
    fakeCpuMsPerCall: calls > 0 ? fakeCpuMs / calls : NaN,
    otherCores: Math.max(0, machineMs - fakeCpuMs - result.cpuMs) / result.wallMs,
  };
}

/** Allocates disjoint, block-aligned index ranges within one server's life (distinct ranges = misses). */
function cursor(): (count: number) => number {
  let next = 0;
  return (count) => {
    const start = next;
    next += Math.ceil(count / BLOCK) * BLOCK;
    return start;
  };
}

/** Warms the server up (JIT, keep-alive pools, cache) with rollouts that no measured scenario reuses. */
async function warmUp(
  options: BenchOptions,
  server: Server,
  fake: Fake,
  take: (count: number) => number,
  maxSeconds: number,
): Promise<void> {
  await runScenario(options, server, fake, {
    name: 'warm-up',
    mode: 'rollouts',
    start: take(options.warmupJudgments),
    count: options.warmupJudgments,
    concurrency: options.inflight,
    maxSeconds,
  });
}

/** Stops the server (if still running) and then the fake backend. */
async function stopAll(server: Server | undefined, fake: Fake): Promise<void> {
  if (server !== undefined) await stopProcess(server.proc, 10_000);
  fake.proc.child.stdin?.end();
  await stopProcess(fake.proc, 5_000);
}

export function makeLogDir(): string {
  return mkdtempSync(join(tmpdir(), 'reward-bench-'));
}

/** One repetition: floor client, then the server scenarios, each on fresh processes. */
/** Cores used by the whole machine over `ms` (nothing of ours runs meanwhile). */
async function backgroundCores(ms: number): Promise<number> {
  const m0 = machineBusyMs();
  const t0 = performance.now();
  await delay(ms);
  return (machineBusyMs() - m0) / (performance.now() - t0);
}

/** Waits (bounded) until the machine is quiet; returns the last background load measured, in cores. */
export async function waitQuiet(maxSeconds: number, log: (line: string) => void): Promise<number> {
  const until = performance.now() + maxSeconds * 1000;
  let cores = await backgroundCores(2_000);
  for (let i = 0; i < 10_000 && cores > 0.15 && performance.now() < until; i++) {
    if (i % 15 === 0) log(`machine busy (${cores.toFixed(2)} cores used by other processes); waiting`);
    cores = await backgroundCores(2_000);
  }
  return cores;
}

export async function runRepetition(
  options: BenchOptions,
  index: number,
  logDir: string,
): Promise<RepetitionResult> {
  const { log } = options;
  const background = await waitQuiet(options.quietWaitSeconds, log);
  log(`run ${index + 1}: background load before the run ${background.toFixed(2)} cores`);
  const fake = await startFake(options.latencyMs);
  let server: Server | undefined;
  try {
    const max = options.maxScenarioSeconds;
    const floorTake = cursor();
    log(`run ${index + 1}: floor client, ${options.judgments} judgments at ${options.inflight} in flight`);
    const floor = await runFloor(options, fake, {
      start: floorTake(options.judgments),
      count: options.judgments,
      concurrency: options.inflight,
      groupSize: 1,
      maxSeconds: max,
      warmup: options.warmupJudgments,
    });
    const floorLight = await runFloor(options, fake, {
      start: floorTake(options.lightGroups * options.groupSize),
      count: options.lightGroups * options.groupSize,
      concurrency: 1,
      groupSize: options.groupSize,
      maxSeconds: max,
      warmup: options.groupSize,
    });

    server = await startServer(options, fake, logDir);
    const take = cursor();
    log(`run ${index + 1}: server pid ${server.proc.pid} at ${server.url}; warm-up`);
    await warmUp(options, server, fake, take, max);

    /** The last completed judgments of a scenario that still fit in the cache: all hits when replayed. */
    const replayOf = (sc: ScenarioResult, start: number): { start: number; count: number } => {
      const perBlock = sc.load.mode === 'groups' ? options.groupSize : BLOCK;
      const doneBlocks = sc.load.mode === 'groups' ? sc.load.requests : Math.floor(sc.load.requests / BLOCK);
      const blocks = Math.min(doneBlocks, Math.floor(options.cacheSize / perBlock));
      return { start: start + (doneBlocks - blocks) * BLOCK, count: blocks * perBlock };
    };
    const groupConcurrency = Math.max(1, Math.floor(options.inflight / options.groupSize));
    const groupsStart = take(options.judgments);
    log(
      `run ${index + 1}: (a) /v1/reward groups of ${options.groupSize}, ${groupConcurrency} groups in flight`,
    );
    const groups = await runScenario(options, server, fake, {
      name: 'groups',
      mode: 'groups',
      start: groupsStart,
      count: options.judgments,
      concurrency: groupConcurrency,
      maxSeconds: max,
    });
    log(`run ${index + 1}: (c) cache hits, groups`);
    const groupsCached = await runScenario(options, server, fake, {
      name: 'groups-cached',
      mode: 'groups',
      ...replayOf(groups, groupsStart),
      concurrency: groupConcurrency,
      maxSeconds: max,
    });

    const rolloutsStart = take(options.judgments);
    log(`run ${index + 1}: (b) /get_reward per rollout, ${options.inflight} in flight`);
    const rollouts = await runScenario(options, server, fake, {
      name: 'rollouts',
      mode: 'rollouts',
      start: rolloutsStart,
      count: options.judgments,
      concurrency: options.inflight,
      maxSeconds: max,
    });
    log(`run ${index + 1}: (c) cache hits, rollouts`);
    const rolloutsCached = await runScenario(options, server, fake, {
      name: 'rollouts-cached',
      mode: 'rollouts',
      ...replayOf(rollouts, rolloutsStart),
      concurrency: options.inflight,
      maxSeconds: max,
    });

    log(`run ${index + 1}: light load, ${options.lightGroups} groups one at a time`);
    const light = await runScenario(options, server, fake, {
      name: 'light',
      mode: 'groups',
      start: take(options.lightGroups * options.groupSize),
      count: options.lightGroups * options.groupSize,
      concurrency: 1,
      maxSeconds: max,
    });
    const mem = procMemMb(server.proc.pid);
    return {
      backgroundCores: background,
      floor,
      floorLight,
      groups,
      groupsCached,
      rollouts,
      rolloutsCached,
      light,
      peakRssMb: mem.hwmMb,
      rssEndMb: mem.rssMb,
    };
  } finally {
    await stopAll(server, fake);
  }
}

export interface SuiteResult {
  options: Omit<BenchOptions, 'log'>;
  criticalPathCalls: number;
  callsPerJudgment: number;
  /** inflight / (critical-path calls × L), judgments/s. */
  limitJudgmentsPerSecond: number;
  runs: RepetitionResult[];
  startedAt: Date;
  durationMs: number;
}

export async function runSuite(options: BenchOptions): Promise<SuiteResult> {
  if (options.groupSize < 1 || options.groupSize > BLOCK) throw new Error(`group size must be 1..${BLOCK}`);
  const graph = getPreset(options.graph);
  if (graph === undefined) throw new Error(`unknown graph preset ${options.graph}`);
  if (graph.criticalPathCalls === 0) throw new Error('the benchmark needs a graph with LLM calls');
  const startedAt = new Date();
  const t0 = performance.now();
  const logDir = makeLogDir();
  options.log(`server logs in ${logDir}`);
  const runs: RepetitionResult[] = [];
  let slowestMs = 0;
  for (let i = 0; i < options.runs; i++) {
    const elapsedMs = performance.now() - t0;
    if (i > 0 && elapsedMs + slowestMs > options.budgetSeconds * 1000) {
      options.log(`time budget of ${options.budgetSeconds} s reached: stopping after ${i} runs`);
      break;
    }
    const r0 = performance.now();
    runs.push(await runRepetition(options, i, logDir));
    slowestMs = Math.max(slowestMs, performance.now() - r0);
  }
  const { log: _log, ...rest } = options;
  return {
    options: rest,
    criticalPathCalls: graph.criticalPathCalls,
    callsPerJudgment: graph.llmCallsPerJudgment,
    limitJudgmentsPerSecond: options.inflight / ((graph.criticalPathCalls * options.latencyMs) / 1000),
    runs,
    startedAt,
    durationMs: performance.now() - t0,
  };
}

export interface SoakSample {
  t: number;
  rssMb: number;
  hwmMb: number;
  judgmentsPerSecond: number;
  serverCores: number;
  fakeCores: number;
  /** Every process on the machine (server, fake, load generator and anything else), cores. */
  machineCores: number;
}

export interface SoakResult {
  seconds: number;
  inflight: number;
  intervalSeconds: number;
  samples: SoakSample[];
  scenario: ScenarioResult;
  /** RSS growth from the sample at 60 s (or the first) to the last, fraction. */
  growth: number;
}

/** Per-rollout load at `inflight` for `seconds`, sampling server RSS every `intervalSeconds`. */
export async function runSoak(
  options: BenchOptions,
  seconds: number,
  intervalSeconds: number,
): Promise<SoakResult> {
  const { log } = options;
  const callsPerJudgment = getPreset(options.graph)?.llmCallsPerJudgment ?? 3;
  const logDir = makeLogDir();
  await waitQuiet(options.quietWaitSeconds, log);
  const fake = await startFake(options.latencyMs);
  let server: Server | undefined;
  let timer: NodeJS.Timeout | undefined;
  try {
    server = await startServer(options, fake, logDir);
    const s = server;
    const take = cursor();
    await warmUp(options, s, fake, take, options.maxScenarioSeconds);
    const samples: SoakSample[] = [];
    let t0 = 0;
    let last = { t: 0, calls: 0, cpu: 0, fakeCpu: 0, machine: 0 };
    const sample = async (): Promise<void> => {
      const t = performance.now() - t0;
      const { calls } = await fake.stats();
      const cpu = procCpuMs(s.proc.pid);
      const fakeCpu = procCpuMs(fake.proc.pid);
      const machine = machineBusyMs();
      const mem = procMemMb(s.proc.pid);
      const dt = (t - last.t) / 1000;
      const row: SoakSample = {
        t: Math.round(t / 1000),
        rssMb: mem.rssMb,
        hwmMb: mem.hwmMb,
        judgmentsPerSecond: (calls - last.calls) / callsPerJudgment / dt,
        serverCores: (cpu - last.cpu) / 1000 / dt,
        fakeCores: (fakeCpu - last.fakeCpu) / 1000 / dt,
        machineCores: (machine - last.machine) / 1000 / dt,
      };
      last = { t, calls, cpu, fakeCpu, machine };
      samples.push(row);
      log(
        `soak t=${row.t}s rss=${row.rssMb.toFixed(1)} MB peak=${row.hwmMb.toFixed(1)} MB ` +
          `${row.judgmentsPerSecond.toFixed(0)} judgments/s, server ${row.serverCores.toFixed(2)} cores`,
      );
    };
    log(`soak: ${seconds} s of /get_reward at ${options.inflight} in flight, RSS every ${intervalSeconds} s`);
    const scenario = await runScenario(options, s, fake, {
      name: 'soak',
      mode: 'rollouts',
      start: take(0),
      count: seconds * 20_000,
      concurrency: options.inflight,
      maxSeconds: seconds,
      onStart: () => {
        t0 = performance.now();
        last = {
          t: 0,
          calls: 0,
          cpu: procCpuMs(s.proc.pid),
          fakeCpu: procCpuMs(fake.proc.pid),
          machine: machineBusyMs(),
        };
        void fake.stats().then((st) => (last.calls = st.calls));
        timer = setInterval(() => void sample(), intervalSeconds * 1000);
      },
    }).finally(() => clearInterval(timer));
    const ref = samples.find((x) => x.t >= 60) ?? samples[0];
    const end = samples[samples.length - 1];
    return {
      seconds,
      inflight: options.inflight,
      intervalSeconds,
      samples,
      scenario,
      growth: ref !== undefined && end !== undefined ? (end.rssMb - ref.rssMb) / ref.rssMb : NaN,
    };
  } finally {
    clearInterval(timer);
    await stopAll(server, fake);
  }
}

/** Median (min–max) over repetitions of one number. */
export function across(runs: RepetitionResult[], pick: (r: RepetitionResult) => number): Spread {
  return spread(runs.map(pick));
}

/** The newest .cpuprofile in `dir`. */
export function newestProfile(dir: string): string | undefined {
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.cpuprofile'))
    .map((f) => ({ f, m: statSync(join(dir, f)).mtimeMs }))
    .sort((a, b) => b.m - a.m);
  return files[0] === undefined ? undefined : join(dir, files[0].f);
}

export interface ProfileRun {
  scenario: ScenarioResult;
  profilePath: string;
}

/** The /get_reward scenario against a server started with `node --cpu-prof`; returns the profile path. */
export async function runProfiled(options: BenchOptions, profileDir: string): Promise<ProfileRun> {
  const profiled: BenchOptions = {
    ...options,
    serverNodeArgs: [...options.serverNodeArgs, '--cpu-prof', '--cpu-prof-dir', profileDir],
  };
  await waitQuiet(options.quietWaitSeconds, options.log);
  const fake = await startFake(options.latencyMs);
  let server: Server | undefined;
  try {
    server = await startServer(profiled, fake, profileDir);
    const take = cursor();
    await warmUp(profiled, server, fake, take, options.maxScenarioSeconds);
    options.log(`profiling /get_reward, ${options.judgments} judgments at ${options.inflight} in flight`);
    const scenario = await runScenario(profiled, server, fake, {
      name: 'rollouts (profiled)',
      mode: 'rollouts',
      start: take(options.judgments),
      count: options.judgments,
      concurrency: options.inflight,
      maxSeconds: options.maxScenarioSeconds,
    });
    // The profile is written when the server exits normally (its SIGTERM handler closes and exits).
    const exit = await stopProcess(server.proc, 15_000);
    server = undefined;
    const profilePath = newestProfile(profileDir);
    if (profilePath === undefined)
      throw new Error(`no .cpuprofile in ${profileDir} (server exit: ${String(exit)})`);
    return { scenario, profilePath };
  } finally {
    await stopAll(server, fake);
  }
}
