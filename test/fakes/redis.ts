/**
 * A real `redis-server` (Debian package) for tests: its own loopback port and temp dir, no persistence,
 * stopped by PID. Suites wrap themselves in `describeRedis`: without redis-server they are skipped with a
 * loud warning, except under CI=true, where a missing redis-server fails (`.ci/run` installs it).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { describe, it } from 'vitest';

import { freePort } from '../../bench/procs.js';

export const HAS_REDIS = spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;

/** `describe` that needs redis-server (see the file comment). */
export function describeRedis(name: string, body: () => void): void {
  if (HAS_REDIS) {
    describe(name, body);
  } else if (process.env['CI'] === 'true') {
    describe(name, () => {
      it('needs redis-server (apt-get install -y redis-server; .ci/run does it)', () => {
        throw new Error('redis-server is not installed and CI=true');
      });
    });
  } else {
    console.warn(
      `\n!!! SKIPPED "${name}": redis-server is not installed (apt-get install -y redis-server)\n`,
    );
    describe.skip(name, body);
  }
}

export interface RedisServer {
  url: string;
  port: number;
  readonly pid: number;
  /** Kills the server (SIGKILL by default) and waits for it to exit. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Starts it again on the same port (after `kill`). */
  restart(): Promise<void>;
  /** Pauses / resumes the process (a hung Redis: connected, never answering). */
  pause(): void;
  resume(): void;
  /** Kills it and removes its directory. */
  stop(): Promise<void>;
}

function launch(port: number, dir: string): Promise<ChildProcess> {
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`redis-server did not start on ${port}: ${out}`));
    }, 10_000);
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('Ready to accept connections')) {
        clearTimeout(timer);
        resolve(child);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`redis-server exited (${code}) before it was ready: ${out}`));
    });
  });
}

export async function startRedis(): Promise<RedisServer> {
  const dir = mkdtempSync(join(tmpdir(), 'redis-test-'));
  const port = await freePort();
  let child = await launch(port, dir);
  // If the suite dies before its afterAll, do not leave the server running (our own PID only).
  const reap = (): void => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  };
  process.once('exit', reap);
  const kill = async (signal: NodeJS.Signals = 'SIGKILL'): Promise<void> => {
    const c = child;
    if (c.exitCode !== null || c.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => c.once('exit', () => resolve()));
    if (c.pid !== undefined) process.kill(c.pid, 'SIGCONT');
    c.kill(signal);
    await exited;
  };
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    get pid() {
      return child.pid ?? -1;
    },
    kill,
    async restart() {
      child = await launch(port, dir);
    },
    pause() {
      if (child.pid !== undefined) process.kill(child.pid, 'SIGSTOP');
    },
    resume() {
      if (child.pid !== undefined) process.kill(child.pid, 'SIGCONT');
    },
    async stop() {
      await kill('SIGKILL');
      process.off('exit', reap);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
