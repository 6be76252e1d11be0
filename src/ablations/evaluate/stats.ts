/**
 * Statistics of `npm run evaluate` (the paper's evaluation protocols). Pure functions, no I/O.
 *
 * - Absolute protocol: each idea gets an integer 1–5 per criterion; a system's score is the mean over its ideas.
 * - Pairwise protocol: every unordered pair of a question's ideas is judged twice, once in each order; each
 *   order gives the preferred idea +1 and the other −1 (a tie 0 to both). An idea's sum s over its k order
 *   judgments lies in [−k, k] and is normalised linearly to 1–5: **score = 3 + 2·s/k** (−k → 1, 0 → 3, k → 5).
 *   With n ideas and no failure k = 2(n − 1), i.e. score = 3 + s/(n − 1).
 * - CIs over whole questions (an idea's scores depend on its question's other ideas): the question jackknife-t
 *   for means and τ over ideas; the percentile bootstrap for the system-level τ, none when it cannot vary.
 */
import type { Criterion } from '../../roles/types.js';
import { clusterBootstrap, jackknifeInterval, type Interval } from '../stats/bootstrap.js';
import { clusteredProportion, type Proportion, type Tally } from '../stats/proportion.js';

/** The paper's linear normalisation of a pairwise sum to 1–5; null without any judgment. */
export function normalizePairwise(sum: number, judgments: number): number | null {
  return judgments === 0 ? null : 3 + (2 * sum) / judgments;
}

/**
 * Kendall's τ-b of two paired samples (ties handled), O(n²); null when undefined (fewer than two pairs, or one
 * side constant).
 */
export function kendallTauB(x: readonly number[], y: readonly number[]): number | null {
  const n = Math.min(x.length, y.length);
  let concordant = 0;
  let discordant = 0;
  let tiesX = 0;
  let tiesY = 0;
  for (let i = 0; i < n; i++) {
    for (let j = i + 1; j < n; j++) {
      const dx = Math.sign((x[i] ?? 0) - (x[j] ?? 0));
      const dy = Math.sign((y[i] ?? 0) - (y[j] ?? 0));
      if (dx === 0 && dy === 0) continue;
      if (dx === 0) tiesX += 1;
      else if (dy === 0) tiesY += 1;
      else if (dx === dy) concordant += 1;
      else discordant += 1;
    }
  }
  const denominator = Math.sqrt((concordant + discordant + tiesX) * (concordant + discordant + tiesY));
  return denominator === 0 ? null : (concordant - discordant) / denominator;
}

export type Protocol = 'absolute' | 'pairwise';
export const PROTOCOLS: readonly Protocol[] = ['absolute', 'pairwise'];

/** One idea's outcome, as the statistics need it. */
export interface IdeaOutcome {
  id: string;
  questionId: string;
  system: string;
  /** Absolute score per criterion (null: the rating failed or was not asked). */
  absolute: Partial<Record<Criterion, number | null>>;
  /** Pairwise sum and number of order judgments per criterion. */
  pairwise: Partial<Record<Criterion, { sum: number; judgments: number }>>;
  human: Partial<Record<Criterion, number>>;
}

/** Position-bias tally of one question and criterion: events among pairs decided by the judge. */
export interface BiasTally {
  questionId: string;
  criterion: Criterion;
  events: number;
  judged: number;
}

export type { Interval };

export interface Cell {
  mean: number | null;
  /** Ideas with a score. */
  n: number;
  ci: Interval;
}

export interface SystemRow {
  system: string;
  ideas: number;
  cells: Partial<Record<Criterion, Partial<Record<Protocol, Cell>>>>;
  /** Mean over criteria of the criterion means, per protocol. */
  mean: Partial<Record<Protocol, Cell>>;
}

export interface TauWithCi {
  tau: number | null;
  ci: Interval;
  /** Systems (system level), questions (per question) or ideas (human agreement) behind τ. */
  n: number;
}

export interface HumanAgreement {
  /** Ideas with both a human and a judge score. */
  n: number;
  absolute: TauWithCi | null;
  pairwise: TauWithCi | null;
  /** Mean |judge − human| of the absolute protocol, when every human score is on the same 1–5 scale. */
  absoluteMae: number | null;
}

