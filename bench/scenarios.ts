/**
 * Load generation: one scenario is a load-generator process (bench/load.ts) against the server, or the floor
 * client (bench/floor.ts) straight against the fake backend, started with the stdio protocol of
 * bench/child.ts and measured from outside around it (CPU of every process, backend calls, log bytes, cache
 * hits).
 */
import { BLOCK } from './data.js';
import type { FloorResult } from './floor-client.js';
import type { LoadResult } from './load-tally.js';
import { fileSize, scrapeCacheHits } from './measure.js';
import { ROOT, type BenchOptions } from './options.js';
import { machineBusyMs, procCpuMs, spawnTracked, stopProcess, waitForLine } from './procs.js';
import { benchScriptArgs, type Fake, type Server } from './services.js';

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

/** Spawns a bench worker, sends GO after READY, resolves with its RESULT; bounded by `timeoutMs`. */
async function runWorker<T>(
  script: string,
  args: string[],
  timeoutMs: number,
  hooks: { beforeGo?: (() => Promise<void>) | undefined; afterGo?: (() => void) | undefined } = {},
): Promise<T> {
  const proc = spawnTracked(script, process.execPath, benchScriptArgs(script, args), {
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
export function cursor(): (count: number) => number {
  let next = 0;
  return (count) => {
    const start = next;
    next += Math.ceil(count / BLOCK) * BLOCK;
    return start;
  };
}

/** Warms the server up (JIT, keep-alive pools, cache) with rollouts that no measured scenario reuses. */
export async function warmUp(
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
