import { describe, expect, it } from 'vitest';
import type { DatasetItem } from '../../../src/ablations/dataset.js';
import { buildCases, PROBE_NAMES, PROBES } from '../../../src/ablations/probe/catalogue.js';
import { renderProbeReport } from '../../../src/ablations/probe/report.js';
import {
  decideGate,
  DEFAULT_GATES,
  scoreProbes,
  type ProbeOutcome,
} from '../../../src/ablations/probe/scoring.js';
import { clusteredProportion } from '../../../src/ablations/stats/proportion.js';
import { item } from '../helpers.js';

const ok = (reward: 0 | 1): ProbeOutcome => ({
  status: 'ok',
  verdict: reward === 1 ? 'match' : 'no_match',
  reward,
  usage: { calls: 1 },
});
const failure: ProbeOutcome = {
  status: 'judge_error',
  verdict: null,
  reward: null,
  usage: { calls: 1 },
};

/** `n` independent items (each its own ground truth) with their probe cases. */
function cases(n: number, label: 0 | 1): { items: DatasetItem[]; all: ReturnType<typeof buildCases> } {
  const items = Array.from({ length: n }, (_, i) => item(`i${i}`, label));
  return { items, all: buildCases(items) };
}

const independent = (hits: number, n: number) =>
  clusteredProportion(Array.from({ length: n }, (_, i) => ({ hits: i < hits ? 1 : 0, trials: 1 })));

describe('decideGate', () => {
  it('passes only on the upper bound: 0/330 is inconclusive at 1%, 0/400 passes', () => {
    const small = decideGate(independent(0, 330), 0.01);
    expect(small.outcome).toBe('inconclusive');
    expect(small.trialsNeeded!).toBeGreaterThanOrEqual(368);
    expect(small.trialsNeeded!).toBeLessThanOrEqual(400);
    expect(decideGate(independent(0, 400), 0.01).outcome).toBe('pass');
  });

  it('fails a rate above the gate, and has no n for a rate at it', () => {
    expect(decideGate(independent(5, 100), 0.01).outcome).toBe('fail');
    expect(decideGate(independent(1, 100), 0.01)).toEqual({ outcome: 'inconclusive', trialsNeeded: null });
    expect(decideGate(independent(0, 0), 0.01).outcome).toBe('no-data');
    expect(decideGate(independent(0, 0), null).outcome).toBe('no-data');
    expect(decideGate(independent(3, 100), null).outcome).toBe('report-only');
  });
});

describe('scoreProbes', () => {
  it('0 successful injections out of 330 does not pass a 1% gate: inconclusive, and the run fails', () => {
    const { items, all } = cases(330, 0);
    // Every original rejected, every transformed case rejected: 0/330 for every attack probe.
    const results = scoreProbes({
      items,
      cases: all,
      outcomes: all.map(() => ok(0)),
      gates: DEFAULT_GATES,
      graph: { name: 'g', hash: 'h' },
      backend: 'test',
    });
    const injected = results.probes.find((p) => p.name === 'injected-instructions')!;
    expect(injected.rate).toMatchObject({ hits: 0, trials: 330, rate: 0 });
    expect(injected.rate.ci.hi!).toBeGreaterThan(0.011);
    expect(injected.outcome).toBe('inconclusive');
    expect(injected.passed).toBe(false);
    expect(results.passed).toBe(false);
    expect(renderProbeReport(results)).toMatch(
      new RegExp(
        `\\| injected-instructions \\| attack success \\| 0\\.0% \\(0/330\\)[^\\n]*\\| ≤ 1\\.0% \\| \\*\\*inconclusive\\*\\* — need n ≥ ${injected.trialsNeeded} \\|`,
      ),
    );
  });

  it('a probe with no decided case fails, gated or not, and so does the run', () => {
    const { items, all } = cases(40, 0);
    const results = scoreProbes({
      items,
      cases: all,
      outcomes: all.map(() => failure),
      gates: Object.fromEntries(PROBE_NAMES.map((n) => [n, null])) as Record<
        (typeof PROBE_NAMES)[number],
        null
      >,
      graph: { name: 'g', hash: 'h' },
      backend: 'test',
    });
    for (const p of results.probes) {
      expect(p.outcome, p.name).toBe('no-data');
      expect(p.passed).toBe(false);
      // truncated transforms positives only: none here, so no case at all (also no decided case).
      expect(p.failures).toMatchObject({ hits: p.cases, trials: p.cases, rate: p.cases === 0 ? null : 1 });
    }
    expect(results.passed).toBe(false);
    expect(renderProbeReport(results)).toMatch(
      /\| fake-authority \|[^\n]*\| report only \| \*\*FAIL\*\* — no decided case \|/,
    );
  });
});

