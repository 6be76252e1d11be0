/**
 * Scale-out benchmark (issue 12), every part a separate process on 127.0.0.1 (fake backend, servers,
 * load generator, redis-server):
 *
 *   npm run build && npx tsx bench/scaleout.ts            # 3 runs, ~4 min → bench/results/<date>-scaleout.md
 *   npx tsx bench/scaleout.ts --quick                      # 1 short run, prints only
 *
 * (a) WORKERS=1 vs WORKERS=2 on this machine: /get_reward per rollout (256 in flight) and /v1/reward groups,
 *     judgments/s, server CPU per judgment (primary + workers), peak RSS per worker; the floor client
 *     (bench/floor.ts: the same backend calls with no server) measured in the same run is the limit.
 * (b) Two replicas sharing Redis: a block of groups judged on A, then on B (backend calls on B, cached
 *     share, B's rate vs A's own LRU replay); a burst of duplicates split across A and B (backend calls
 *     vs unique judgments, and the same burst on two replicas without Redis); JUDGE_RPM shared by both
 *     (combined calls per minute vs the limit, and without Redis).
 * Options: --part all|workers|replicas, --runs N --judgments N --latency-ms L --wait-quiet S (wait up to S s for other processes to go
 * idle before each run) --out FILE (--out - : stdout only).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

import { Pool } from 'undici';

import { startRedis, type RedisServer } from '../test/fakes/redis.js';
import { BLOCK, loadCorpus, rolloutBody, type Corpus } from './data.js';
import { sumMetric, waitQuiet } from './measure.js';
import { DEFAULT_OPTIONS, ROOT, type BenchOptions } from './options.js';
import { runFloor, runScenario, type ScenarioResult } from './scenarios.js';
import { makeLogDir, startFake, startServer, type Server } from './services.js';
import { installCleanup, machineBusyMs, procCpuMs, procMemMb, stopProcess } from './procs.js';
import { environment } from './report.js';
import { fmt, spread, fmtSpread } from './stats.js';

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    runs: { type: 'string' },
    judgments: { type: 'string' },
    'latency-ms': { type: 'string', default: '20' },
    out: { type: 'string' },
    'wait-quiet': { type: 'string', default: '0' },
    part: { type: 'string', default: 'all' },
  },
  strict: true,
});
const quick = values.quick;
const runs = Number(values.runs ?? (quick ? 1 : 3));
const judgments = Number(values.judgments ?? (quick ? 2000 : 6000));
const latencyMs = Number(values['latency-ms']);
const log = (line: string): void => console.error(`[scaleout] ${line}`);
const rpmSeconds = quick ? 10 : 20;
const part = values.part;
if (part !== 'all' && part !== 'workers' && part !== 'replicas')
  throw new Error(`--part: all, workers or replicas`);

type Fake = Awaited<ReturnType<typeof startFake>>;

const base: BenchOptions = {
  ...DEFAULT_OPTIONS,
  latencyMs,
  judgments,
  warmupJudgments: quick ? 500 : 2000,
  maxScenarioSeconds: 60,
  log,
};

/** PIDs of a process and its children (the cluster workers of a primary). */
function tree(pid: number): number[] {
  let children: number[] = [];
  try {
    children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter((s) => s !== '')
      .map(Number);
  } catch {
    // gone
  }
  return [pid, ...children.flatMap((c) => tree(c))];
}
const treeCpuMs = (pid: number): number => tree(pid).reduce((sum, p) => sum + safe(() => procCpuMs(p)), 0);
const safe = (f: () => number): number => {
  try {
    return f();
  } catch {
    return 0;
  }
};

/** One request per new connection, until `n` distinct worker pids answered /readyz (bounded). */
async function waitWorkers(url: string, n: number): Promise<void> {
  const pids = new Set<number>();
  for (let i = 0; i < 200 && pids.size < n; i++) {
    const body = await new Promise<string>((resolve, reject) => {
      const req = httpRequest(`${url}/readyz`, { agent: false }, (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve(text));
      });
      req.on('error', reject);
      req.end();
    });
    const pid: unknown = JSON.parse(body).process?.pid;
    if (typeof pid === 'number') pids.add(pid);
    if (pids.size < n) await new Promise((r) => setTimeout(r, 50));
  }
  if (pids.size < n) throw new Error(`only ${pids.size} of ${n} workers answered`);
}

