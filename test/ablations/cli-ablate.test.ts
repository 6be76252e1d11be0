import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli, type CliResult } from '../support/cli.js';
import { useTempDirs } from '../support/temp-dirs.js';

const tempDir = useTempDirs('cli-ablate-');

const ablate = (args: string[]): Promise<CliResult> => runCli('src/ablations/ablate/cli.ts', args);

describe('npm run ablate', () => {
  it('stops on a bad line naming line and field; --skip-invalid skips it, says so, and runs', async () => {
    const dir = await tempDir();
    const sample = (await readFile('datasets/sample.jsonl', 'utf8')).trim().split('\n').slice(0, 6);
    sample.splice(2, 0, sample[0]!.replace('"label": 1', '"label": "yes"'));
    const data = join(dir, 'data.jsonl');
    await writeFile(data, `${sample.join('\n')}\n`);
    const out = join(dir, 'out');

    const strict = await ablate(['--dataset', data, '--graphs', 'lexical', '--out', out]);
    expect(strict.code).toBe(1);
    expect(strict.stderr).toContain(`${data}:3: field "label"`);

    const lenient = await ablate([
      '--dataset',
      data,
      '--graphs',
      'lexical',
      '--out',
      out,
      '--skip-invalid',
      '--reference',
      'none',
    ]);
    expect(lenient.code).toBe(0);
    expect(lenient.stderr).toMatch(/skipped .*data\.jsonl:3: field "label"/);
    expect(lenient.stderr).toMatch(/backend: offline/);
    expect(lenient.stdout).toMatch(/\| lexical \| /);
    const results = JSON.parse(await readFile(join(out, 'results.json'), 'utf8'));
    expect(results.dataset).toMatchObject({ items: 6, invalidLines: 1 });
    for (const f of ['report.md', 'timing.json', 'precision-recall.svg', 'f1-vs-tokens.svg', 'items.jsonl']) {
      expect((await readFile(join(out, f), 'utf8')).length).toBeGreaterThan(0);
    }
  });
});
