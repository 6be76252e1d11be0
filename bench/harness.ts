/**
 * Benchmark orchestrator: starts the fake backend, the production server and the load generator / floor
 * client as separate processes on 127.0.0.1, runs the scenarios, and measures the server from outside
 * (/proc CPU and memory, backend calls counted by the fake). Every child is ours, tracked by PID, bounded
 * in time, and reaped on exit or error (bench/procs.ts). The parts: options.ts (what a run is),
 * services.ts (the fake and the server), scenarios.ts (load generation), measure.ts (what is read from
 * outside), report.ts (the Markdown).
 */
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

import { getPreset } from '../src/judge/presets.js';
import { BLOCK } from './data.js';
import { waitQuiet } from './measure.js';
import type { BenchOptions } from './options.js';
import { procCpuMs, procMemMb, machineBusyMs, stopProcess } from './procs.js';
import { cursor, runFloor, runScenario, warmUp, type FloorRun, type ScenarioResult } from './scenarios.js';
import { makeLogDir, startFake, startServer, stopAll, type Fake, type Server } from './services.js';
import { spread, type Spread } from './stats.js';

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

/** One repetition: floor client, then the server scenarios, each on fresh processes. */
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
    const floors = await floorRuns(options, fake, index);
    server = await startServer(options, fake, logDir);
    const scenarios = await serverScenarios(options, server, fake, index);
    const mem = procMemMb(server.proc.pid);
    return {
      backgroundCores: background,
      ...floors,
      ...scenarios,
      peakRssMb: mem.hwmMb,
      rssEndMb: mem.rssMb,
    };
  } finally {
    await stopAll(server, fake);
  }
}

/** The floor client at the scenarios' concurrency, then at the light load (one group at a time). */
async function floorRuns(
  options: BenchOptions,
  fake: Fake,
  index: number,
): Promise<Pick<RepetitionResult, 'floor' | 'floorLight'>> {
  const max = options.maxScenarioSeconds;
  const floorTake = cursor();
  options.log(
    `run ${index + 1}: floor client, ${options.judgments} judgments at ${options.inflight} in flight`,
  );
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
  return { floor, floorLight };
}

/**
 * The last completed judgments of a scenario that still fit in the cache (all hits when replayed): its
 * start and count, block-aligned from `start`, the scenario's own start.
 */
export function replayOf(
  sc: Pick<ScenarioResult, 'load'>,
  start: number,
  options: Pick<BenchOptions, 'groupSize' | 'cacheSize'>,
): { start: number; count: number } {
  const perBlock = sc.load.mode === 'groups' ? options.groupSize : BLOCK;
  const doneBlocks = sc.load.mode === 'groups' ? sc.load.requests : Math.floor(sc.load.requests / BLOCK);
  const blocks = Math.min(doneBlocks, Math.floor(options.cacheSize / perBlock));
  return { start: start + (doneBlocks - blocks) * BLOCK, count: blocks * perBlock };
}

/** The server's scenarios after a warm-up: (a) groups, (c) their replay, (b) rollouts, (c) theirs, light load. */
async function serverScenarios(
  options: BenchOptions,
  server: Server,
  fake: Fake,
  index: number,
): Promise<Pick<RepetitionResult, 'groups' | 'groupsCached' | 'rollouts' | 'rolloutsCached' | 'light'>> {
  const { log } = options;
  const max = options.maxScenarioSeconds;
  const take = cursor();
  log(`run ${index + 1}: server pid ${server.proc.pid} at ${server.url}; warm-up`);
  await warmUp(options, server, fake, take, max);

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
    ...replayOf(groups, groupsStart, options),
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
    ...replayOf(rollouts, rolloutsStart, options),
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
  return { groups, groupsCached, rollouts, rolloutsCached, light };
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

/**
 * Samples the server's memory and every process's CPU every interval, as rates since the last sample:
 * `begin()` when the load starts, `stop()` after. Each sample is logged.
 */
function soakSampler(
  server: Server,
  fake: Fake,
  callsPerJudgment: number,
  log: (line: string) => void,
): { samples: SoakSample[]; begin(intervalSeconds: number): void; stop(): void } {
  const samples: SoakSample[] = [];
  let timer: NodeJS.Timeout | undefined;
  let t0 = 0;
  let last = { t: 0, calls: 0, cpu: 0, fakeCpu: 0, machine: 0 };
  const sample = async (): Promise<void> => {
    const t = performance.now() - t0;
    const { calls } = await fake.stats();
    const cpu = procCpuMs(server.proc.pid);
    const fakeCpu = procCpuMs(fake.proc.pid);
    const machine = machineBusyMs();
    const mem = procMemMb(server.proc.pid);
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
  return {
    samples,
    begin(intervalSeconds) {
      t0 = performance.now();
      last = {
        t: 0,
        calls: 0,
        cpu: procCpuMs(server.proc.pid),
        fakeCpu: procCpuMs(fake.proc.pid),
        machine: machineBusyMs(),
      };
      void fake.stats().then((st) => (last.calls = st.calls));
      timer = setInterval(() => void sample(), intervalSeconds * 1000);
    },
    stop: () => clearInterval(timer),
  };
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
  let sampler: ReturnType<typeof soakSampler> | undefined;
  try {
    server = await startServer(options, fake, logDir);
    const s = server;
    const take = cursor();
    await warmUp(options, s, fake, take, options.maxScenarioSeconds);
    const soak = soakSampler(s, fake, callsPerJudgment, log);
    sampler = soak;
    log(`soak: ${seconds} s of /get_reward at ${options.inflight} in flight, RSS every ${intervalSeconds} s`);
    const scenario = await runScenario(options, s, fake, {
      name: 'soak',
      mode: 'rollouts',
      start: take(0),
      count: seconds * 20_000,
      concurrency: options.inflight,
      maxSeconds: seconds,
      onStart: () => soak.begin(intervalSeconds),
    }).finally(() => soak.stop());
    const { samples } = soak;
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
    sampler?.stop();
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
