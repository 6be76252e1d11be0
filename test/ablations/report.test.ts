import { describe, expect, it } from 'vitest';
import { analyze } from '../../src/ablations/ablate/analysis.js';
import type { DatasetItem } from '../../src/ablations/dataset.js';
import { endpointDecimals } from '../../src/ablations/format.js';
import type { ItemRecord } from '../../src/ablations/records.js';
import { renderReport } from '../../src/ablations/ablate/report.js';
import { entry, item, record } from './helpers.js';

const verdictOf = (r: 0 | 1) => (r === 1 ? 'match' : 'no_match');
const decided = (id: string, reward: 0 | 1): ItemRecord =>
  record(id, 'ok', verdictOf(reward), 1, 'single_round', []);
const failed = (id: string): ItemRecord => record(id, 'judge_error', null, 1, 'node_failed', []);

/**
 * 100 clusters of 2 items: the a-items of clusters 0–19 are the 20 positives, the other 180 items negatives.
 * `reference` finds every positive and accepts 20 negatives (F1 0.667, accuracy 0.90); `cautious` accepts
 * only 5 positives and no negative (F1 0.40, accuracy 0.925): better accuracy, worse F1.
 */
const items: DatasetItem[] = Array.from({ length: 100 }, (_, c) => [
  item(`${c}a`, c < 20 ? 1 : 0, `gt-${c}`),
  item(`${c}b`, 0, `gt-${c}`),
]).flat();
const reference = items.map((it, i) =>
  decided(it.id, it.label === 1 || (i % 2 === 0 && i >= 40 && i < 80) ? 1 : 0),
);
const cautious = items.map((it, i) => decided(it.id, it.label === 1 && i < 10 ? 1 : 0));
// Wrong on 12 negatives of clusters 50–61 (b-items), otherwise right.
const sloppy = items.map((it, i) =>
  decided(it.id, it.label === 1 || (i % 2 === 1 && i >= 100 && i < 124) ? 1 : 0),
);

function run(outcomes: [string, readonly ItemRecord[]][]) {
  return analyze({
    items,
    datasetSha256: 'x',
    invalidLines: 0,
    entries: outcomes.map(([label], i) => entry(['default', 'single-judge', 'lexical', 'vote-3'][i]!, label)),
    outcomes: new Map(outcomes),
    seed: 1,
    backend: 'test',
    promptVersion: 'p',
    reference: 'reference',
  });
}

describe('report: paired comparison', () => {
  const results = run([
    ['reference', reference],
    ['cautious', cautious],
    ['sloppy', sloppy],
  ]);
  const md = renderReport(results);

  it('shows ΔF1 and Δaccuracy of opposite signs and labels McNemar as the test of accuracy', () => {
    const p = results.graphs[1]!.paired!;
    expect(p.rates.f1.point).toBeCloseTo(0.4 - 2 / 3, 12);
    expect(p.rates.accuracy.point).toBeCloseTo(0.925 - 0.9, 12);
    // only cautious right: the 20 negatives the reference accepted; only the reference right: 15 positives.
    expect(p.rates.mcnemar).toMatchObject({ b: 20, c: 15 });
    expect(p.rates.mcnemar.exactP).toBeGreaterThan(0.4);
    expect(md).toContain("McNemar's tests are tests of **accuracy**");
    expect(md).toMatch(/\| graph \| n \| ΔF1 \[95% CI\] \| ΔF1 p \(Holm\) \|/);
    expect(md).toMatch(
      /\| graph \| Δaccuracy \[95% CI\] \| b \/ c \| McNemar exact p \(Holm\) \| clustered McNemar p \(Holm\) \| sign \|/,
    );
    expect(md).toMatch(/\| cautious \| 0\.025 \[[^\n]*\| 20 \/ 15 \| [^\n]*\| opposite to ΔF1 \|/);
    expect(md).toMatch(/\| cautious \| 200 \| -0\.267 \[/);
  });

  it('adjusts p-values across the comparisons with Holm, as by hand', () => {
    const [c, s] = [results.graphs[1]!.paired!, results.graphs[2]!.paired!];
    for (const test of ['f1', 'precision', 'recall'] as const) {
      const raw = [c.rates[test].p!, s.rates[test].p!];
      const [lo, hi] = [...raw].sort((x, y) => x - y) as [number, number];
      const first = Math.min(1, 2 * lo);
      const second = Math.max(first, Math.min(1, hi));
      const expected = raw[0] === lo ? [first, second] : [second, first];
      expect([c.holm[test], s.holm[test]]).toEqual(expected.map((x) => expect.closeTo(x, 12)));
    }
    const exact = [c.rates.mcnemar.exactP, s.rates.mcnemar.exactP];
    expect(Math.min(c.holm.mcnemarExact!, s.holm.mcnemarExact!)).toBeCloseTo(
      Math.min(1, 2 * Math.min(...exact)),
      12,
    );
  });

  it('prints the paired jackknife-t endpoints (deterministic: no Monte-Carlo error) to 3 decimals', () => {
    const ci = results.graphs[1]!.paired!.rates.f1.ci;
    expect(ci.method).toBe('jackknife-t');
    expect(ci.mcError).toBe(0);
    const digits = endpointDecimals(ci);
    expect(digits).toBe(3);
    const cell = md.match(/\| cautious \| 200 \| -0\.267 \[([^,\]]+), ([^\]]+)\]/)!;
    expect(cell[1]!.split('.')[1]).toHaveLength(digits);
    expect(cell[2]!.split('.')[1]).toHaveLength(digits);
  });
});

describe('report: three views of failures', () => {
  // `flaky` fails exactly where the reference is wrong (the 20 accepted negatives): failures track difficulty.
  const flaky = reference.map((r, i) => (r.reward === 1 && items[i]!.label === 0 ? failed(r.item) : r));
  const results = run([
    ['reference', reference],
    ['flaky', flaky],
  ]);

  it('complete-case flatters a graph whose failures track difficulty; common items and failure-as-wrong do not', () => {
    const v = results.graphs[1]!.views;
    expect(v.complete.n).toBe(180);
    expect(v.complete.point.f1).toBe(1);
    expect(results.commonItems).toBe(180);
    expect(v.common.point.f1).toBe(1);
    expect(results.graphs[0]!.views.common.point.f1).toBe(1); // the reference on the same 180 items
    expect(v.failureAsWrong.n).toBe(200);
    expect(v.failureAsWrong.point.f1).toBeCloseTo(2 / 3, 12);
    const md = renderReport(results);
    expect(md).toContain('## Failures: three views');
    expect(md).toMatch(/\| flaky \| 180 \| 1\.000 \[[^\n]*\| 200 \| 0\.667 \[/);
    expect(md).toContain('Failures that track difficulty flatter the complete-case view');
    expect(results.graphs[1]!.failure).toMatchObject({ hits: 20, trials: 200 });
  });
});
