import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { useTempDirs } from '../support/temp-dirs.js';

const tempDir = useTempDirs('cli-evaluate-');

async function evaluate(
  extra: string[] = [],
): Promise<{ code: number | null; stdout: string; stderr: string; dir: string }> {
  const dir = await tempDir();
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && !k.startsWith('JUDGE_') && k !== 'REWARD_CONFIG') env[k] = v;
  }
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      'src/ablations/evaluate/cli.ts',
      '--input',
      'datasets/ideas-sample.jsonl',
      '--out',
      dir,
      ...extra,
    ],
    { env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  return { code, stdout, stderr, dir };
}

describe('npm run evaluate (CLI, offline backend)', () => {
  it('runs the sample end to end and prints the Table-2 markdown', async () => {
    const { code, stdout, stderr, dir } = await evaluate();
    expect(code, stderr).toBe(0);
    expect(stderr).toMatch(/backend: offline/);
    expect(stdout).toMatch(/^\| system \| ideas \| novelty \(abs\) \| novelty \(pair\) \|/m);
    expect(stdout).toMatch(/^\| rl-debate \| 4 \| /m);
    const results = JSON.parse(await readFile(join(dir, 'results.json'), 'utf8'));
    expect(results.cost.pairwise.calls).toBe(4 * 3 * 3 * 2);
  });

  it('--limit N judges only the first N questions, each with all its ideas (issue 40 item 6)', async () => {
    const { code, stdout, stderr, dir } = await evaluate(['--limit', '1']);
    expect(code, stderr).toBe(0);
    expect(stderr).toMatch(/ideas: 3 · questions: 1 /);
    expect(stdout).toMatch(/^\| rl-debate \| 1 \| /m);
    const results = JSON.parse(await readFile(join(dir, 'results.json'), 'utf8'));
    expect(results.cost.pairwise.calls).toBe(1 * 3 * 3 * 2);
    const bad = await evaluate(['--limit', 'x']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/--limit/);
  });
});
