/**
 * The coverage table of docs/ablations.md: every interval the tools print, simulated from a known truth
 * (seeded, so the table is reproducible), with its scenario. `npm run docs:coverage` writes the table and
 * docs/coverage.json; test/ablations/stats/coverage-table.test.ts checks the table against the JSON and
 * re-runs a small subset. With R replications a coverage near 0.95 has Monte-Carlo error √(0.95·0.05/R).
 */
import { SCHEDULES } from '../../judge/tournament.js';
import { createRng } from '../../math/sampling.js';
import { REPORT_METHOD } from './clustered.js';
import { emptyConfusion, rates, sumConfusions, type Confusion } from './confusion.js';
import { clusteredProportion, type Tally } from './proportion.js';
import { rankCoverage } from './rank-coverage.js';
import { jackknifeInterval } from './bootstrap.js';
import { pairedRates, ratesWithCi, type PairedCluster } from './rates.js';
import { clusteredMcnemar } from './significance.js';
import { clusterRate, logistic, normal, type Rng } from './simulate.js';

export interface CoverageRow {
  /** Stable key: what the staleness test re-runs. */
  id: string;
  tool: string;
  interval: string;
  method: string;
  /** n items, clusters, ICC, prevalence, or the rank scenario. */
  scenario: string;
  replications: number;
  /** Coverage of the printed intervals (or the rejection rate, for a test's row). */
  value: number;
  /** 'coverage' or 'type-I error'. */
  measure: 'coverage' | 'type-I error';
  /** Share of replications that printed no interval (null, with its note). */
  nullShare: number;
}

const inside = (lo: number | null, hi: number | null, x: number) =>
  lo !== null && hi !== null && lo <= x && x <= hi;

export const OPENREVIEW_SIZES = [
  ...Array<number>(95).fill(1),
  ...Array<number>(152).fill(2),
  ...Array<number>(67).fill(3),
];

/** Clusters of `sizes` with event rate p (Beta-distributed per cluster at the given ICC). */
function tallies(rng: Rng, sizes: readonly number[], p: number, icc: number): Tally[] {
  return sizes.map((n) => {
    const rate = clusterRate(rng, p, icc);
    let hits = 0;
    for (let i = 0; i < n; i++) if (rng() < rate) hits++;
    return { hits, trials: n };
  });
}

/** A proportion's exact interval, and (when it reports one) its cluster-level bound. */
function proportionRows(
  id: string,
  sizes: readonly number[],
  p: number,
  icc: number,
  replications: number,
  seed: number,
): CoverageRow[] {
  const rng = createRng(seed);
  let covered = 0;
  let clusterCovered = 0;
  let clusterReported = 0;
  let nulls = 0;
  for (let r = 0; r < replications; r++) {
    const { ci } = clusteredProportion(tallies(rng, sizes, p, icc));
    if (ci.lo === null || ci.hi === null) nulls++;
    if (inside(ci.lo, ci.hi, p)) covered++;
    const bound = ci.clusterLevel ?? null;
    const lo = bound === null ? ci.lo : Math.min(ci.lo ?? 0, bound.lo);
    const hi = bound === null ? ci.hi : Math.max(ci.hi ?? 1, bound.hi);
    if (bound !== null) clusterReported++;
    if (inside(lo, hi, p)) clusterCovered++;
  }
  const n = sizes.reduce((s, x) => s + x, 0);
  const scenario = `n ${n}, ${sizes.length} clusters, ICC ${icc}, rate ${p}`;
  return [
    {
      id: `${id}-cp`,
      tool: 'ablate, probe, calibrate',
      interval: 'a rate (FPR, failure, member TPR…)',
      method: 'Clopper–Pearson on n / deff',
      scenario,
      replications,
      value: covered / replications,
      measure: 'coverage',
      nullShare: nulls / replications,
    },
    {
      id: `${id}-cluster`,
      tool: 'ablate, probe, calibrate',
      interval: `the same, with its cluster-level bound (reported in ${((100 * clusterReported) / replications).toFixed(0)}%)`,
      method: 'hull of CP and CP on clusters with an event',
      scenario,
      replications,
      value: clusterCovered / replications,
      measure: 'coverage',
      nullShare: nulls / replications,
    },
  ];
}