export interface EvaluationStats {
  table: SystemRow[];
  positionBias: Partial<Record<Criterion | 'all', Proportion>>;
  /** τ-b between the systems' absolute and pairwise means, per criterion and for the mean over criteria. */
  systemTau: Partial<Record<Criterion | 'mean', TauWithCi>>;
  /** Mean over questions of τ-b between its ideas' absolute and pairwise scores. */
  questionTau: Partial<Record<Criterion, TauWithCi>>;
  human: Partial<Record<Criterion, HumanAgreement>>;
  /** What the reader must know before reading the numbers (e.g. a τ over 3 systems). */
  warnings: string[];
}

export interface StatsOptions {
  systems: readonly string[];
  criteria: readonly Criterion[];
  protocols: readonly Protocol[];
  seed: number;
  resamples: number;
}

/** An idea's score under a protocol and criterion (pairwise normalised), or null. */
export function ideaScore(idea: IdeaOutcome, protocol: Protocol, criterion: Criterion): number | null {
  if (protocol === 'absolute') return idea.absolute[criterion] ?? null;
  const p = idea.pairwise[criterion];
  return p === undefined ? null : normalizePairwise(p.sum, p.judgments);
}

interface Cluster {
  questionId: string;
  ideas: IdeaOutcome[];
  bias: BiasTally[];
}

function mean(values: readonly number[]): number | null {
  return values.length === 0 ? null : values.reduce((s, v) => s + v, 0) / values.length;
}

function systemMean(
  sample: readonly Cluster[],
  system: string,
  protocol: Protocol,
  criterion: Criterion,
): number | null {
  const values: number[] = [];
  for (const c of sample)
    for (const idea of c.ideas) {
      if (idea.system !== system) continue;
      const s = ideaScore(idea, protocol, criterion);
      if (s !== null) values.push(s);
    }
  return mean(values);
}

function meanOverCriteria(
  sample: readonly Cluster[],
  system: string,
  protocol: Protocol,
  criteria: readonly Criterion[],
): number | null {
  const means = criteria.map((c) => systemMean(sample, system, protocol, c));
  return means.some((m) => m === null) ? null : mean(means.filter((m) => m !== null));
}

/** τ-b between the systems' absolute and pairwise means (systems with both defined). */
function systemLevelTau(
  sample: readonly Cluster[],
  systems: readonly string[],
  score: (sample: readonly Cluster[], system: string, protocol: Protocol) => number | null,
): number | null {
  const x: number[] = [];
  const y: number[] = [];
  for (const s of systems) {
    const a = score(sample, s, 'absolute');
    const p = score(sample, s, 'pairwise');
    if (a === null || p === null) continue;
    x.push(a);
    y.push(p);
  }
  return kendallTauB(x, y);
}

function questionLevelTau(
  sample: readonly Cluster[],
  criterion: Criterion,
): { tau: number | null; n: number } {
  const taus: number[] = [];
  for (const c of sample) {
    const x: number[] = [];
    const y: number[] = [];
    for (const idea of c.ideas) {
      const a = ideaScore(idea, 'absolute', criterion);
      const p = ideaScore(idea, 'pairwise', criterion);
      if (a === null || p === null) continue;
      x.push(a);
      y.push(p);
    }
    const t = kendallTauB(x, y);
    if (t !== null) taus.push(t);
  }
  return { tau: mean(taus), n: taus.length };
}

function humanPairs(
  sample: readonly Cluster[],
  protocol: Protocol,
  criterion: Criterion,
): [number[], number[]] {
  const judge: number[] = [];
  const human: number[] = [];
  for (const c of sample)
    for (const idea of c.ideas) {
      const h = idea.human[criterion];
      const j = ideaScore(idea, protocol, criterion);
      if (h === undefined || j === null) continue;
      judge.push(j);
      human.push(h);
    }
  return [judge, human];
}

/**
 * Every statistic of the evaluation, with CIs from one clustered bootstrap (cluster = question), so all
 * intervals come from the same resamples.
 */
