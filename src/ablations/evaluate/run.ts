/**
 * `npm run evaluate`: the paper's evaluation of idea generators on the configured judge backend — the absolute
 * protocol (one 1–5 rating per idea and criterion) and the pairwise protocol (every unordered pair of a
 * question's ideas, both orders) — then per-system scores with clustered CIs, the position-bias rate, cost,
 * agreement between the protocols and with human scores. Resumable: every judged unit is appended to
 * `OUT/units.jsonl` as it finishes, and a rerun skips the units already there.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';

import { RewardError } from '../../errors.js';
import { comparePair, rateIdea } from '../../judge/compare.js';
import { comparativeKey, keySettingsOf, type KeySettings } from '../../judge/key.js';
import type { Router } from '../../judge/types.js';
import { COMPARATIVE_PROMPT_VERSION } from '../../roles/index.js';
import { CriterionName, needsGroundTruth } from '../../roles/criteria.js';
import type { Criterion } from '../../roles/types.js';
import type { EvaluateInput, Idea } from './input.js';
import { renderEvaluationReport, evaluationSvg } from './report.js';
import {
  evaluationStats,
  type BiasTally,
  type EvaluateResults,
  type IdeaOutcome,
  type Protocol,
  type UnitCost,
} from './stats.js';
import type { ResumableRun, RunOptions } from '../types.js';
import { loadJsonl } from '../records.js';
import { runResumable } from '../pool.js';
import { DEFAULT_RESAMPLES } from '../stats/clustered.js';

export type { EvaluateResults, UnitCost } from './stats.js';

export const DEFAULT_EVALUATE_DEADLINE_MS = 120_000;

const Usage = z.object({
  calls: z.number().int().min(0),
  promptTokens: z.number().min(0),
  completionTokens: z.number().min(0),
});
const Pref = z.enum(['a', 'b', 'tie']).nullable();

/** One line of `units.jsonl`: a rating (one idea) or a pair (two ideas, both orders). */
export const UnitRecord = z.object({
  v: z.literal(1),
  /** Identity: protocol, prompt version, route, criterion and texts (a changed text or route is a new key). */
  key: z.string(),
  kind: z.enum(['rating', 'pair']),
  criterion: CriterionName,
  /** Idea ids: one for a rating, [first, second] for a pair (input order). */
  ideas: z.array(z.string()).min(1).max(2),
  status: z.enum(['ok', 'rejected_input', 'judge_error', 'timeout']),
  score: z.number().int().min(1).max(5).nullable(),
  /** Pair: each order's preference between first (`a`) and second (`b`). */
  orders: z.object({ ab: Pref, ba: Pref }).nullable(),
  positionBias: z.boolean(),
  usage: Usage,
  error: z.object({ code: z.string(), message: z.string() }).optional(),
});
export type UnitRecord = z.infer<typeof UnitRecord>;

const isFailedUnit = (r: Pick<UnitRecord, 'status'>): boolean =>
  r.status === 'judge_error' || r.status === 'timeout';
const recordId = (key: string, ideas: readonly string[]): string => `${key}|${ideas.join('|')}`;

interface Task {
  kind: 'rating' | 'pair';
  criterion: Criterion;
  ideas: Idea[];
  key: string;
}

function unitKey(
  router: Router,
  settings: KeySettings,
  kind: 'rating' | 'pair',
  criterion: Criterion,
  ideas: readonly Idea[],
): string {
  const [first, second] = ideas;
  const shared = { question: first?.question ?? '', groundTruth: first?.groundTruth ?? null, criterion };
  return kind === 'rating'
    ? comparativeKey(router, { kind, input: { ...shared, idea: first?.text ?? '' } }, settings)
    : comparativeKey(
        router,
        { kind, input: { ...shared, a: first?.text ?? '', b: second?.text ?? '' }, judges: 1 },
        settings,
      );
}

/** Units to judge, question by question: ratings of each idea, then its question's pairs, per criterion. */
export function planUnits(
  input: EvaluateInput,
  router: Router,
  criteria: readonly Criterion[],
  protocols: readonly Protocol[],
  settings: KeySettings,
): Task[] {
  const tasks: Task[] = [];
  for (const q of input.questions) {
    for (const criterion of criteria) {
      if (protocols.includes('absolute')) {
        for (const idea of q.ideas)
          tasks.push({
            kind: 'rating',
            criterion,
            ideas: [idea],
            key: unitKey(router, settings, 'rating', criterion, [idea]),
          });
      }
      if (protocols.includes('pairwise')) {
        for (let i = 0; i < q.ideas.length; i++)
          for (let j = i + 1; j < q.ideas.length; j++) {
            const pair = [q.ideas[i], q.ideas[j]].filter((x) => x !== undefined);
            tasks.push({
              kind: 'pair',
              criterion,
              ideas: pair,
              key: unitKey(router, settings, 'pair', criterion, pair),
            });
          }
      }
    }
  }
  return tasks;
}

