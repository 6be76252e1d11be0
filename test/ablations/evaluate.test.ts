import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { runEvaluation, type EvaluateResults } from '../../src/ablations/evaluate/run.js';
import { parseEvaluateInput } from '../../src/ablations/evaluate/input.js';
import { renderEvaluationReport } from '../../src/ablations/evaluate/report.js';
import {
  evaluationStats,
  kendallTauB,
  normalizePairwise,
  type IdeaOutcome,
} from '../../src/ablations/evaluate/stats.js';
import { comparisonReply, criterionOf, scoreOf, shownIdeas } from '../fakes/comparative.js';
import { type FakeChatRequest, type FakeReply } from '../fakes/openai.js';
import { useFakeRouter } from '../judge/helpers.js';
import { useTempDirs } from '../support/temp-dirs.js';

describe('pairwise normalisation (the paper: +1 / −1 / 0 per order, summed, normalised linearly to 1–5)', () => {
  it('maps a sum s over k order judgments to 3 + 2·s/k: a worked example with three ideas', () => {
    // Ideas X, Y, Z of one question; 3 pairs × 2 orders = 6 order judgments, k = 4 per idea.
    // X beats Y in both orders (+2), X beats Z in both orders (+2)            → s_X = +4 → 3 + 2·4/4 = 5
    // Y loses to X twice (−2); vs Z: Y wins one order, the other is a tie (+1) → s_Y = −1 → 3 − 2/4 = 2.5
    // Z loses to X twice (−2), vs Y: loses one order, ties the other (−1)     → s_Z = −3 → 3 − 6/4 = 1.5
    expect(normalizePairwise(4, 4)).toBe(5);
    expect(normalizePairwise(-1, 4)).toBe(2.5);
    expect(normalizePairwise(-3, 4)).toBe(1.5);
    // The scores of a question's ideas average 3 (the sums cancel): (5 + 2.5 + 1.5) / 3 = 3.
    expect((5 + 2.5 + 1.5) / 3).toBe(3);
    expect(normalizePairwise(-4, 4)).toBe(1);
    expect(normalizePairwise(0, 4)).toBe(3);
    expect(normalizePairwise(0, 0)).toBeNull();
  });

  it('computes Kendall τ-b with ties: (1,2,3) vs (1,3,2) = 1/3; (1,1,2) vs (1,2,3) = 2/√6', () => {
    expect(kendallTauB([1, 2, 3], [1, 3, 2])).toBeCloseTo(1 / 3, 12);
    expect(kendallTauB([1, 1, 2], [1, 2, 3])).toBeCloseTo(2 / Math.sqrt(6), 12);
    expect(kendallTauB([1, 2, 3], [3, 2, 1])).toBe(-1);
    expect(kendallTauB([2, 2, 2], [1, 2, 3])).toBeNull();
    expect(kendallTauB([1], [1])).toBeNull();
  });
});

// A small written input: 2 questions × 3 systems; each idea carries its true value per criterion as a tag.
//   Q1: alpha N5 F2, beta N3 F4, gamma N1 F4        Q2: alpha N4 F3, beta N4 F1, gamma N2 F5
const Q1 = 'How can a retriever learn from its own mistakes without new labels?';
const Q2 = 'How can a planner for warehouse robots recover from blocked aisles?';
const row = (question: string, system: string, n: number, f: number, human?: number): string =>
  JSON.stringify({
    question,
    system,
    idea: `The ${system} idea with NOVELTY${n} and FEASIBILITY${f}: mine hard cases and retrain on them.`,
    ...(human === undefined ? {} : { human: { novelty: human } }),
  });
const INPUT = [
  row(Q1, 'alpha', 5, 2, 5),
  row(Q1, 'beta', 3, 4, 3),
  row(Q1, 'gamma', 1, 4, 1),
  row(Q2, 'alpha', 4, 3, 4),
  row(Q2, 'beta', 4, 1, 4),
  row(Q2, 'gamma', 2, 5, 2),
].join('\n');

/**
 * Fake judge: ratings answer the idea's tag for the prompt's criterion; comparisons prefer the higher tag in
 * either position, and on equal tags answer "A" (a position-biased judge on those pairs).
 */
function taggedJudge(body: FakeChatRequest): FakeReply {
  const criterion = criterionOf(body);
  const ideas = shownIdeas(body);
  if (body.response_format?.json_schema?.name === 'rating') {
    return { kind: 'json', body: { reasoning: 'tag', score: scoreOf(ideas[0] ?? '', criterion) } };
  }
  const [a, b] = ideas.map((i) => scoreOf(i, criterion));
  return comparisonReply(a! > b! ? 'A' : b! > a! ? 'B' : 'A');
}

const startFake = useFakeRouter();
const tempDir = useTempDirs('evaluate-');