export function evaluationStats(
  ideas: readonly IdeaOutcome[],
  bias: readonly BiasTally[],
  options: StatsOptions,
): EvaluationStats {
  const clusters = questionClusters(ideas, bias);
  const { systems, criteria, protocols } = options;
  const humanCriteria = criteria.filter((c) => ideas.some((i) => i.human[c] !== undefined));
  const interval = intervals(clusters, statisticsOf(humanCriteria, options), options);
  const both = protocols.includes('absolute') && protocols.includes('pairwise');
  return {
    table: systems.map((system) => systemRow(ideas, clusters, system, options, interval)),
    positionBias: protocols.includes('pairwise') ? positionBias(clusters, criteria) : {},
    ...(both ? rankAgreement(clusters, options, interval) : { systemTau: {}, questionTau: {} }),
    human: humanAgreement(ideas, clusters, humanCriteria, protocols, interval),
    warnings: both ? [systemTauWarning(systems.length)].filter((w): w is string => w !== null) : [],
  };
}

/** The ideas and bias tallies grouped by question, in order of first appearance. */
function questionClusters(ideas: readonly IdeaOutcome[], bias: readonly BiasTally[]): Cluster[] {
  const byQuestion = new Map<string, Cluster>();
  const cluster = (questionId: string): Cluster => {
    let c = byQuestion.get(questionId);
    if (c === undefined) {
      c = { questionId, ideas: [], bias: [] };
      byQuestion.set(questionId, c);
    }
    return c;
  };
  for (const idea of ideas) cluster(idea.questionId).ideas.push(idea);
  for (const b of bias) cluster(b.questionId).bias.push(b);
  return [...byQuestion.values()];
}

type Statistic = (sample: readonly Cluster[]) => number | null;

/**
 * Every statistic that gets an interval, by name: `cell|system|protocol|criterion`, `mean|system|protocol`;
 * with both protocols `systemTau|criterion`, `questionTau|criterion` and `systemTau|mean`; and
 * `human|protocol|criterion` for the criteria with human scores.
 */
function statisticsOf(humanCriteria: readonly Criterion[], options: StatsOptions): Map<string, Statistic> {
  const { systems, criteria, protocols } = options;
  const statistics = new Map<string, Statistic>();
  for (const system of systems) {
    for (const protocol of protocols) {
      for (const criterion of criteria) {
        statistics.set(`cell|${system}|${protocol}|${criterion}`, (s) =>
          systemMean(s, system, protocol, criterion),
        );
      }
      statistics.set(`mean|${system}|${protocol}`, (s) => meanOverCriteria(s, system, protocol, criteria));
    }
  }
  if (protocols.includes('absolute') && protocols.includes('pairwise')) {
    for (const criterion of criteria) {
      statistics.set(`systemTau|${criterion}`, (s) =>
        systemLevelTau(s, systems, (x, system, protocol) => systemMean(x, system, protocol, criterion)),
      );
      statistics.set(`questionTau|${criterion}`, (s) => questionLevelTau(s, criterion).tau);
    }
    statistics.set('systemTau|mean', (s) =>
      systemLevelTau(s, systems, (x, system, protocol) => meanOverCriteria(x, system, protocol, criteria)),
    );
  }
  for (const criterion of humanCriteria) {
    for (const protocol of protocols) {
      statistics.set(`human|${protocol}|${criterion}`, (s) =>
        kendallTauB(...humanPairs(s, protocol, criterion)),
      );
    }
  }
  return statistics;
}

/** The 1–5 scale every score (absolute, and pairwise normalised) lies on. */
export const SCORE_SCALE = { min: 1, max: 5 } as const;

/**
 * A score's interval clamped to the 1–5 scale: the jackknife-t is symmetric and can pass an end of the scale
 * (`4.75 [3.95, 5.55]`); no mean can lie outside it, so clamping drops only impossible values and never the
 * true mean (the coverage is unchanged). `note` says when a bound was clamped.
 */
export function clampToScale(interval: Interval): Interval {
  const { lo, hi } = interval;
  if (lo === null || hi === null) return interval;
  const clamped = { lo: Math.max(SCORE_SCALE.min, lo), hi: Math.min(SCORE_SCALE.max, hi) };
  if (clamped.lo === lo && clamped.hi === hi) return interval;
  return { ...interval, ...clamped, note: `clamped to the ${SCORE_SCALE.min}–${SCORE_SCALE.max} scale` };
}

