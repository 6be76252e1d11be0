/**
 * `dist/` is built at most once per `npm test`: the first suite that needs the production build (the
 * process suite `test/server/main.test.ts`, then `clients/python/run-tests.sh`) calls `ensureDist`, which
 * runs `npm run build` only when the build is missing or older than its inputs.
 *
 * Run as a script (`node --import tsx test/support/dist.ts`) it does the same and says what it did.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** tsc rewrites every output on each (non-incremental) build, so the entry point dates the whole build. */
export const DIST_ENTRY = join(ROOT, 'dist', 'server', 'main.js');
const INPUT_FILES = ['tsconfig.json', 'tsconfig.build.json', 'package-lock.json'];

function* files(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* files(path);
    else yield path;
  }
}

/** Why `dist/` must be rebuilt (a missing entry point or the first input newer than it), or null. */
export function staleReason(): string | null {
  if (!existsSync(DIST_ENTRY)) return `${relative(ROOT, DIST_ENTRY)} is missing`;
  const built = statSync(DIST_ENTRY).mtimeMs;
  const inputs = [...files(join(ROOT, 'src')), ...INPUT_FILES.map((f) => join(ROOT, f))];
  const newer = inputs.find((path) => existsSync(path) && statSync(path).mtimeMs > built);
  return newer === undefined ? null : `${relative(ROOT, newer)} is newer than the build`;
}

/** Held while one process builds; an older one is left over from a killed build. */
const LOCK = join(ROOT, '.dist-build-lock');
const STALE_LOCK_MS = 180_000;
const sleepSync = (ms: number): void => {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
};

/**
 * Builds `dist/` when it is stale; returns what it did (for the log). Throws when the build fails. Several
 * process suites run in parallel workers: the first takes a lock (an atomic mkdir) and builds, the others
 * wait for the lock to go before they look at `dist/`, so none reads a half-written build.
 */
export function ensureDist(): string {
  const until = Date.now() + STALE_LOCK_MS + 60_000;
  for (let i = 0; Date.now() < until && i < 100_000; i++) {
    if (existsSync(LOCK)) {
      if (Date.now() - statSync(LOCK).mtimeMs > STALE_LOCK_MS) rmSync(LOCK, { recursive: true, force: true });
      sleepSync(100);
      continue;
    }
    const reason = staleReason();
    if (reason === null) return 'dist/ is up to date';
    try {
      mkdirSync(LOCK);
    } catch {
      continue; // another suite took it first
    }
    try {
      execFileSync('npm', ['run', 'build', '--silent'], {
        cwd: ROOT,
        stdio: ['ignore', 'inherit', 'inherit'],
      });
    } finally {
      rmSync(LOCK, { recursive: true, force: true });
    }
    if (!existsSync(DIST_ENTRY)) throw new Error(`npm run build did not write ${relative(ROOT, DIST_ENTRY)}`);
    return `built dist/ (${reason})`;
  }
  throw new Error('timed out waiting for another suite to build dist/');
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  console.error(`dist: ${ensureDist()}`);
}