// ---------------------------------------------------------------- (a) 1 vs 2 workers

interface WorkersRun {
  workers: number;
  rollouts: ScenarioResult;
  groups: ScenarioResult;
  /** Primary + workers, ms per rewarded judgment, rollouts scenario. */
  cpuMsPerJudgment: number;
  cores: number;
  peakRssMbPerWorker: number[];
  floorJudgmentsPerSecond: number;
  otherCores: number;
}

async function workersRun(workers: number, index: number): Promise<WorkersRun> {
  const fake = await startFake(latencyMs);
  const logDir = makeLogDir();
  let server: Server | undefined;
  try {
    const floor = await runFloor(base, fake, {
      start: 900_000 + index * judgments,
      count: judgments,
      concurrency: base.inflight,
      groupSize: 1,
      maxSeconds: 60,
      warmup: base.warmupJudgments,
    });
    server = await startServer({ ...base, serverEnv: { WORKERS: String(workers) } }, fake, logDir);
    await waitWorkers(server.url, workers);
    await runScenario(base, server, fake, {
      name: 'warm-up',
      mode: 'rollouts',
      start: 0,
      count: base.warmupJudgments,
      concurrency: base.inflight,
      maxSeconds: 60,
    });
    const cpu0 = treeCpuMs(server.proc.pid);
    const busy0 = machineBusyMs();
    const t0 = performance.now();
    const rollouts = await runScenario(base, server, fake, {
      name: 'rollouts',
      mode: 'rollouts',
      start: 100_000,
      count: judgments,
      concurrency: base.inflight,
      maxSeconds: 60,
    });
    const wall = performance.now() - t0;
    const cpu = treeCpuMs(server.proc.pid) - cpu0;
    const busy = machineBusyMs() - busy0;
    const groups = await runScenario(base, server, fake, {
      name: 'groups',
      mode: 'groups',
      start: 300_000,
      count: judgments,
      concurrency: Math.floor(base.inflight / base.groupSize),
      maxSeconds: 60,
    });
    const pids = tree(server.proc.pid).slice(workers > 1 ? 1 : 0);
    return {
      workers,
      rollouts,
      groups,
      cpuMsPerJudgment: cpu / rollouts.load.rewarded,
      cores: cpu / wall,
      peakRssMbPerWorker: pids.map((p) => safe(() => procMemMb(p).hwmMb)),
      floorJudgmentsPerSecond: floor.judgmentsPerSecond,
      otherCores: Math.max(0, busy - cpu - rollouts.fakeCores * wall - rollouts.loadCores * wall) / wall,
    };
  } finally {
    if (server !== undefined) await stopProcess(server.proc, 15_000);
    fake.proc.child.stdin?.end();
    await stopProcess(fake.proc, 5_000);
  }
}

// ---------------------------------------------------------------- (b) replicas sharing Redis

async function replicas(fake: Fake, env: Record<string, string>, logDir: string): Promise<[Server, Server]> {
  const a = await startServer({ ...base, serverEnv: env }, fake, logDir);
  const b = await startServer({ ...base, serverEnv: env }, fake, logDir);
  return [a, b];
}

/** `bodies` (`unique` rollouts, then the same again, …) sent all at once to A and B; the statuses. */
async function burst(servers: Server[], bodies: string[], unique: number): Promise<number[]> {
  const pools = servers.map((s) => new Pool(s.url, { connections: 256 }));
  try {
    return await Promise.all(
      bodies.map(async (body, i) => {
        // Copy c of every rollout goes to replica c % 2: each rollout reaches both replicas.
        const copy = Math.floor(i / unique);
        const res = await pools[copy % pools.length]!.request({
          method: 'POST',
          path: '/get_reward',
          headers: { 'content-type': 'application/json' },
          body,
        });
        await res.body.dump();
        return res.statusCode;
      }),
    );
  } finally {
    await Promise.all(pools.map((p) => p.close()));
  }
}

