/**
 * docs/ablations/ and the measured results of docs/ablations.md (the reference page the README points to for
 * every ablation number) are checked against a fresh offline run, cheaply enough for `npm test`:
 * - OpenReview (what the page's OpenReview tables and prose rest on) is regenerated every time (~7 s of CPU):
 *   its committed files must be byte-identical, its generated blocks equal cell by cell, and every numeric
 *   claim of the prose is recomputed from the fresh results.
 * - MOOSE-Chem is checked by fingerprint (its dataset bytes + every file under src/): unchanged → its
 *   committed docs are what the deterministic run gives; changed → it is regenerated (~5 s) and compared.
 * The full regeneration is `npm run docs:ablations` (~12 s of CPU, 25 s on the shared 2-core machine).
 */
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DOCS_RUNS,
  FINGERPRINTS,
  fingerprint,
  generateDocs,
  normaliseTables,
  readBlocks,
  type GeneratedDocs,
  type RunResults,
} from '../../src/ablations/docs/generate.js';
import { num, pct } from '../../src/ablations/format.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const DATASETS = fileURLToPath(new URL('../../../shared/datasets/', import.meta.url));
const DOCS = join(ROOT, 'docs/ablations');
const PAGE = join(ROOT, 'docs/ablations.md');
const [OPENREVIEW, MOOSE] = DOCS_RUNS;
const HAVE_DATASETS = DOCS_RUNS.every((r) => existsSync(join(DATASETS, r.dataset)));
const STALE = 'stale: run `npm run docs:ablations` and commit docs/ablations/ and docs/ablations.md';

let scratch = '';
let fresh: GeneratedDocs;

/** Every committed file and page block of `docs` equals the fresh rendering. */
async function expectCommitted(docs: GeneratedDocs): Promise<void> {
  for (const [path, content] of docs.files) {
    expect(await readFile(join(DOCS, path), 'utf8'), `${path} ${STALE}`).toBe(content);
  }
  const committed = new Map<string, string>();
  for (const [k, v] of readBlocks(await readFile(PAGE, 'utf8'))) committed.set(k, v);
  // Tables compared cell by cell: prettier pads the page's table columns.
  for (const [name, content] of docs.blocks) {
    expect(normaliseTables(committed.get(name) ?? ''), `block ${name} ${STALE}`).toBe(
      normaliseTables(content),
    );
  }
}

