/**
 * `npm run docs:coverage`: simulates every interval the tools print (src/ablations/stats/coverage.ts, seeded)
 * and writes docs/coverage.json and the coverage table of docs/ablations.md (between `<!-- coverage -->` and
 * `<!-- /coverage -->`). ~25 s of CPU. Run from the repository root; the npm script then formats the page.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { runMain } from '../cli-common.js';
import { COVERAGE_BLOCK, coverageRows, renderCoverage } from '../stats/coverage.js';

export const COVERAGE_JSON = 'docs/coverage.json';
const PAGE = 'docs/ablations.md';

async function main(): Promise<number> {
  const started = performance.now();
  const rows = coverageRows();
  await writeFile(COVERAGE_JSON, `${JSON.stringify({ v: 1, rows }, null, 2)}\n`);
  const page = await readFile(PAGE, 'utf8');
  if (!COVERAGE_BLOCK.test(page)) throw new Error(`${PAGE}: no <!-- coverage --> block`);
  await writeFile(
    PAGE,
    page.replace(COVERAGE_BLOCK, `<!-- coverage -->\n\n${renderCoverage(rows)}\n\n<!-- /coverage -->`),
  );
  console.error(
    `wrote ${rows.length} rows to ${COVERAGE_JSON} and ${PAGE} in ${((performance.now() - started) / 1000).toFixed(1)} s`,
  );
  return 0;
}

runMain(main);
