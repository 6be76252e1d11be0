/**
 * Input of `npm run evaluate`: a JSONL of generated ideas, one per line,
 * `{question, system, idea, ground_truth?, human?, id?}` — several systems (idea generators) per question.
 * Schema: datasets/README.md. Extra keys are ignored.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { z } from 'zod';

import { CriterionName } from '../../roles/criteria.js';
import type { Criterion } from '../../roles/types.js';
import { parseJsonlLines, type InvalidLine } from '../dataset.js';

/** Human scores per criterion (any finite numbers on the annotators' own scale; agreement is by rank). */
const HumanScores = z.partialRecord(CriterionName, z.number().finite());

export const EvaluateRow = z.object({
  id: z.string().min(1).max(200).optional(),
  question: z.string().min(1),
  system: z.string().min(1).max(64),
  idea: z.string(),
  ground_truth: z.string().min(1).optional(),
  human: HumanScores.optional(),
});
export type EvaluateRow = z.infer<typeof EvaluateRow>;

/** One idea, as the evaluation uses it. */
export interface Idea {
  /** The row's `id`, else `line-N`. */
  id: string;
  line: number;
  question: string;
  /** 16-hex sha256 of the question: the bootstrap cluster and the question's id in reports. */
  questionId: string;
  system: string;
  text: string;
  groundTruth: string | null;
  human: Partial<Record<Criterion, number>>;
}

export interface QuestionGroup {
  questionId: string;
  question: string;
  groundTruth: string | null;
  /** Ideas of this question in input order. */
  ideas: Idea[];
}

export interface EvaluateInput {
  ideas: Idea[];
  questions: QuestionGroup[];
  /** Systems in order of first appearance. */
  systems: string[];
  /** Criteria that have at least one human score. */
  humanCriteria: Criterion[];
  invalid: InvalidLine[];
  /** 16-hex sha256 of the file bytes. */
  sha256: string;
}

export const questionId = (question: string): string =>
  createHash('sha256').update(question).digest('hex').slice(0, 16);

/**
 * Parses the JSONL text. A bad line (invalid JSON or schema, a duplicate `id`, a ground truth that differs
 * from the one given earlier for the same question) throws RW_BAD_REQUEST naming the line and field, unless
 * `skipInvalid` is set (then it is listed in `invalid`).
 */
export function parseEvaluateInput(
  text: string,
  options: { name?: string | undefined; skipInvalid?: boolean | undefined } = {},
): Omit<EvaluateInput, 'sha256'> {
  const ideas: Idea[] = [];
  const ids = new Set<string>();
  const groundTruths = new Map<string, string>();
  const invalid = parseJsonlLines(
    text,
    EvaluateRow,
    { name: options.name ?? 'input', skipInvalid: options.skipInvalid },
    (row, line) => {
      const id = row.id ?? `line-${line}`;
      const qid = questionId(row.question);
      const known = groundTruths.get(qid);
      if (ids.has(id)) return { field: 'id', message: `duplicate id "${id}"` };
      if (row.ground_truth !== undefined && known !== undefined && known !== row.ground_truth) {
        return {
          field: 'ground_truth',
          message: 'differs from the ground truth given earlier for this question',
        };
      }
      ids.add(id);
      if (row.ground_truth !== undefined) groundTruths.set(qid, row.ground_truth);
      ideas.push({
        id,
        line,
        question: row.question,
        questionId: qid,
        system: row.system,
        text: row.idea,
        groundTruth: row.ground_truth ?? null,
        human: row.human ?? {},
      });
      return undefined;
    },
  );
  const questions = new Map<string, QuestionGroup>();
  for (const idea of ideas) {
    // A question's ground truth may be given on any of its rows: every idea of it sees the same one.
    idea.groundTruth = groundTruths.get(idea.questionId) ?? null;
    let group = questions.get(idea.questionId);
    if (group === undefined) {
      group = {
        questionId: idea.questionId,
        question: idea.question,
        groundTruth: idea.groundTruth,
        ideas: [],
      };
      questions.set(idea.questionId, group);
    }
    group.ideas.push(idea);
  }
  const systems = [...new Set(ideas.map((i) => i.system))];
  const humanCriteria = CriterionName.options.filter((c) => ideas.some((i) => i.human[c] !== undefined));
  return { ideas, questions: [...questions.values()], systems, humanCriteria, invalid };
}

export async function loadEvaluateInput(
  path: string,
  options: { skipInvalid?: boolean | undefined } = {},
): Promise<EvaluateInput> {
  const bytes = await readFile(path);
  const sha256 = createHash('sha256').update(bytes).digest('hex').slice(0, 16);
  return { ...parseEvaluateInput(bytes.toString('utf8'), { ...options, name: path }), sha256 };
}

/**
 * `evaluate --limit N`: only the first N questions (in input order), each with every idea of it, so the
 * pairwise protocol still sees every system's idea of a kept question. Systems and human criteria follow
 * the kept ideas.
 */
export function limitQuestions(input: EvaluateInput, limit: number | undefined): EvaluateInput {
  if (limit === undefined || limit >= input.questions.length) return input;
  const questions = input.questions.slice(0, limit);
  const kept = new Set(questions.map((q) => q.questionId));
  const ideas = input.ideas.filter((i) => kept.has(i.questionId));
  return {
    ...input,
    ideas,
    questions,
    systems: [...new Set(ideas.map((i) => i.system))],
    humanCriteria: input.humanCriteria.filter((c) => ideas.some((i) => i.human[c] !== undefined)),
  };
}