async function judgeUnit(
  task: Task,
  router: Router,
  options: {
    deadlineMs: number;
    signal?: AbortSignal | undefined;
    limits?: { minChars: number; maxChars: number } | undefined;
  },
): Promise<UnitRecord> {
  const [first, second] = task.ideas;
  if (first === undefined) throw new Error('unit without ideas');
  const common = {
    router,
    deadline: Date.now() + options.deadlineMs,
    signal: options.signal,
    limits: options.limits,
  };
  const shared = { question: first.question, groundTruth: first.groundTruth, criterion: task.criterion };
  const base = {
    v: 1 as const,
    key: task.key,
    kind: task.kind,
    criterion: task.criterion,
    ideas: task.ideas.map((i) => i.id),
  };
  if (task.kind === 'rating') {
    const r = await rateIdea({ ...shared, idea: first.text }, common);
    return {
      ...base,
      status: r.status,
      score: r.score,
      orders: null,
      positionBias: false,
      usage: { ...r.usage },
      ...(r.error === undefined ? {} : { error: { ...r.error } }),
    };
  }
  if (second === undefined) throw new Error('pair without a second idea');
  const r = await comparePair({ ...shared, a: first.text, b: second.text }, common);
  return {
    ...base,
    status: r.status,
    score: null,
    orders: r.status === 'judge_error' || r.status === 'timeout' ? null : { ...r.orders },
    positionBias: r.positionBias,
    usage: { ...r.usage },
    ...(r.error === undefined ? {} : { error: { ...r.error } }),
  };
}

/** Folds unit records into per-idea outcomes and per-question position-bias tallies. */
export function toOutcomes(
  input: EvaluateInput,
  records: ReadonlyArray<UnitRecord>,
): { ideas: IdeaOutcome[]; bias: BiasTally[] } {
  const byId = new Map<string, IdeaOutcome>();
  const ideas = input.ideas.map((i) => {
    const outcome: IdeaOutcome = {
      id: i.id,
      questionId: i.questionId,
      system: i.system,
      absolute: {},
      pairwise: {},
      human: { ...i.human },
    };
    byId.set(i.id, outcome);
    return outcome;
  });
  const questionOf = new Map(input.ideas.map((i) => [i.id, i.questionId]));
  const bias = new Map<string, BiasTally>();
  for (const r of records) {
    const [firstId, secondId] = r.ideas;
    const first = byId.get(firstId ?? '');
    if (first === undefined) continue;
    if (r.kind === 'rating') {
      first.absolute[r.criterion] = isFailedUnit(r) ? null : r.score;
      continue;
    }
    const second = byId.get(secondId ?? '');
    if (second === undefined) continue;
    for (const idea of [first, second]) idea.pairwise[r.criterion] ??= { sum: 0, judgments: 0 };
    if (r.orders === null) continue;
    // Each order gives +1 to the preferred idea and −1 to the other; a tie gives 0 to both.
    for (const pref of [r.orders.ab, r.orders.ba]) {
      if (pref === null) continue;
      const p1 = first.pairwise[r.criterion];
      const p2 = second.pairwise[r.criterion];
      if (p1 === undefined || p2 === undefined) continue;
      p1.judgments += 1;
      p2.judgments += 1;
      if (pref === 'a') {
        p1.sum += 1;
        p2.sum -= 1;
      } else if (pref === 'b') {
        p1.sum -= 1;
        p2.sum += 1;
      }
    }
    if (r.status === 'ok') {
      const questionId = questionOf.get(first.id) ?? '';
      const k = `${questionId}|${r.criterion}`;
      const tally = bias.get(k) ?? { questionId, criterion: r.criterion, events: 0, judged: 0 };
      tally.judged += 1;
      if (r.positionBias) tally.events += 1;
      bias.set(k, tally);
    }
  }
  return { ideas, bias: [...bias.values()] };
}

function costOf(records: readonly UnitRecord[], kind: 'rating' | 'pair'): UnitCost {
  const cost: UnitCost = { units: 0, failed: 0, calls: 0, promptTokens: 0, completionTokens: 0, errors: {} };
  const errors = new Map<string, number>();
  for (const r of records) {
    if (r.kind !== kind) continue;
    cost.units += 1;
    cost.calls += r.usage.calls;
    cost.promptTokens += r.usage.promptTokens;
    cost.completionTokens += r.usage.completionTokens;
    if (isFailedUnit(r)) {
      cost.failed += 1;
      const code = r.error?.code ?? r.status;
      errors.set(code, (errors.get(code) ?? 0) + 1);
    }
  }
  cost.errors = Object.fromEntries([...errors].sort(([a], [b]) => (a < b ? -1 : 1)));
  return cost;
}

export interface EvaluateOptions extends RunOptions {
  input: EvaluateInput;
  /** Default: the paper's novelty, feasibility, effectiveness. */
  criteria: readonly Criterion[];
  protocols: readonly Protocol[];
  /** Re-run units whose stored result is a failure. */
  retryFailed?: boolean | undefined;
  onRecord?: ((record: UnitRecord) => void) | undefined;
}