/** Keeps `inflight` rollouts in flight against each server for `seconds`; returns backend calls/min. */
async function rpmWindow(servers: Server[], fake: Fake, corpus: Corpus, seconds: number): Promise<number> {
  const pools = servers.map((s) => new Pool(s.url, { connections: 64 }));
  let stop = false;
  let k = 700_000;
  const loops = pools.flatMap((pool) =>
    Array.from({ length: 32 }, async () => {
      for (let i = 0; i < 100_000 && !stop; i++) {
        try {
          const res = await pool.request({
            method: 'POST',
            path: '/get_reward',
            headers: { 'content-type': 'application/json' },
            body: rolloutBody(corpus, k++),
          });
          await res.body.dump();
        } catch {
          // the servers are stopped under the loops at the end of the window
        }
      }
    }),
  );
  await new Promise((r) => setTimeout(r, 3000)); // past the initial burst
  const c0 = (await fake.stats()).calls;
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const calls = (await fake.stats()).calls - c0;
  const minutes = (performance.now() - t0) / 60_000;
  stop = true;
  await Promise.all(servers.map((s) => stopProcess(s.proc, 5_000)));
  await Promise.allSettled(loops);
  await Promise.all(pools.map((p) => p.destroy()));
  return calls / minutes;
}

interface ReplicaRun {
  computeOnA: ScenarioResult;
  onB: ScenarioResult;
  replayOnA: ScenarioResult;
  /** Redis operations of A and B that failed (timed out) and were answered from local state. */
  fallbacks: number;
  burstUnique: number;
  burstRequests: number;
  burstCallsShared: number;
  burstCallsLocal: number;
  rpmLimit: number;
  rpmShared: number;
  rpmLocal: number;
}

async function replicaRun(redis: RedisServer, index: number, corpus: Corpus): Promise<ReplicaRun> {
  const logDir = makeLogDir();
  const shared = { REDIS_URL: redis.url, REDIS_PREFIX: `bench${index}:` };
  // (1) cross-replica cache hits
  const fake = await startFake(latencyMs);
  let [a, b] = await replicas(fake, shared, logDir);
  const block = Math.ceil(Math.min(judgments, 4096) / BLOCK) * BLOCK;
  const groupsSpec = {
    mode: 'groups' as const,
    start: 500_000 + index * block,
    count: block,
    concurrency: Math.floor(base.inflight / base.groupSize),
    maxSeconds: 60,
  };
  await runScenario(base, a, fake, { ...groupsSpec, name: 'warm-a', start: 0, count: 512 });
  await runScenario(base, b, fake, { ...groupsSpec, name: 'warm-b', start: 1024, count: 512 });
  const computeOnA = await runScenario(base, a, fake, { ...groupsSpec, name: 'compute-on-a' });
  const onB = await runScenario(base, b, fake, { ...groupsSpec, name: 'cached-on-b' });
  const replayOnA = await runScenario(base, a, fake, { ...groupsSpec, name: 'replay-on-a' });
  let fallbacks = 0;
  for (const server of [a, b]) {
    const text = await (await fetch(`${server.url}/metrics`)).text();
    fallbacks += sumMetric(text, 'reward_shared_state_errors_total');
  }
  // (2) a burst of duplicates split across A and B, on fresh replicas and a fresh key namespace (the
  // corpus wraps around, so these rollouts may repeat judgments of (1))
  await Promise.all([stopProcess(a.proc, 10_000), stopProcess(b.proc, 10_000)]);
  [a, b] = await replicas(fake, { ...shared, REDIS_PREFIX: `bench-burst${index}:` }, logDir);
  const unique = 128;
  const copies = 8;
  const bodies = Array.from({ length: unique * copies }, (_, i) =>
    rolloutBody(corpus, 600_000 + index * 1000 + (i % unique)),
  );
  let c0 = (await fake.stats()).calls;
  const statuses = await burst([a, b], bodies, unique);
  if (statuses.some((s) => s !== 200))
    log(`burst: non-200 answers: ${statuses.filter((s) => s !== 200).length}`);
  const burstCallsShared = (await fake.stats()).calls - c0;
  await Promise.all([stopProcess(a.proc, 10_000), stopProcess(b.proc, 10_000)]);
  [a, b] = await replicas(fake, {}, logDir);
  c0 = (await fake.stats()).calls;
  await burst([a, b], bodies, unique);
  const burstCallsLocal = (await fake.stats()).calls - c0;
  await Promise.all([stopProcess(a.proc, 10_000), stopProcess(b.proc, 10_000)]);
  // (3) JUDGE_RPM shared by both replicas
  const rpmLimit = 1200;
  const rpmEnv = { JUDGE_RPM: String(rpmLimit), REQUEST_DEADLINE_MS: '60000' };
  const windowSeconds = rpmSeconds;
  const rpmShared = await rpmWindow(
    await replicas(fake, { ...shared, REDIS_PREFIX: `bench-rpm${index}:`, ...rpmEnv }, logDir),
    fake,
    corpus,
    windowSeconds,
  );
  const rpmLocal = await rpmWindow(await replicas(fake, rpmEnv, logDir), fake, corpus, windowSeconds);
  fake.proc.child.stdin?.end();
  await stopProcess(fake.proc, 5_000);
  return {
    computeOnA,
    onB,
    replayOnA,
    fallbacks,
    burstUnique: unique,
    burstRequests: unique * copies,
    burstCallsShared,
    burstCallsLocal,
    rpmLimit,
    rpmShared,
    rpmLocal,
  };
}