async function setup(judge: (body: FakeChatRequest) => FakeReply = taggedJudge) {
  const { fake, router } = await startFake({ fallback: judge });
  const dir = await tempDir();
  return { input: { ...parseEvaluateInput(INPUT), sha256: 'test' }, dir, fake, router };
}

const cell = (
  r: EvaluateResults,
  system: string,
  criterion: 'novelty' | 'feasibility',
  protocol: 'absolute' | 'pairwise',
) => r.stats.table.find((t) => t.system === system)?.cells[criterion]?.[protocol]?.mean;

describe('npm run evaluate on the fake backend', () => {
  it('reproduces the hand-computed absolute means and normalised pairwise scores exactly', async () => {
    const { input, dir, fake, router } = await setup();
    const run = await runEvaluation({
      input,
      router,
      outDir: dir,
      criteria: ['novelty', 'feasibility'],
      protocols: ['absolute', 'pairwise'],
    });
    const r = run.results!;
    // 6 ideas × 2 criteria ratings + 6 pairs × 2 criteria × 2 orders.
    expect(fake.callCount).toBe(12 + 24);
    expect(r.cost.absolute).toMatchObject({ units: 12, calls: 12, failed: 0 });
    expect(r.cost.pairwise).toMatchObject({ units: 12, calls: 24, failed: 0 });
    // Absolute: the mean of the tags.  novelty α (5+4)/2, β (3+4)/2, γ (1+2)/2; feasibility α (2+3)/2 …
    expect(cell(r, 'alpha', 'novelty', 'absolute')).toBe(4.5);
    expect(cell(r, 'beta', 'novelty', 'absolute')).toBe(3.5);
    expect(cell(r, 'gamma', 'novelty', 'absolute')).toBe(1.5);
    expect(cell(r, 'alpha', 'feasibility', 'absolute')).toBe(2.5);
    expect(cell(r, 'beta', 'feasibility', 'absolute')).toBe(2.5);
    expect(cell(r, 'gamma', 'feasibility', 'absolute')).toBe(4.5);
    // Pairwise, k = 4 per idea, score = 3 + 2·s/4:
    //   novelty  Q1: α +4 → 5, β 0 → 3, γ −4 → 1;  Q2: α = β (orders disagree: 0), α +2 → 4, β +2 → 4, γ −4 → 1
    //   feasib.  Q1: α −4 → 1, β +2 → 4, γ +2 → 4;  Q2: α 0 → 3, β −4 → 1, γ +4 → 5
    expect(cell(r, 'alpha', 'novelty', 'pairwise')).toBe(4.5);
    expect(cell(r, 'beta', 'novelty', 'pairwise')).toBe(3.5);
    expect(cell(r, 'gamma', 'novelty', 'pairwise')).toBe(1);
    expect(cell(r, 'alpha', 'feasibility', 'pairwise')).toBe(2);
    expect(cell(r, 'beta', 'feasibility', 'pairwise')).toBe(2.5);
    expect(cell(r, 'gamma', 'feasibility', 'pairwise')).toBe(4.5);
    const alphaQ2 = r.ideas.find((i) => i.system === 'alpha' && i.id === 'line-4')!;
    expect(alphaQ2.pairwise.novelty).toEqual({ sum: 2, judgments: 4 });
    // One equal-tag pair per criterion was answered "A" in both orders: 1 event of 6 judged pairs each.
    expect(r.stats.positionBias.novelty).toMatchObject({ hits: 1, trials: 6 });
    expect(r.stats.positionBias.all).toMatchObject({ hits: 2, trials: 12 });
    // Human novelty = the tags: the absolute protocol agrees perfectly.
    expect(r.stats.human.novelty).toMatchObject({ n: 6, absoluteMae: 0 });
    expect(r.stats.human.novelty?.absolute?.tau).toBe(1);
    // Absolute and pairwise rank the systems the same way on novelty (α > β > γ).
    expect(r.stats.systemTau.novelty?.tau).toBe(1);
    const report = await readFile(join(dir, 'report.md'), 'utf8');
    expect(report).toContain(
      '| system | ideas | novelty (abs) | novelty (pair) | feasibility (abs) | feasibility (pair) | mean (abs) | mean (pair) |',
    );
    expect(report).toMatch(/\| alpha \| 2 \| 4\.50 \[[^\]]+\] \| 4\.50 /);
    expect(await readFile(join(dir, 'evaluation.svg'), 'utf8')).toMatch(/^<svg [\s\S]*<\/svg>\n$/);
  });

  it('resumes an interrupted run to the same results.json, judging only the missing units', async () => {
    const { input, dir, fake, router } = await setup();
    const options = {
      input,
      router,
      criteria: ['novelty', 'feasibility'] as const,
      protocols: ['absolute', 'pairwise'] as const,
    };
    const whole = await runEvaluation({
      ...options,
      criteria: [...options.criteria],
      protocols: [...options.protocols],
      outDir: join(dir, 'whole'),
    });
    const reference = await readFile(join(dir, 'whole', 'results.json'), 'utf8');
    expect(whole.ran).toBe(24);

    const controller = new AbortController();
    let seen = 0;
    const first = await runEvaluation({
      ...options,
      criteria: [...options.criteria],
      protocols: [...options.protocols],
      outDir: join(dir, 'resumed'),
      concurrency: 1,
      signal: controller.signal,
      onRecord: () => {
        seen += 1;
        if (seen === 7) controller.abort();
      },
    });
    expect(first.completed).toBe(false);
    const callsBefore = fake.callCount;
    const second = await runEvaluation({
      ...options,
      criteria: [...options.criteria],
      protocols: [...options.protocols],
      outDir: join(dir, 'resumed'),
    });
    expect(second.completed).toBe(true);
    expect(second.reused).toBe(first.ran);
    expect(second.ran).toBe(24 - first.ran);
    expect(fake.callCount - callsBefore).toBeLessThan(36);
    expect(await readFile(join(dir, 'resumed', 'results.json'), 'utf8')).toBe(reference);
  });

  it('leaves a failed rating out (no score, never a 1) and counts it with its error code', async () => {
    const { input, dir, router } = await setup((body) =>
      body.response_format?.json_schema?.name === 'rating' && shownIdeas(body)[0]!.includes('gamma')
        ? { kind: 'status', status: 500 }
        : taggedJudge(body),
    );
    const r = (
      await runEvaluation({
        input,
        router,
        outDir: dir,
        criteria: ['novelty'],
        protocols: ['absolute', 'pairwise'],
      })
    ).results!;
    expect(cell(r, 'gamma', 'novelty', 'absolute')).toBeNull();
    expect(r.stats.table.find((t) => t.system === 'gamma')?.cells.novelty?.absolute?.n).toBe(0);
    expect(cell(r, 'alpha', 'novelty', 'absolute')).toBe(4.5);
    expect(cell(r, 'gamma', 'novelty', 'pairwise')).toBe(1);
    expect(r.cost.absolute).toMatchObject({ units: 6, failed: 2, errors: { RW_JUDGE_UNAVAILABLE: 2 } });
  });

  it('refuses criterion match without a ground truth for every question', async () => {
    const { input, dir, fake, router } = await setup();
    await expect(
      runEvaluation({ input, router, outDir: dir, criteria: ['match'], protocols: ['absolute'] }),
    ).rejects.toThrow(/criterion "match" needs a ground_truth/);
    expect(fake.callCount).toBe(0);
  });
});