/** Fewest systems whose rank τ can take enough values to be read (3 systems: τ-b ∈ {±1/3, ±1} without ties). */
export const MIN_TAU_SYSTEMS = 4;

/** The warning for a system-level τ over few systems, or null (2 systems get no interval at all). */
export function systemTauWarning(systems: number): string | null {
  if (systems < 3 || systems >= MIN_TAU_SYSTEMS) return null;
  return (
    `the system-level τ ranks only ${systems} systems: over their 3 pairs it can take only the values ` +
    '−1, −1/3, 1/3 and 1 (without ties), so one swapped pair moves it by 2/3 — it is not informative; read ' +
    `the per-question τ, or compare at least ${MIN_TAU_SYSTEMS} systems`
  );
}

/**
 * Each statistic's interval, by name (a statistic not computed: no bounds, every resample undefined). As the
 * ablation: the cluster (question) jackknife-t for every smooth statistic (means, τ over ideas), at every
 * question count — the percentile bootstrap undercovers at 34 questions. System-level τ ranks a handful of
 * systems: a discrete statistic the jackknife cannot linearise, so it keeps the percentile bootstrap, and gets
 * no interval when it cannot vary (2 systems: τ is ±1 whatever the data) or when every resample agrees.
 */
function intervals(
  clusters: readonly Cluster[],
  statistics: ReadonlyMap<string, Statistic>,
  options: StatsOptions,
): (name: string) => Interval {
  const { systems } = options;
  const smooth = new Map([...statistics].filter(([name]) => !name.startsWith('systemTau|')));
  const discrete = new Map([...statistics].filter(([name]) => name.startsWith('systemTau|')));
  const ci = clusterBootstrap(clusters, discrete, { seed: options.seed, resamples: options.resamples });
  const isScore = (name: string): boolean => name.startsWith('cell|') || name.startsWith('mean|');
  for (const [name, statistic] of smooth) {
    const jackknife = jackknifeInterval(clusters, statistic, isScore(name) ? 'mean' : 'tau');
    ci.set(name, isScore(name) ? clampToScale(jackknife) : jackknife);
  }
  for (const [name, interval] of ci) {
    if (!discrete.has(name)) continue;
    const note =
      systems.length < 3
        ? `cannot vary: τ over ${systems.length} systems is ±1 whatever the data`
        : interval.lo !== null && interval.lo === interval.hi
          ? 'cannot vary: every resample gave the same τ'
          : null;
    if (note !== null) ci.set(name, { ...interval, lo: null, hi: null, note });
  }
  return (name) =>
    ci.get(name) ?? {
      lo: null,
      hi: null,
      level: 0.95,
      resamples: options.resamples,
      undefinedResamples: options.resamples,
    };
}

/** One system's row: its mean per criterion and protocol, and over the criteria, each with its interval. */
function systemRow(
  ideas: readonly IdeaOutcome[],
  clusters: readonly Cluster[],
  system: string,
  options: StatsOptions,
  interval: (name: string) => Interval,
): SystemRow {
  const { criteria, protocols } = options;
  const own = ideas.filter((i) => i.system === system);
  const cells: SystemRow['cells'] = {};
  const meanCells: SystemRow['mean'] = {};
  for (const criterion of criteria) {
    const row: Partial<Record<Protocol, Cell>> = {};
    for (const protocol of protocols) {
      const scored = own.filter((i) => ideaScore(i, protocol, criterion) !== null).length;
      row[protocol] = {
        mean: systemMean(clusters, system, protocol, criterion),
        n: scored,
        ci: interval(`cell|${system}|${protocol}|${criterion}`),
      };
    }
    cells[criterion] = row;
  }
  for (const protocol of protocols) {
    meanCells[protocol] = {
      mean: meanOverCriteria(clusters, system, protocol, criteria),
      n: own.length,
      ci: interval(`mean|${system}|${protocol}`),
    };
  }
  return { system, ideas: own.length, cells, mean: meanCells };
}

