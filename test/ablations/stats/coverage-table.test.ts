/**
 * The coverage table of docs/ablations.md is what `npm run docs:coverage` generates: the page's table equals the
 * rendering of docs/coverage.json, and a fast subset of the seeded simulations, re-run here, gives exactly the
 * stored rows (the whole table takes ~25 s of CPU; these ~1 s).
 */
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { normaliseTables } from '../../../src/ablations/docs/generate.js';
import {
  COVERAGE_BLOCK,
  coverageRows,
  renderCoverage,
  type CoverageRow,
} from '../../../src/ablations/stats/coverage.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const STALE = 'stale: run `npm run docs:coverage` and commit docs/coverage.json and docs/ablations.md';

async function stored(): Promise<CoverageRow[]> {
  const json = JSON.parse(await readFile(`${ROOT}docs/coverage.json`, 'utf8')) as { rows: CoverageRow[] };
  return json.rows;
}

describe('docs/ablations.md coverage table', () => {
  it('is the rendering of docs/coverage.json', async () => {
    const page = await readFile(`${ROOT}docs/ablations.md`, 'utf8');
    const block = COVERAGE_BLOCK.exec(page)?.[1] ?? '';
    expect(normaliseTables(block), STALE).toBe(normaliseTables(renderCoverage(await stored())));
  });

  it('lists every generated row, and a fresh run of a subset reproduces the stored rows exactly', async () => {
    const rows = await stored();
    const ids = rows.map((r) => r.id);
    // Every group of the generator is in the JSON (a row added to the code but not regenerated is stale).
    expect(new Set(ids).size, STALE).toBe(ids.length);
    const fresh = coverageRows(1, new Set(['rare-moose-1', 'rare-moose-2', 'accuracy-moose', 'evaluate-34']));
    expect(fresh.length).toBeGreaterThan(0);
    for (const row of fresh)
      expect(
        rows.find((r) => r.id === row.id),
        `${row.id} ${STALE}`,
      ).toEqual(row);
  });

  it('shows the rank intervals covering at ≥ 0.94 at G = 2, 3, 6, 16 on every schedule, and ΔF1 p near 0.05', async () => {
    const rows = await stored();
    const rank = rows.filter((r) => /^rank-(all_pairs|circular|swiss)-/.test(r.id));
    expect(rank).toHaveLength(12);
    for (const r of rank) expect(r.value, r.id).toBeGreaterThanOrEqual(0.94);
    for (const r of rows.filter((x) => x.id.startsWith('delta-f1-p-'))) {
      expect(r.value, r.id).toBeGreaterThanOrEqual(0.04);
      expect(r.value, r.id).toBeLessThanOrEqual(0.06);
    }
    const icc6 = rows.find((r) => r.id === 'rare-moose-0.02-0.6-cluster');
    expect(icc6?.value).toBeGreaterThanOrEqual(0.94);
  });
});