describe('evaluate input', () => {
  it('names the line and field of a bad row, a duplicate id and a conflicting ground truth', () => {
    expect(() => parseEvaluateInput('{"question":"q","system":"s"}')).toThrow(/input:1: field "idea"/);
    expect(() =>
      parseEvaluateInput(
        '{"id":"x","question":"q","system":"s","idea":"i"}\n{"id":"x","question":"q","system":"t","idea":"j"}',
      ),
    ).toThrow(/input:2: field "id": duplicate id "x"/);
    expect(() =>
      parseEvaluateInput(
        '{"question":"q","system":"s","idea":"i","ground_truth":"g"}\n{"question":"q","system":"t","idea":"j","ground_truth":"h"}',
      ),
    ).toThrow(/input:2: field "ground_truth"/);
    const lenient = parseEvaluateInput('{"question":"q","system":"s","idea":"i"}\nnot json\n', {
      skipInvalid: true,
    });
    expect(lenient.ideas).toHaveLength(1);
    expect(lenient.invalid).toEqual([expect.objectContaining({ line: 2, field: '(json)' })]);
  });

  it('parses the written sample datasets/ideas-sample.jsonl: 4 questions × 3 systems, human scores on 2', async () => {
    const input = parseEvaluateInput(await readFile('datasets/ideas-sample.jsonl', 'utf8'));
    expect(input.questions).toHaveLength(4);
    expect(input.systems).toEqual(['prompted', 'sft', 'rl-debate']);
    expect(input.humanCriteria).toEqual(['novelty', 'feasibility', 'effectiveness']);
    expect(input.ideas.filter((i) => Object.keys(i.human).length > 0)).toHaveLength(6);
  });
});

