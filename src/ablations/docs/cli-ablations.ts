/**
 * `npm run docs:ablations [-- --datasets DIR]`: regenerates docs/ablations/ and the generated blocks of
 * docs/ablations.md from a fresh offline run of ../shared/datasets (see generate.ts). Run from the repository
 * root; the npm script then formats docs/ablations.md with prettier.
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import { runMain } from '../cli-common.js';
import { DOCS_RUNS, fillBlocks, fingerprint, FINGERPRINTS, generateDocs } from './generate.js';

const DOCS = 'docs/ablations';
const PAGES = ['docs/ablations.md'];

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: { datasets: { type: 'string', default: '../shared/datasets' } },
    strict: true,
  });
  // Scratch (items.jsonl holds dataset text): under the git-ignored ablations-out/, removed afterwards.
  await mkdir('ablations-out', { recursive: true });
  const scratch = await mkdtemp(join('ablations-out', 'docs-'));
  const started = performance.now();
  try {
    const docs = await generateDocs(values.datasets, scratch);
    for (const [path, content] of docs.files) {
      const target = join(DOCS, path);
      await mkdir(dirname(target), { recursive: true });
      await writeFile(target, content);
    }
    for (const page of PAGES) await writeFile(page, fillBlocks(await readFile(page, 'utf8'), docs.blocks));
    const prints: Record<string, string> = {};
    for (const run of DOCS_RUNS) prints[run.key] = await fingerprint(run, values.datasets, 'src');
    await writeFile(join(DOCS, FINGERPRINTS), `${JSON.stringify(prints, null, 2)}\n`);
    console.error(
      `wrote ${docs.files.size + 1} files under ${DOCS}/ and the generated blocks of ${PAGES.join(', ')} in ${((performance.now() - started) / 1000).toFixed(1)} s`,
    );
    return 0;
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

runMain(main);