/**
 * MOOSE-Chem-like clusters: 8 items sharing a question, ~15% positives varying by cluster, two judges whose
 * error rates vary by cluster (random effects) and who agree on `agree` of items; b's intercept on positives
 * is `shift` below a's (b misses more; 0: the two are exchangeable), and on negatives `negativeShift` below
 * (b also accepts fewer).
 */
export function mooseCluster(rng: Rng, agree = 0.7, shift = 0.3, negativeShift = 0): PairedCluster {
  const prevalence = logistic(-2 + 1.2 * normal(rng));
  const u = 0.8 * normal(rng);
  const v = 0.8 * normal(rng);
  const a = emptyConfusion();
  const b = emptyConfusion();
  let onlyA = 0;
  let onlyB = 0;
  for (let i = 0; i < 8; i++) {
    const positive = rng() < prevalence;
    const saysA = rng() < (positive ? logistic(0.6 + u) : logistic(-1 + v));
    const saysB =
      rng() < agree
        ? saysA
        : rng() < (positive ? logistic(0.6 - shift + u) : logistic(-1 - negativeShift + v));
    const cell = (cm: Confusion, says: boolean) => {
      if (positive) cm[says ? 'tp' : 'fn']++;
      else cm[says ? 'fp' : 'tn']++;
    };
    cell(a, saysA);
    cell(b, saysB);
    if (saysA === positive && saysB !== positive) onlyA++;
    if (saysB === positive && saysA !== positive) onlyB++;
  }
  return { a, b, onlyA, onlyB };
}

function truthOf(agree: number, shift: number): { f1: number; deltaF1: number } {
  const rng = createRng(99);
  const population = Array.from({ length: 100_000 }, () => mooseCluster(rng, agree, shift));
  const a = rates(sumConfusions(population.map((c) => c.a)));
  const b = rates(sumConfusions(population.map((c) => c.b)));
  return { f1: a.f1 ?? 0, deltaF1: (a.f1 ?? 0) - (b.f1 ?? 0) };
}

/** A moderate and a small ΔF1 (F1 itself is covered under the first), and exchangeable judges. */
const F1_SCENARIOS = [
  { key: 'moderate', agree: 0.7, shift: 0.3 },
  { key: 'small', agree: 0.97, shift: 0.3 },
  { key: 'null', agree: 0.7, shift: 0 },
] as const;
type F1Scenario = (typeof F1_SCENARIOS)[number];

/** Counts over one scenario's replications: intervals covering the truth, no interval, p below 0.05. */
interface F1Counts {
  f1: number;
  f1Null: number;
  delta: number;
  deltaNull: number;
  rejected: number;
  mcnemar: number;
}

/** Draws `reps` samples of `clusters` MOOSE-like clusters; counts what their intervals and tests give. */
function simulateF1(
  { key, agree, shift }: F1Scenario,
  truth: { f1: number; deltaF1: number },
  clusters: number,
  reps: number,
  seed: number,
): F1Counts {
  const rng = createRng(seed + clusters);
  const counts: F1Counts = { f1: 0, f1Null: 0, delta: 0, deltaNull: 0, rejected: 0, mcnemar: 0 };
  for (let r = 0; r < reps; r++) {
    const sample = Array.from({ length: clusters }, () => mooseCluster(rng, agree, shift));
    const pair = pairedRates(sample, { seed: r, resamples: 1000 });
    if (pair.f1.ci.lo === null) counts.deltaNull++;
    if (inside(pair.f1.ci.lo, pair.f1.ci.hi, truth.deltaF1)) counts.delta++;
    if ((pair.f1.p ?? 1) < 0.05) counts.rejected++;
    if (clusteredMcnemar(sample.map((c) => ({ b: c.onlyA, c: c.onlyB }))) < 0.05) counts.mcnemar++;
    if (key === 'moderate') {
      const one = ratesWithCi(
        sample.map((c) => c.a),
        { seed: r, resamples: 1000 },
      );
      if (one.ci.f1.lo === null) counts.f1Null++;
      if (inside(one.ci.f1.lo, one.ci.f1.hi, truth.f1)) counts.f1++;
    }
  }
  return counts;
}