// ---------------------------------------------------------------- report

function markdown(w: WorkersRun[], r: ReplicaRun[], env: string, seconds: number): string {
  const by = (n: number) => w.filter((x) => x.workers === n);
  const med = (xs: number[], d = 0) => fmtSpread(spread(xs), d);
  const one = by(1);
  const two = by(2);
  const ratio = (pick: (x: WorkersRun) => number) => one.map((x, i) => pick(two[i] ?? x) / pick(x));
  const lines = [
    `# Scale-out benchmark (${new Date().toISOString().slice(0, 10)})`,
    '',
    `Command: \`npx tsx bench/scaleout.ts${quick ? ' --quick' : ''}\` (after \`npm run build\`); ${runs} run(s), ` +
      `${judgments} judgments per scenario, fake backend latency ${latencyMs} ms, graph analysts-2 (3 calls, ` +
      `2 on the critical path); medians (min–max). Took ${fmt(seconds)} s.`,
    '',
    env,
    '',
    '## (a) WORKERS=1 vs WORKERS=2 on this machine',
    '',
    'The load generator, the fake backend and the server share the same 2 cores, so a second worker can only',
    'take the CPU the other processes leave; "other cores" is everything else running on the machine.',
    '',
    '| | WORKERS=1 | WORKERS=2 | ratio 2/1 |',
    '|---|---|---|---|',
    `| floor client (no server), judgments/s | ${med(one.map((x) => x.floorJudgmentsPerSecond))} | ${med(two.map((x) => x.floorJudgmentsPerSecond))} | |`,
    `| /get_reward per rollout, 256 in flight, judgments/s | ${med(one.map((x) => x.rollouts.judgmentsPerSecond))} | ${med(two.map((x) => x.rollouts.judgmentsPerSecond))} | ${med(
      ratio((x) => x.rollouts.judgmentsPerSecond),
      2,
    )} |`,
    `| … as a share of the floor | ${med(
      one.map((x) => x.rollouts.judgmentsPerSecond / x.floorJudgmentsPerSecond),
      2,
    )} | ${med(
      two.map((x) => x.rollouts.judgmentsPerSecond / x.floorJudgmentsPerSecond),
      2,
    )} | |`,
    `| /v1/reward groups of 16, judgments/s | ${med(one.map((x) => x.groups.judgmentsPerSecond))} | ${med(two.map((x) => x.groups.judgmentsPerSecond))} | ${med(
      ratio((x) => x.groups.judgmentsPerSecond),
      2,
    )} |`,
    `| server CPU per judgment (primary + workers), ms | ${med(
      one.map((x) => x.cpuMsPerJudgment),
      2,
    )} | ${med(
      two.map((x) => x.cpuMsPerJudgment),
      2,
    )} | |`,
    `| server cores busy (rollouts) | ${med(
      one.map((x) => x.cores),
      2,
    )} | ${med(
      two.map((x) => x.cores),
      2,
    )} | |`,
    `| fake backend cores / load generator cores | ${med(
      one.map((x) => x.rollouts.fakeCores),
      2,
    )} / ${med(
      one.map((x) => x.rollouts.loadCores),
      2,
    )} | ${med(
      two.map((x) => x.rollouts.fakeCores),
      2,
    )} / ${med(
      two.map((x) => x.rollouts.loadCores),
      2,
    )} | |`,
    `| other processes on the machine, cores | ${med(
      one.map((x) => x.otherCores),
      2,
    )} | ${med(
      two.map((x) => x.otherCores),
      2,
    )} | |`,
    `| rollout p50 / p99 latency, ms | ${med(one.map((x) => x.rollouts.load.latency.p50))} / ${med(one.map((x) => x.rollouts.load.latency.p99))} | ${med(two.map((x) => x.rollouts.load.latency.p50))} / ${med(two.map((x) => x.rollouts.load.latency.p99))} | |`,
    `| peak RSS per worker, MB | ${med(one.flatMap((x) => x.peakRssMbPerWorker))} | ${med(two.flatMap((x) => x.peakRssMbPerWorker))} | |`,
    `| failed judgments | ${one.reduce((s, x) => s + x.rollouts.load.failed + x.groups.load.failed, 0)} | ${two.reduce((s, x) => s + x.rollouts.load.failed + x.groups.load.failed, 0)} | |`,
    '',
    '## (b) Two replicas sharing one Redis',
    '',
    '| | measured | expected |',
    '|---|---|---|',
    `| groups judged on A: backend calls per judgment | ${med(
      r.map((x) => x.computeOnA.backendCalls / x.computeOnA.load.judgments),
      2,
    )} | 3 |`,
    `| the same groups on B: backend calls | ${med(r.map((x) => x.onB.backendCalls))} | 0 |`,
    `| … items cached on B | ${med(
      r.map((x) => x.onB.load.cached / x.onB.load.judgments),
      3,
    )} | 1 |`,
    `| … B's rate (Redis hits), judgments/s | ${med(r.map((x) => x.onB.judgmentsPerSecond))} | |`,
    `| … A's own LRU replay, judgments/s | ${med(r.map((x) => x.replayOnA.judgmentsPerSecond))} | |`,
    `| Redis operations that timed out (REDIS_TIMEOUT_MS) and fell back to local state, A + B | ${med(r.map((x) => x.fallbacks))} | 0 |`,
    `| burst: ${r[0]?.burstRequests ?? 0} /get_reward requests = ${r[0]?.burstUnique ?? 0} unique rollouts × 8, alternately to A and B: backend calls | ${med(r.map((x) => x.burstCallsShared))} | ${3 * (r[0]?.burstUnique ?? 0)} (one judgment each) |`,
    `| … the same burst on two replicas without Redis | ${med(r.map((x) => x.burstCallsLocal))} | ${6 * (r[0]?.burstUnique ?? 0)} (one per replica) |`,
    `| JUDGE_RPM=${r[0]?.rpmLimit ?? 0} on both, shared: combined calls/min over ${rpmSeconds} s | ${med(r.map((x) => x.rpmShared))} | ≤ ${r[0]?.rpmLimit ?? 0} + the burst (${(r[0]?.rpmLimit ?? 0) / 60} calls) = ${(r[0]?.rpmLimit ?? 0) * (1 + 1 / rpmSeconds)} |`,
    `| … without Redis (each replica its own bucket) | ${med(r.map((x) => x.rpmLocal))} | ≈ ${2 * (r[0]?.rpmLimit ?? 0)} |`,
    '',
  ];
  return lines.join('\n');
}

