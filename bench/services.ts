/**
 * The processes a benchmark measures, on 127.0.0.1: the fake OpenAI-compatible backend (bench/fake.ts, a
 * scriptless fixed-latency judge with call counters) and the reward server (the production build, or the
 * sources through tsx), each tracked by PID (bench/procs.ts) and stopped by `stopAll`.
 */
import { closeSync, mkdtempSync, openSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { ROOT, type BenchOptions } from './options.js';
import { freePort, spawnTracked, stopProcess, waitForLine, waitHttpOk, type Spawned } from './procs.js';

/** The fake backend process: its URL, its call counters (`STATS`) and their reset. */
export interface Fake {
  proc: Spawned;
  baseURL: string;
  stats(): Promise<{ calls: number; maxInflight: number; inflight: number }>;
  reset(): void;
}

const TSX = ['--import', 'tsx'];

/** Node arguments that run the bench script `name` (bench/<name>) through tsx, then `args`. */
export function benchScriptArgs(name: string, args: readonly string[] = []): string[] {
  return [...TSX, join(ROOT, 'bench', name), ...args];
}

export async function startFake(latencyMs: number): Promise<Fake> {
  const proc = spawnTracked(
    'fake',
    process.execPath,
    benchScriptArgs('fake.ts', ['--latency-ms', String(latencyMs)]),
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

/** Stops the server (if still running) and then the fake backend. */
export async function stopAll(server: Server | undefined, fake: Fake): Promise<void> {
  if (server !== undefined) await stopProcess(server.proc, 10_000);
  fake.proc.child.stdin?.end();
  await stopProcess(fake.proc, 5_000);
}

export function makeLogDir(): string {
  return mkdtempSync(join(tmpdir(), 'reward-bench-'));
}
