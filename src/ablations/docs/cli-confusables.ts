/**
 * `npm run data:confusables`: regenerates src/text/confusables-data.ts from the vendored UTS #39 data file
 * (src/text/unicode/confusables.txt). To move to a newer Unicode version, replace the file with the one at
 * https://www.unicode.org/Public/security/<version>/confusables.txt, update CONFUSABLES_SOURCE_URL, run this,
 * and bump PREPARATION_VERSION (src/judge/candidate.ts): the folded copy the rules match on changes.
 */
import { readFile, writeFile } from 'node:fs/promises';

import { runMain } from '../cli-common.js';
import { confusablesModule, parseConfusables } from './confusables.js';

const DATA = 'src/text/unicode/confusables.txt';
const OUT = 'src/text/confusables-data.ts';

async function main(): Promise<number> {
  const text = await readFile(DATA, 'utf8');
  const table = parseConfusables(text);
  await writeFile(OUT, confusablesModule(text));
  console.error(
    `wrote ${table.entries.length} of ${table.total} mappings (Unicode ${table.version}) to ${OUT}`,
  );
  return 0;
}

runMain(main);
