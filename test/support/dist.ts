/**
 * `dist/` is built at most once per `npm test`: the first suite that needs the production build (the
 * process suite `test/server/main.test.ts`, then `clients/python/run-tests.sh`) calls `ensureDist`, which
 * runs `npm run build` only when the build is missing or older than its inputs.
 *
 * Run as a script (`node --import tsx test/support/dist.ts`) it does the same and says what it did.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
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

/** Builds `dist/` when it is stale; returns what it did (for the log). Throws when the build fails. */
export function ensureDist(): string {
  const reason = staleReason();
  if (reason === null) return 'dist/ is up to date';
  execFileSync('npm', ['run', 'build', '--silent'], { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit'] });
  if (!existsSync(DIST_ENTRY)) throw new Error(`npm run build did not write ${relative(ROOT, DIST_ENTRY)}`);
  return `built dist/ (${reason})`;
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  console.error(`dist: ${ensureDist()}`);
}