/** `ran`/`reused` count units (one rating or one pair in both orders); the records file is `units.jsonl`. */
export type EvaluateRun = ResumableRun<EvaluateResults>;

/** Rejects a run without criteria or protocols, or with a criterion that needs a missing ground truth. */
function checkRequest({ input, criteria, protocols }: EvaluateOptions): void {
  if (criteria.length === 0) throw new RewardError('RW_BAD_REQUEST', 'no criteria given');
  if (protocols.length === 0) throw new RewardError('RW_BAD_REQUEST', 'no protocols given');
  for (const criterion of criteria) {
    const missing = needsGroundTruth(criterion)
      ? input.questions.find((q) => q.groundTruth === null)
      : undefined;
    if (missing !== undefined) {
      throw new RewardError(
        'RW_BAD_REQUEST',
        `criterion "${criterion}" needs a ground_truth for every question; question ${missing.questionId} has none`,
      );
    }
  }
}

/** The id a planned unit's record is stored under. */
const unitId = (t: Task): string =>
  recordId(
    t.key,
    t.ideas.map((i) => i.id),
  );

/** The stored record of every planned unit, in plan order. */
function plannedRecords(planned: readonly Task[], stored: ReadonlyMap<string, UnitRecord>): UnitRecord[] {
  return planned.map((t) => {
    const r = stored.get(unitId(t));
    if (r === undefined)
      throw new Error(`no result for unit ${t.kind} ${t.ideas.map((i) => i.id).join(', ')}`);
    return r;
  });
}

/** results.json of a finished evaluation: the input's summary, the statistics, the cost and the ideas. */
function buildResults(options: EvaluateOptions, records: readonly UnitRecord[]): EvaluateResults {
  const { input, router } = options;
  const { ideas, bias } = toOutcomes(input, records);
  const seed = options.seed ?? 1;
  const resamples = options.resamples ?? DEFAULT_RESAMPLES;
  const cost: EvaluateResults['cost'] = {};
  if (options.protocols.includes('absolute')) cost.absolute = costOf(records, 'rating');
  if (options.protocols.includes('pairwise')) cost.pairwise = costOf(records, 'pair');
  return {
    version: 1,
    input: {
      sha256: input.sha256,
      ideas: input.ideas.length,
      questions: input.questions.length,
      systems: input.systems,
      invalidLines: input.invalid.length,
    },
    backend: router.name,
    promptVersion: COMPARATIVE_PROMPT_VERSION,
    criteria: [...options.criteria],
    protocols: [...options.protocols],
    seed,
    resamples,
    stats: evaluationStats(ideas, bias, {
      systems: input.systems,
      criteria: options.criteria,
      protocols: options.protocols,
      seed,
      resamples,
    }),
    cost,
    ideas,
  };
}

/** Writes results.json, report.md and evaluation.svg into `outDir`; returns their paths. */
async function writeOutputs(outDir: string, results: EvaluateResults): Promise<string[]> {
  const files = {
    results: join(outDir, 'results.json'),
    report: join(outDir, 'report.md'),
    plot: join(outDir, 'evaluation.svg'),
  };
  await writeFile(files.results, `${JSON.stringify(results, null, 2)}\n`);
  await writeFile(files.report, renderEvaluationReport(results));
  await writeFile(files.plot, evaluationSvg(results));
  return Object.values(files);
}

/** Runs (or resumes) an evaluation and, once every unit is done, writes results.json, report.md, evaluation.svg. */
export async function runEvaluation(options: EvaluateOptions): Promise<EvaluateRun> {
  const { input, router } = options;
  checkRequest(options);
  await mkdir(options.outDir, { recursive: true });
  const unitsPath = join(options.outDir, 'units.jsonl');
  const loaded = await loadJsonl(unitsPath, UnitRecord, (r) => recordId(r.key, r.ideas));
  const stored = loaded.records;
  const planned = planUnits(input, router, options.criteria, options.protocols, keySettingsOf(options));
  const { ran, reused, completed } = await runResumable(
    {
      tasks: planned,
      idOf: unitId,
      stored,
      isFailure: isFailedUnit,
      retryFailed: options.retryFailed,
      path: unitsPath,
      label: 'evaluate',
      onRecord: options.onRecord,
      run: (task) =>
        judgeUnit(task, router, {
          deadlineMs: options.deadlineMs ?? DEFAULT_EVALUATE_DEADLINE_MS,
          signal: options.signal,
          limits: options.limits,
        }),
    },
    options,
  );
  if (!completed) {
    return { completed: false, results: null, ran, reused, badLines: loaded.badLines, files: [unitsPath] };
  }

  const results = buildResults(options, plannedRecords(planned, stored));
  const files = await writeOutputs(options.outDir, results);
  return {
    completed: true,
    results,
    ran,
    reused,
    badLines: loaded.badLines,
    files: [unitsPath, ...files],
  };
}
