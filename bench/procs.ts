/**
 * Process orchestration for the benchmark: spawn children, wait for readiness, read their CPU and memory
 * from /proc, and always stop exactly the processes we started (by PID), also on error or Ctrl-C.
 */
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { createInterface } from 'node:readline';
import { setTimeout as delay } from 'node:timers/promises';

/** Ticks per second of /proc/<pid>/stat times (`getconf CLK_TCK`; 100 on every Linux we target). */
const CLK_TCK = 100;

export interface Spawned {
  name: string;
  pid: number;
  child: ChildProcess;
  /** Resolves with the exit code (or the signal name) once the process is gone. */
  exited: Promise<number | string | null>;
  /** Lines the child printed on stdout, when stdout is piped, passed to listeners. */
  onLine(listener: (line: string) => void): () => void;
}

const live = new Map<number, Spawned>();

/** Spawns a child and tracks it so that `killTracked` can reap it. `stdio[1]` piped gives `onLine`. */
export function spawnTracked(name: string, command: string, args: string[], options: SpawnOptions): Spawned {
  const child = spawn(command, args, options);
  if (child.pid === undefined) throw new Error(`${name}: spawn failed (${command})`);
  const pid = child.pid;
  const exited = new Promise<number | string | null>((resolve) => {
    child.once('exit', (code, signal) => {
      live.delete(pid);
      resolve(code ?? signal);
    });
    child.once('error', () => {
      live.delete(pid);
      resolve(null);
    });
  });
  const listeners = new Set<(line: string) => void>();
  if (child.stdout !== null) {
    const rl = createInterface({ input: child.stdout });
    rl.on('line', (line) => {
      for (const l of listeners) l(line);
    });
  }
  const spawned: Spawned = {
    name,
    pid,
    child,
    exited,
    onLine(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
  live.set(pid, spawned);
  return spawned;
}

/** Waits for a stdout line matching `pattern`; rejects on timeout or if the child exits first. */
export function waitForLine(p: Spawned, pattern: RegExp, timeoutMs: number): Promise<RegExpMatchArray> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      off();
      reject(new Error(`${p.name}: no line matching ${pattern} within ${timeoutMs} ms`));
    }, timeoutMs);
    const off = p.onLine((line) => {
      const m = pattern.exec(line);
      if (m !== null) {
        clearTimeout(timer);
        off();
        resolve(m);
      }
    });
    void p.exited.then((code) => {
      clearTimeout(timer);
      off();
      reject(new Error(`${p.name}: exited (${String(code)}) before printing ${pattern}`));
    });
  });
}

const isAlive = (p: Spawned): boolean => live.has(p.pid);

/** SIGTERM, then SIGKILL after `graceMs`; resolves once the process exited. Only ever our own PID. */
export async function stopProcess(p: Spawned, graceMs = 5_000): Promise<number | string | null> {
  if (!isAlive(p)) return p.exited;
  try {
    process.kill(p.pid, 'SIGTERM');
  } catch {
    return p.exited;
  }
  const timer = setTimeout(() => {
    if (isAlive(p)) {
      try {
        process.kill(p.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }, graceMs);
  try {
    return await p.exited;
  } finally {
    clearTimeout(timer);
  }
}

/** Children started by `spawnTracked` that have not exited yet. */
export function liveChildren(): number {
  return live.size;
}

/** SIGKILLs every child we started that is still alive (exit handler; synchronous). */
export function killTracked(): void {
  for (const p of live.values()) {
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  live.clear();
}

/** Installs exit/signal handlers that reap our children; returns an uninstaller. */
export function installCleanup(): () => void {
  const onSignal = (signal: NodeJS.Signals): void => {
    killTracked();
    process.exit(signal === 'SIGINT' ? 130 : 143);
  };
  process.on('exit', killTracked);
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return () => {
    process.off('exit', killTracked);
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  };
}

/** user+system CPU time of a live process, in ms (10 ms resolution). */
export function procCpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may contain spaces) start at field 3 (state).
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  return ((utime + stime) * 1000) / CLK_TCK;
}

/** CPU time spent by the whole machine (all processes, all cores) since boot, ms: busy = total − idle − iowait. */
export function machineBusyMs(): number {
  const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0] ?? '';
  const f = line.trim().split(/\s+/).slice(1).map(Number);
  const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
  const idle = (f[3] ?? 0) + (f[4] ?? 0);
  return ((total - idle) * 1000) / CLK_TCK;
}

/** Resident set size now and its peak (VmHWM), in MB. */
export function procMemMb(pid: number): { rssMb: number; hwmMb: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (key: string): number => {
    const m = new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status);
    return m === null ? NaN : Number(m[1]);
  };
  return { rssMb: kb('VmRSS') / 1024, hwmMb: kb('VmHWM') / 1024 };
}

/** A port that was free a moment ago on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

/** Polls `url` until it answers 2xx; bounded by `timeoutMs`; fails early if `p` exits. */
export async function waitHttpOk(url: string, timeoutMs: number, p?: Spawned): Promise<void> {
  const until = Date.now() + timeoutMs;
  let last = '';
  for (let i = 0; i < 10_000 && Date.now() < until; i++) {
    if (p !== undefined && !isAlive(p)) throw new Error(`${p.name} exited while waiting for ${url}`);
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(1_000) });
      await res.arrayBuffer();
      if (res.ok) return;
      last = `HTTP ${res.status}`;
    } catch (err) {
      last = err instanceof Error ? err.message : String(err);
    }
    await delay(100);
  }
  throw new Error(`${url} not ready within ${timeoutMs} ms (${last})`);
}
