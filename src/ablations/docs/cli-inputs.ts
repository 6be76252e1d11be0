/**
 * `npm run docs:inputs`: writes the reasoning-format table (between `<!-- reasoning-formats -->` and
 * `<!-- /reasoning-formats -->`) and the false-rejection table (`<!-- false-rejections -->`) of
 * docs/inputs.md, from src/text/reasoning-formats.ts and a measurement over ../shared/datasets/*.jsonl and
 * datasets/legit-corpus.jsonl. Run from the repository root; the npm script then formats the page.
 */
import { readFile, writeFile } from 'node:fs/promises';

import { runMain } from '../cli-common.js';
import {
  falseRejections,
  INPUTS_PAGE as PAGE,
  legitTexts,
  markdownTable,
  renderFalseRejections,
  renderFormats,
  replaceBlock,
  SHARED_SETS,
} from './inputs.js';

async function main(): Promise<number> {
  const sets: Array<[string, string]> = [];
  for (const name of SHARED_SETS)
    sets.push([name, await readFile(`../shared/datasets/${name}.jsonl`, 'utf8')]);
  const texts = legitTexts(sets, await readFile('datasets/legit-corpus.jsonl', 'utf8'));
  let page = await readFile(PAGE, 'utf8');
  page = replaceBlock(page, 'reasoning-formats', markdownTable(renderFormats()));
  page = replaceBlock(page, 'false-rejections', markdownTable(renderFalseRejections(falseRejections(texts))));
  await writeFile(PAGE, page);
  console.error(`measured ${texts.length} texts; wrote ${PAGE}`);
  return 0;
}

runMain(main);
