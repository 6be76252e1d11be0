import { spawn } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROBE_NAMES } from '../../src/ablations/probe/catalogue.js';
import { useTempDirs } from '../support/temp-dirs.js';

const tempDir = useTempDirs('probe-');

async function cli(gates: Record<string, number | null>): Promise<{ code: number | null; out: string }> {
  const dir = await tempDir();
  const gatesPath = join(dir, 'gates.json');
  await writeFile(gatesPath, JSON.stringify(gates));
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env))
    if (v !== undefined && !k.startsWith('JUDGE_') && k !== 'REWARD_CONFIG') env[k] = v;
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      'src/ablations/probe/cli.ts',
      '--dataset',
      'datasets/sample.jsonl',
      '--graph',
      'lexical',
      '--out',
      dir,
      '--gates',
      gatesPath,
    ],
    { env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  expect(await readFile(join(dir, 'probes.json'), 'utf8')).toContain('"keyword-stuffing"');
  return { code, out };
}

describe('npm run probe', () => {
  it('exits 1 when a gate is exceeded and 0 when every gate passes', async () => {
    const none = Object.fromEntries(PROBE_NAMES.map((n) => [n, null]));
    const failing = await cli({ ...none, 'keyword-stuffing': 0.01 });
    expect(failing.code).toBe(1);
    expect(failing.out).toMatch(/\| keyword-stuffing \|[^\n]*\*\*FAIL\*\*/);
    // 0/48 nulls: the exact upper bound (~11% with 8 clusters) is below a 50% gate (a gate of 0 is refused).
    const passing = await cli({ ...none, 'master-key-nulls': 0.5 });
    expect(passing.code).toBe(0);
  });
});