/** A scenario's rows: F1 (moderate only) and ΔF1 coverage, or the two tests' type-I errors (null). */
function f1ScenarioRows(
  { key, agree }: F1Scenario,
  truth: { f1: number; deltaF1: number },
  counts: F1Counts,
  clusters: number,
  reps: number,
): CoverageRow[] {
  const scenario = `n ${clusters * 8}, ${clusters} clusters of 8, ~15% positives (random effects), agree ${agree}`;
  const base = { tool: 'ablate', scenario, replications: reps };
  const rows: CoverageRow[] = [];
  if (key === 'moderate') {
    rows.push({
      ...base,
      id: `f1-${clusters}`,
      interval: 'F1',
      method: REPORT_METHOD,
      value: counts.f1 / reps,
      measure: 'coverage',
      nullShare: counts.f1Null / reps,
    });
  }
  if (key !== 'null') {
    rows.push({
      ...base,
      id: `delta-f1-${key}-${clusters}`,
      interval: `ΔF1, paired (true ΔF1 ${truth.deltaF1.toFixed(4)})`,
      method: 'jackknife-t',
      value: counts.delta / Math.max(1, reps - counts.deltaNull),
      measure: 'coverage',
      nullShare: counts.deltaNull / reps,
    });
  } else {
    rows.push({
      ...base,
      id: `delta-f1-p-${clusters}`,
      interval: 'p of ΔF1 = 0 (exchangeable judges)',
      method: 'jackknife-t',
      value: counts.rejected / reps,
      measure: 'type-I error',
      nullShare: 0,
    });
    rows.push({
      ...base,
      id: `mcnemar-${clusters}`,
      interval: 'clustered McNemar p (accuracy)',
      method: 'sign-flip below 20 discordant clusters, else χ²',
      value: counts.mcnemar / reps,
      measure: 'type-I error',
      nullShare: 0,
    });
  }
  return rows;
}

/** F1 and ΔF1 coverage, and the p-value's type-I error, at `clusters` MOOSE-like clusters. */
function f1Rows(clusters: number, replications: number, seed: number): CoverageRow[] {
  return F1_SCENARIOS.flatMap((scenario) => {
    // A type-I error near 0.05 needs more replications than a coverage near 0.95 to be read to ±0.01.
    const reps = scenario.key === 'null' ? replications * 20 : replications;
    const truth = truthOf(scenario.agree, scenario.shift);
    const counts = simulateF1(scenario, truth, clusters, reps, seed);
    return f1ScenarioRows(scenario, truth, counts, clusters, reps);
  });
}

function rankRows(replications: number): CoverageRow[] {
  const rows: CoverageRow[] = [];
  for (const schedule of SCHEDULES) {
    for (const g of [2, 3, 6, 16]) {
      const reps = g === 16 ? Math.ceil(replications / 4) : replications;
      const r = rankCoverage({ schedule, g }, reps, 11, 400);
      rows.push({
        id: `rank-${schedule}-${g}`,
        tool: '/v1/rank',
        interval: 'score',
        method: 'Laplace posterior',
        scenario: `${schedule}, G = ${g}, θ ~ N(0, 1), one comparison per pair`,
        replications: reps,
        value: r.coverage,
        measure: 'coverage',
        nullShare: r.nullShare,
      });
    }
  }
  for (const g of [2, 16]) {
    const reps = g === 16 ? Math.ceil(replications / 4) : replications;
    const r = rankCoverage({ schedule: 'all_pairs', g, spread: 2 }, reps, 12, 400);
    rows.push({
      id: `rank-spread2-${g}`,
      tool: '/v1/rank',
      interval: 'score (strengths far apart)',
      method: 'Laplace posterior',
      scenario: `all_pairs, G = ${g}, θ ~ N(0, 2²), one comparison per pair`,
      replications: reps,
      value: r.coverage,
      measure: 'coverage',
      nullShare: r.nullShare,
    });
  }
  return rows;
}