/** The pairwise protocol's position-bias rate per criterion and over all, on effective counts. */
function positionBias(
  clusters: readonly Cluster[],
  criteria: readonly Criterion[],
): EvaluationStats['positionBias'] {
  const out: EvaluationStats['positionBias'] = {};
  const tallies = (keep: (b: BiasTally) => boolean): Tally[] =>
    clusters.map((c) => {
      let hits = 0;
      let trials = 0;
      for (const b of c.bias)
        if (keep(b)) {
          hits += b.events;
          trials += b.judged;
        }
      return { hits, trials };
    });
  // Exact (Clopper–Pearson on the design's effective size): a judge with no bias event still gets an
  // honest upper bound, not the [0, 0] a bootstrap prints.
  for (const criterion of criteria)
    out[criterion] = clusteredProportion(tallies((b) => b.criterion === criterion));
  out.all = clusteredProportion(tallies(() => true));
  return out;
}

/** With both protocols: how far they rank alike, systems (per criterion and over them) and ideas per question. */
function rankAgreement(
  clusters: readonly Cluster[],
  options: StatsOptions,
  interval: (name: string) => Interval,
): Pick<EvaluationStats, 'systemTau' | 'questionTau'> {
  const { systems, criteria } = options;
  const systemTau: EvaluationStats['systemTau'] = {};
  const questionTau: EvaluationStats['questionTau'] = {};
  for (const criterion of criteria) {
    const point = systemLevelTau(clusters, systems, (x, system, protocol) =>
      systemMean(x, system, protocol, criterion),
    );
    systemTau[criterion] = { tau: point, ci: interval(`systemTau|${criterion}`), n: systems.length };
    const q = questionLevelTau(clusters, criterion);
    questionTau[criterion] = { tau: q.tau, ci: interval(`questionTau|${criterion}`), n: q.n };
  }
  systemTau.mean = {
    tau: systemLevelTau(clusters, systems, (x, system, protocol) =>
      meanOverCriteria(x, system, protocol, criteria),
    ),
    ci: interval('systemTau|mean'),
    n: systems.length,
  };
  return { systemTau, questionTau };
}

/** Per criterion with human scores: the judge's τ with them under each protocol, and the absolute MAE. */
function humanAgreement(
  ideas: readonly IdeaOutcome[],
  clusters: readonly Cluster[],
  humanCriteria: readonly Criterion[],
  protocols: readonly Protocol[],
  interval: (name: string) => Interval,
): EvaluationStats['human'] {
  const human: EvaluationStats['human'] = {};
  for (const criterion of humanCriteria) {
    const agreement = (protocol: Protocol): TauWithCi | null => {
      if (!protocols.includes(protocol)) return null;
      const [judge, humans] = humanPairs(clusters, protocol, criterion);
      return {
        tau: kendallTauB(judge, humans),
        ci: interval(`human|${protocol}|${criterion}`),
        n: judge.length,
      };
    };
    const [absJudge, absHuman] = protocols.includes('absolute')
      ? humanPairs(clusters, 'absolute', criterion)
      : [[], []];
    const sameScale = absHuman.length > 0 && absHuman.every((h) => h >= 1 && h <= 5);
    human[criterion] = {
      n: ideas.filter((i) => i.human[criterion] !== undefined).length,
      absolute: agreement('absolute'),
      pairwise: agreement('pairwise'),
      absoluteMae: sameScale ? mean(absJudge.map((j, k) => Math.abs(j - (absHuman[k] ?? j)))) : null,
    };
  }
  return human;
}

export interface UnitCost {
  units: number;
  failed: number;
  calls: number;
  promptTokens: number;
  completionTokens: number;
  /** Failure counts by error code. */
  errors: Record<string, number>;
}

export interface EvaluateResults {
  version: 1;
  input: { sha256: string; ideas: number; questions: number; systems: string[]; invalidLines: number };
  backend: string;
  promptVersion: string;
  criteria: Criterion[];
  protocols: Protocol[];
  seed: number;
  resamples: number;
  stats: EvaluationStats;
  cost: Partial<Record<Protocol, UnitCost>>;
  /** Per idea, without its text: scores per criterion and protocol. */
  ideas: IdeaOutcome[];
}