describe('evaluationStats intervals', () => {
  const idea = (q: number, system: string, score: number, k: number): IdeaOutcome => ({
    id: `${system}-${q}-${k}`,
    questionId: `q${q}`,
    system,
    absolute: { novelty: score },
    pairwise: { novelty: { sum: score - 3, judgments: 2 } },
    human: {},
  });
  const ideas: IdeaOutcome[] = [];
  for (let q = 0; q < 6; q++) {
    ideas.push(idea(q, 'alpha', 3 + (q % 3), 0), idea(q, 'beta', 1 + (q % 2), 1));
  }
  const stats = evaluationStats(ideas, [], {
    systems: ['alpha', 'beta'],
    criteria: ['novelty'],
    protocols: ['absolute', 'pairwise'],
    seed: 1,
    resamples: 200,
  });

  it('gives no CI to a system-level τ over 2 systems (it is ±1 whatever the data)', () => {
    expect(stats.systemTau.novelty?.tau).toBe(1);
    expect([stats.systemTau.novelty?.ci.lo, stats.systemTau.novelty?.ci.hi]).toEqual([null, null]);
    expect(stats.systemTau.novelty?.ci.note).toMatch(/cannot vary: τ over 2 systems/);
  });

  it('gives means the question jackknife-t interval', () => {
    const cell = stats.table[0]!.cells.novelty!.absolute!;
    expect(cell.ci.method).toBe('jackknife-t');
    expect(cell.ci.lo!).toBeLessThan(cell.mean!);
    expect(cell.ci.hi!).toBeGreaterThan(cell.mean!);
  });
});

describe('evaluate: intervals on the 1–5 scale and a τ over 3 systems (issue 40 item 8)', () => {
  const idea = (q: number, system: string, score: number): IdeaOutcome => ({
    id: `${system}-${q}`,
    questionId: `q${q}`,
    system,
    absolute: { novelty: score },
    pairwise: { novelty: { sum: score - 3, judgments: 2 } },
    human: {},
  });
  // alpha is near the top of the scale with one low question: the symmetric jackknife-t passes 5.
  const scores: Record<string, number[]> = {
    alpha: [5, 5, 5, 5, 3],
    beta: [2, 3, 2, 4, 3],
    gamma: [1, 2, 1, 1, 3],
  };
  const ideas = Object.entries(scores).flatMap(([system, list]) => list.map((v, q) => idea(q, system, v)));
  const stats = (systems: string[]) =>
    evaluationStats(
      ideas.filter((i) => systems.includes(i.system)),
      [],
      { systems, criteria: ['novelty'], protocols: ['absolute', 'pairwise'], seed: 1, resamples: 200 },
    );

  it('clamps a score interval to the scale and says so', () => {
    const alpha = stats(['alpha', 'beta', 'gamma']).table[0]!.cells.novelty!.absolute!;
    expect(alpha.mean).toBeCloseTo(4.6, 12);
    // Unclamped: 4.6 ± t(0.975, 4)·0.4 = [3.49, 5.71].
    expect(alpha.ci.hi).toBe(5);
    expect(alpha.ci.lo).toBeCloseTo(4.6 - 2.776445 * 0.4, 4);
    expect(alpha.ci.note).toBe('clamped to the 1–5 scale');
    const gamma = stats(['alpha', 'beta', 'gamma']).table[2]!.cells.novelty!.absolute!;
    expect(gamma.ci.lo).toBe(1);
    for (const row of stats(['alpha', 'beta', 'gamma']).table) {
      for (const cell of [row.cells.novelty?.absolute, row.cells.novelty?.pairwise, row.mean.absolute]) {
        expect(cell?.ci.lo ?? 1).toBeGreaterThanOrEqual(1);
        expect(cell?.ci.hi ?? 5).toBeLessThanOrEqual(5);
      }
    }
  });

  it('warns that a τ over 3 systems takes few values, not over 2 (no interval) or 4', () => {
    const three = stats(['alpha', 'beta', 'gamma']);
    expect(three.warnings).toEqual([expect.stringMatching(/ranks only 3 systems.*not informative/)]);
    expect(stats(['alpha', 'beta']).warnings).toEqual([]);
    const four = [...ideas, ...[3, 3, 4, 2, 2].map((v, q) => idea(q, 'delta', v))];
    const systems = ['alpha', 'beta', 'gamma', 'delta'];
    const opts = { systems, criteria: ['novelty' as const], seed: 1, resamples: 200 };
    expect(evaluationStats(four, [], { ...opts, protocols: ['absolute', 'pairwise'] }).warnings).toEqual([]);
    const report = renderEvaluationReport({
      stats: three,
      criteria: ['novelty'],
      protocols: ['absolute', 'pairwise'],
      backend: 'offline',
      promptVersion: 'v',
      input: { sha256: 'x', ideas: 15, questions: 5, systems: ['alpha', 'beta', 'gamma'], invalidLines: 0 },
      resamples: 200,
      seed: 1,
      cost: {},
    } as unknown as EvaluateResults);
    expect(report).toContain('> **Warning**: the system-level τ ranks only 3 systems');
    expect(report).toContain('clamped to the 1–5 scale');
  });
});
