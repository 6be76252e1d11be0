/**
 * Input of `npm run evaluate`: a JSONL of generated ideas, one per line,
 * `{question, system, idea, ground_truth?, human?, id?}` — several systems (idea generators) per question.
 * Schema: datasets/README.md. Extra keys are ignored.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { z } from 'zod';

import { RewardError } from '../errors.js';
import { CriterionName } from '../roles/criteria.js';
import type { Criterion } from '../roles/types.js';

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
  invalid: Array<{ line: number; field: string; message: string }>;
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
  const name = options.name ?? 'input';
  const ideas: Idea[] = [];
  const invalid: EvaluateInput['invalid'] = [];
  const ids = new Set<string>();
  const groundTruths = new Map<string, string>();
  const lines = text.split('\n');
  for (let index = 0; index < lines.length; index++) {
    const raw = lines[index]?.trim() ?? '';
    if (raw === '') continue;
    const line = index + 1;
    let problem: { field: string; message: string } | undefined;
    let json: unknown;
    try {
      json = JSON.parse(raw);
    } catch (err) {
      problem = { field: '(json)', message: err instanceof Error ? err.message : String(err) };
    }
    if (problem === undefined) {
      const parsed = EvaluateRow.safeParse(json);
      if (!parsed.success) {
        const first = parsed.error.issues[0];
        problem = {
          field: first === undefined || first.path.length === 0 ? '(root)' : first.path.map(String).join('.'),
          message: first?.message ?? 'invalid',
        };
      } else {
        const row = parsed.data;
        const id = row.id ?? `line-${line}`;
        const qid = questionId(row.question);
        const known = groundTruths.get(qid);
        if (ids.has(id)) problem = { field: 'id', message: `duplicate id "${id}"` };
        else if (row.ground_truth !== undefined && known !== undefined && known !== row.ground_truth) {
          problem = {
            field: 'ground_truth',
            message: 'differs from the ground truth given earlier for this question',
          };
        } else {
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
        }
      }
    }
    if (problem === undefined) continue;
    if (options.skipInvalid !== true) {
      throw new RewardError(
        'RW_BAD_REQUEST',
        `${name}:${line}: field "${problem.field}": ${problem.message}`,
        {
          details: [{ line, ...problem }],
        },
      );
    }
    invalid.push({ line, ...problem });
  }
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