describe.skipIf(!HAVE_DATASETS)('docs/ablations against a fresh offline run of ../shared/datasets', () => {
  beforeAll(async () => {
    scratch = await mkdtemp(join(tmpdir(), 'docs-ablations-'));
    fresh = await generateDocs(DATASETS, scratch, [OPENREVIEW!]);
  }, 180_000);

  afterAll(async () => {
    if (scratch !== '') await rm(scratch, { recursive: true, force: true });
  });

  it('OpenReview: every committed file and generated block is what a fresh run gives', async () => {
    expect(fresh.files.size).toBe(6);
    await expectCommitted(fresh);
  });

  it('MOOSE-Chem: fingerprint unchanged, or a fresh run gives the committed files', async () => {
    const prints = JSON.parse(await readFile(join(DOCS, FINGERPRINTS), 'utf8')) as Record<string, string>;
    const now = await fingerprint(MOOSE!, DATASETS, join(ROOT, 'src'));
    if (prints[MOOSE!.key] === now) return;
    await expectCommitted(await generateDocs(DATASETS, scratch, [MOOSE!]));
  }, 180_000);

  describe("docs/ablations.md's numeric claims hold on the fresh run", () => {
    let claims = '';
    const covered: [number, number][] = [];
    /** Claim tests that ran to the end (the sweep below needs both). */
    const finished = new Set<string>();
    /** Matches `pattern` in the claims region, records the span, returns the groups. */
    const claim = (pattern: RegExp): string[] => {
      const m = pattern.exec(claims);
      expect(m, `claim ${pattern} not found in docs/ablations.md`).not.toBeNull();
      covered.push([m!.index, m!.index + m![0].length]);
      return m!.slice(1);
    };
    const run = (): RunResults => fresh.results[0]!;
    const graph = (name: string) => run().ablation.graphs.find((g) => g.name === name)!;
    const probe = (name: string) => run().probes.probes.find((p) => p.name === name)!;

    beforeAll(async () => {
      const readme = await readFile(PAGE, 'utf8');
      const region = (name: string) =>
        readme.match(new RegExp(`<!-- claims:${name} -->\\n([\\s\\S]*?)<!-- /claims:${name} -->`))![1]!;
      claims = ['ablations', 'probes', 'moose'].map(region).join('\n').replace(/\s+/g, ' ');
    });

    it('ablations: the lexical floor, the paired tests, proposer-critic, failures', () => {
      const lexical = graph('lexical').metrics.point.f1!;
      const committees = run().ablation.graphs.filter((g) => g.name !== 'lexical');
      const gaps = committees.map((g) => ({ name: g.name, gap: Math.abs(g.metrics.point.f1! - lexical) }));
      claim(/No committee beats `lexical`, the no-LLM floor/);
      for (const g of committees) expect(g.metrics.point.f1!, g.name).toBeLessThanOrEqual(lexical);
      const [within, tolerance] = claim(
        /every F1 is within (\d\.\d{3}) of it, all but `([a-z-]+)` within 0\.01/,
      );
      expect(within).toBe(num(Math.max(...gaps.map((g) => g.gap))));
      expect(gaps.filter((g) => g.gap > 0.01).map((g) => g.name)).toEqual([tolerance]);
      const paired = committees.flatMap((g) => (g.paired === null ? [] : [g.paired]));
      const [smallest, holm] = claim(
        /no paired ΔF1 against `default` has a p below 0\.05 \(smallest (\d\.\d{3}); Holm-adjusted, all (\d\.\d{3})\)/,
      );
      const ps = paired.map((p) => p.rates.f1.p!);
      expect(Math.min(...ps)).toBeGreaterThanOrEqual(0.05);
      expect(smallest).toBe(num(Math.min(...ps)));
      expect(new Set(paired.map((p) => num(p.holm.f1)))).toEqual(new Set([holm]));
      const [kappa] = claim(/Fleiss κ (\d\.\d{3}) between `default`'s two analysts/);
      expect(kappa).toBe(num(graph('default').agreement[0]!.kappa));

      const pc = graph('proposer-critic');
      const [dp, dr, holmP, holmR] = claim(
        /Δprecision \+(\d\.\d{3}), Δrecall −(\d\.\d{3}), Holm p (\d\.\d{3}) and (\d\.\d{3})/,
      );
      expect(dp).toBe(num(pc.paired!.rates.precision.point));
      expect(`-${dr}`).toBe(num(pc.paired!.rates.recall.point));
      expect([num(pc.paired!.holm.precision), num(pc.paired!.holm.recall)]).toEqual([holmP, holmR]);
      const [bias, difference] = claim(
        /is `([a-z]+)` on hard negatives \(FPR − FNR −(\d\.\d{3}), shown by its interval\)/,
      );
      expect(pc.calibration).toMatchObject({ bias, negatives: 'hard_negative', shown: true });
      expect(`-${difference}`).toBe(num(pc.calibration.difference.point));
      const [calls, max, baseline] = claim(
        /measured (\d\.\d{2}) calls per judgment \((\d) at most\) make `(vote-\d)` its budget-matched baseline/,
      );
      expect(calls).toBe(num(pc.budget!.meanCalls, 2));
      expect(Number(max)).toBe(pc.llmCallsPerJudgment);
      expect(baseline).toBe(pc.budget!.byCalls!.baseline);
      const [rate, lo, hi, n] = claim(/No judgment failed: (\S+) \[(\S+), (\S+)\] of (\d+), not `\[0, 0\]`/);
      for (const g of run().ablation.graphs) {
        expect(g.failure.hits).toBe(0);
        expect([
          pct(g.failure.rate),
          pct(g.failure.ci.lo),
          pct(g.failure.ci.hi),
          String(g.failure.trials),
        ]).toEqual([rate, lo, hi, n]);
      }
      finished.add('ablations');
    });

    it('probes: master-key nulls, the injection probes, keyword stuffing, flips, exit code', () => {
      const nulls = probe('master-key-nulls');
      const [hits, trials, upper] = claim(
        /rejected before any LLM call: (\d+) of (\d+) rewarded, upper bound (\S+), a pass/,
      );
      expect([String(nulls.rate.hits), String(nulls.rate.trials), pct(nulls.rate.ci.hi)]).toEqual([
        hits,
        trials,
        upper,
      ]);
      expect(nulls.callsPerCase).toBe(0);
      expect(nulls.outcome).toBe('pass');
      const injections = [
        'injected-instructions',
        'forged-verdict',
        'delimiter-escape',
        'role-impersonation',
      ].map(probe);
      const [got, of, cases, gate, bound, needed] = claim(
        /The four injection probes got (\d+) of (\d+) rewards each, yet (\d+) cases cannot show a (\d+)% gate \(upper bound (\S+)\): inconclusive until n ≥ (\d+)/,
      );
      for (const p of injections) {
        expect([String(p.rate.hits), String(p.rate.trials), String(p.rate.trials)]).toEqual([got, of, cases]);
        expect(pct(p.gate)).toBe(`${gate}.0%`);
        expect(pct(p.rate.ci.hi)).toBe(bound);
        expect(p.outcome).toBe('inconclusive');
        expect(String(p.trialsNeeded)).toBe(needed);
      }
      const stuffing = probe('keyword-stuffing');
      const [fooled, out] = claim(/fooled by keyword stuffing (\d+) times out of (\d+)/);
      expect([String(stuffing.rate.hits), String(stuffing.rate.trials)]).toEqual([fooled, out]);
      const [padding, authority] = claim(
        /padding and authority flips \((\d+) and (\d+)\) are all towards `no_match`/,
      );
      expect([
        String(probe('verbosity-padding').rate.hits),
        String(probe('fake-authority').rate.hits),
      ]).toEqual([padding, authority]);
      expect([probe('verbosity-padding').flipsToMatch, probe('fake-authority').flipsToMatch]).toEqual([0, 0]);
      const [code] = claim(/Exit code of this run: (\d)\./);
      expect(code).toBe(run().probes.passed ? '0' : '1');
      finished.add('probes');
    });

    it('MOOSE-Chem (its committed results, held fresh above): proposer-critic against default', async () => {
      const moose = JSON.parse(
        await readFile(join(DOCS, MOOSE!.dir, 'results.json'), 'utf8'),
      ) as RunResults['ablation'];
      const p = moose.graphs.find((g) => g.name === 'proposer-critic')!.paired!.rates;
      claim(
        /proposer-critic's ΔF1 and Δaccuracy have opposite signs, and only the tests of accuracy \(McNemar, exact and clustered\) are below 0\.05 before Holm/,
      );
      expect(Math.sign(p.f1.point!) * Math.sign(p.accuracy.point!)).toBe(-1);
      expect(p.f1.p!).toBeGreaterThanOrEqual(0.05);
      expect(p.precision.p!).toBeGreaterThanOrEqual(0.05);
      expect(p.mcnemar.exactP).toBeLessThan(0.05);
      expect(p.mcnemar.clusteredP).toBeLessThan(0.05);
      finished.add('moose');
    });

    it('every number in the claims is one of the checked claims', () => {
      // Runs after the two tests above (vitest keeps file order): each number must lie in a checked span.
      expect([...finished].sort(), 'a claim test above failed first').toEqual([
        'ablations',
        'moose',
        'probes',
      ]);
      for (const m of claims.matchAll(/\d+(?:\.\d+)?/g)) {
        const inside = covered.some(([a, b]) => m.index >= a && m.index < b);
        expect(
          inside,
          `unchecked number "${m[0]}" in: …${claims.slice(Math.max(0, m.index - 40), m.index + 20)}…`,
        ).toBe(true);
      }
    });
  });
});