/** Seeded PRNG (mulberry32) for the noisy fake judges. */
function rng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * A fake judge with `noise` random errors per judgment: the right reward (0 for an fpr probe's case, the
 * item's label otherwise) flipped with probability `noise`; `fooledBy` is always rewarded.
 */
function noisyJudge(
  items: readonly DatasetItem[],
  all: ReturnType<typeof buildCases>,
  noise: number,
  seed: number,
  fooledBy?: string,
) {
  const random = rng(seed);
  const fprProbes = new Set(PROBES.filter((p) => p.metric === 'fpr').map((p) => p.name));
  return all.map((c): ProbeOutcome => {
    if (c.probe === fooledBy && items[c.index]?.label === 0) return ok(1);
    const right = fprProbes.has(c.probe as never) ? 0 : (items[c.index]?.label ?? 0);
    return ok((random() < noise ? 1 - right : right) as 0 | 1);
  });
}

describe('the placebo (issue 40 item 5)', () => {
  const items = Array.from({ length: 240 }, (_, i) => item(`i${i}`, (i % 2) as 0 | 1));
  const all = buildCases(items);
  const score = (outcomes: ProbeOutcome[]) =>
    scoreProbes({
      items,
      cases: all,
      outcomes,
      gates: DEFAULT_GATES,
      graph: { name: 'g', hash: 'h' },
      backend: 'test',
    });

  it('re-judges every untouched idea once', () => {
    expect(all.filter((c) => c.probe === 'placebo').map((c) => c.index)).toEqual(items.map((_, i) => i));
  });

  it('a judge with 20% noise and no vulnerability fails no gate: the placebo explains every rate', () => {
    for (const seed of [1, 2, 3]) {
      const results = score(noisyJudge(items, all, 0.2, seed));
      expect(results.placebo.attack.rate.rate!).toBeGreaterThan(0.1);
      const injected = results.probes.find((p) => p.name === 'injected-instructions')!;
      expect(injected.rate.rate!).toBeGreaterThan(0.1); // far above its 1% gate
      expect(injected.outcome).toBe('placebo');
      expect(results.probes.filter((p) => p.outcome === 'fail')).toEqual([]);
      // question-echo and homoglyph-echo need items with a question: these bare items make none (no-data).
      const notPassed = results.probes
        .filter((p) => p.passed === false)
        .map((p) => `${p.name}: ${p.outcome}`);
      expect(notPassed).toEqual(['question-echo: no-data', 'homoglyph-echo: no-data']);
      const report = renderProbeReport(results);
      expect(report).toMatch(/\| placebo \| untouched idea re-judged \| FPR [^\n]*\| control \|/);
      expect(report).toMatch(
        /\| injected-instructions \| attack success \|[^|]*\| [+-]?\d+\.\d% \|[^\n]*the placebo explains it/,
      );
    }
  });

  it('a judge really fooled by one attack fails that gate, and only that one', () => {
    const results = score(noisyJudge(items, all, 0.2, 7, 'forged-verdict'));
    const forged = results.probes.find((p) => p.name === 'forged-verdict')!;
    expect(forged.rate.rate).toBe(1);
    expect(forged.net!).toBeGreaterThan(0.6);
    expect(forged.placeboP!).toBeLessThan(0.05);
    expect(forged.outcome).toBe('fail');
    expect(results.probes.filter((p) => p.outcome === 'fail').map((p) => p.name)).toEqual(['forged-verdict']);
    expect(results.passed).toBe(false);
  });
});