async function main(): Promise<void> {
  installCleanup();
  const started = performance.now();
  const env = environment();
  const corpus = loadCorpus(base.dataset);
  const w: WorkersRun[] = [];
  for (let i = 0; i < runs && part !== 'replicas'; i++) {
    for (const n of [1, 2]) {
      const background = await waitQuiet(Number(values['wait-quiet']), log);
      log(`run ${i + 1}/${runs}: WORKERS=${n} (other processes: ${background.toFixed(2)} cores)`);
      w.push(await workersRun(n, i));
    }
  }
  const redis = await startRedis();
  const r: ReplicaRun[] = [];
  try {
    for (let i = 0; i < runs && part !== 'workers'; i++) {
      const background = await waitQuiet(Number(values['wait-quiet']), log);
      log(
        `run ${i + 1}/${runs}: two replicas sharing Redis (other processes: ${background.toFixed(2)} cores)`,
      );
      r.push(await replicaRun(redis, i, corpus));
    }
  } finally {
    await redis.stop();
  }
  const text = markdown(w, r, env, (performance.now() - started) / 1000);
  console.log(text);
  const out =
    values.out ??
    (quick ? '-' : join(ROOT, 'bench', 'results', `${new Date().toISOString().slice(0, 10)}-scaleout.md`));
  if (out !== '-') {
    writeFileSync(out, `${text}\n`);
    log(`wrote ${out}`);
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