/**
 * evaluate's score means: `questions` questions of 3–8 ideas, a score = 3 + question effect (sd 0.6) + idea
 * noise (sd 1), the mean over ideas by the question jackknife-t; the truth is 3.
 */
function evaluateRows(questions: number, replications: number, seed: number): CoverageRow[] {
  const rng = createRng(seed);
  let covered = 0;
  let nulls = 0;
  const meanOver = (sample: readonly number[][]) => {
    let sum = 0;
    let n = 0;
    for (const q of sample) {
      for (const x of q) sum += x;
      n += q.length;
    }
    return n === 0 ? null : sum / n;
  };
  for (let r = 0; r < replications; r++) {
    const clusters = Array.from({ length: questions }, () => {
      const effect = 0.6 * normal(rng);
      return Array.from({ length: 3 + Math.floor(rng() * 6) }, () => 3 + effect + normal(rng));
    });
    const ci = jackknifeInterval(clusters, meanOver, 'mean');
    if (ci.lo === null) nulls++;
    if (inside(ci.lo, ci.hi, 3)) covered++;
  }
  return [
    {
      id: `evaluate-mean-${questions}`,
      tool: 'evaluate',
      interval: 'a system’s mean score',
      method: 'jackknife-t over questions',
      scenario: `~${questions * 5.5} ideas, ${questions} questions of 3–8, ICC 0.26`,
      replications,
      value: covered / replications,
      measure: 'coverage',
      nullShare: nulls / replications,
    },
  ];
}

/** Every row of the table; `scale` multiplies the replications (1 for the documented table). */
export function coverageRows(scale = 1, only?: ReadonlySet<string>): CoverageRow[] {
  const reps = (r: number) => Math.max(20, Math.round(r * scale));
  const groups: Array<[string, () => CoverageRow[]]> = [
    ['rank', () => rankRows(reps(200))],
    [
      'rare-openreview-1',
      () => proportionRows('rare-openreview-0.001-0', OPENREVIEW_SIZES, 0.001, 0, reps(1000), 1),
    ],
    [
      'rare-openreview-2',
      () => proportionRows('rare-openreview-0.003-0.3', OPENREVIEW_SIZES, 0.003, 0.3, reps(1000), 2),
    ],
    [
      'rare-moose-1',
      () => proportionRows('rare-moose-0.02-0.3', Array<number>(34).fill(8), 0.02, 0.3, reps(1000), 3),
    ],
    [
      'rare-moose-2',
      () => proportionRows('rare-moose-0.02-0.6', Array<number>(34).fill(8), 0.02, 0.6, reps(1000), 4),
    ],
    [
      'accuracy-moose',
      () => proportionRows('accuracy-moose-0.675-0.2', Array<number>(25).fill(8), 0.675, 0.2, reps(1000), 5),
    ],
    ['evaluate-34', () => evaluateRows(34, reps(2000), 6)],
    ['f1-34', () => f1Rows(34, reps(400), 2024)],
    ['f1-60', () => f1Rows(60, reps(400), 2025)],
    ['f1-100', () => f1Rows(100, reps(300), 2026)],
  ];
  return groups.filter(([key]) => only === undefined || only.has(key)).flatMap(([, run]) => run());
}

const fixed = (x: number) => x.toFixed(3);

/** The Markdown table of the rows (what docs/ablations.md holds between its coverage markers). */
export function renderCoverage(rows: readonly CoverageRow[]): string {
  const head = '| tool | interval | method | scenario | replications | measure | value | no interval |';
  const lines = [head, '|---|---|---|---|---|---|---|---|'];
  for (const r of rows) {
    lines.push(
      `| ${r.tool} | ${r.interval} | ${r.method} | ${r.scenario} | ${r.replications} | ${r.measure} | ${fixed(r.value)} | ${(100 * r.nullShare).toFixed(1)}% |`,
    );
  }
  return lines.join('\n');
}

export const COVERAGE_BLOCK = /<!-- coverage -->\n+([\s\S]*?)\n+<!-- \/coverage -->/;
