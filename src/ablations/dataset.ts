import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { RewardError } from '../errors.js';

/**
 * One labelled (question, candidate, ground truth) triple; the schema of `datasets/README.md` and of
 * `../shared/datasets/*.jsonl`. Extra keys are ignored (stripped), so a set may carry its own annotations.
 */
export const DatasetItem = z.object({
  id: z.string().min(1),
  question: z.string(),
  candidate: z.string(),
  ground_truth: z.string().min(1),
  label: z.union([z.literal(0), z.literal(1)]),
  kind: z.enum(['positive', 'hard_negative', 'easy_negative']),
  source: z.string(),
  venue: z.string(),
  area: z.string(),
  expert_score: z.number().min(0).max(5).optional(),
  gpt4o_score: z.number().min(0).max(5).optional(),
  annotator: z.string().optional(),
  second_expert_score: z.number().min(0).max(5).optional(),
});
export type DatasetItem = z.infer<typeof DatasetItem>;

/** A line that failed validation: 1-based line number, the offending field (`(json)` for bad JSON). */
export interface InvalidLine {
  line: number;
  field: string;
  message: string;
}

export interface Dataset {
  items: DatasetItem[];
  /** Lines skipped under `skipInvalid` (empty otherwise: the first bad line throws). */
  invalid: InvalidLine[];
  /** sha256 of the file bytes, 16 hex: ties a results directory to the data it was computed on. */
  sha256: string;
}

export interface ParseOptions {
  /** Skip and report bad lines instead of stopping at the first one (default false). */
  skipInvalid?: boolean | undefined;
  /** Name used in error messages (a path). */
  name?: string | undefined;
}

/** What is wrong with a line: the offending field and why. */
export type LineProblem = Omit<InvalidLine, 'line'>;

/**
 * The line loop of the JSONL readers (labelled sets, evaluate inputs). Blank lines are ignored. A line is bad
 * when it is not JSON, fails `schema` (its first issue names the field), or `accept(row, line)` returns a
 * problem (a row it keeps it records itself). A bad line throws `RW_BAD_REQUEST` `name:line: field "F": …`,
 * unless `skipInvalid` is set: then it is skipped, and the skipped lines are returned.
 */
export function parseJsonlLines<T>(
  text: string,
  schema: z.ZodType<T>,
  options: { name: string; skipInvalid?: boolean | undefined },
  accept: (row: T, line: number) => LineProblem | undefined,
): InvalidLine[] {
  const invalid: InvalidLine[] = [];
  const lines = text.split('\n');
  for (let index = 0; index < lines.length; index++) {
    const raw = lines[index]?.trim() ?? '';
    if (raw === '') continue;
    const line = index + 1;
    let problem: LineProblem | undefined;
    let json: unknown;
    try {
      json = JSON.parse(raw);
    } catch (err) {
      problem = { field: '(json)', message: err instanceof Error ? err.message : String(err) };
    }
    if (problem === undefined) {
      const parsed = schema.safeParse(json);
      if (!parsed.success) {
        const first = parsed.error.issues[0];
        problem = {
          field: first === undefined || first.path.length === 0 ? '(root)' : first.path.map(String).join('.'),
          message: first?.message ?? 'invalid',
        };
      } else problem = accept(parsed.data, line);
    }
    if (problem === undefined) continue;
    if (options.skipInvalid !== true) {
      throw new RewardError(
        'RW_BAD_REQUEST',
        `${options.name}:${line}: field "${problem.field}": ${problem.message}`,
        {
          details: [{ line, ...problem }],
        },
      );
    }
    invalid.push({ line, ...problem });
  }
  return invalid;
}

function labelConsistency(item: DatasetItem): LineProblem | undefined {
  const positive = item.kind === 'positive';
  if (positive === (item.label === 1)) return undefined;
  return { field: 'label', message: `label ${item.label} contradicts kind "${item.kind}"` };
}

/**
 * Parses JSONL text. Blank lines are ignored. A bad line (invalid JSON, a schema violation, a label that
 * contradicts `kind`, a duplicate `id`) throws `RW_BAD_REQUEST` naming the line and the field, unless
 * `skipInvalid` is set, in which case it is skipped and listed in `invalid`.
 */
export function parseDataset(text: string, options: ParseOptions = {}): Omit<Dataset, 'sha256'> {
  const items: DatasetItem[] = [];
  const seen = new Map<string, number>();
  const invalid = parseJsonlLines(
    text,
    DatasetItem,
    { name: options.name ?? 'dataset', skipInvalid: options.skipInvalid },
    (item, line) => {
      const inconsistent = labelConsistency(item);
      if (inconsistent !== undefined) return inconsistent;
      const previous = seen.get(item.id);
      if (previous !== undefined)
        return { field: 'id', message: `duplicate id "${item.id}" (first on line ${previous})` };
      seen.set(item.id, line);
      items.push(item);
      return undefined;
    },
  );
  return { items, invalid };
}

/** Reads and parses a JSONL dataset file (see `parseDataset`). */
export async function loadDataset(path: string, options: ParseOptions = {}): Promise<Dataset> {
  const bytes = await readFile(path);
  const sha256 = createHash('sha256').update(bytes).digest('hex').slice(0, 16);
  return { ...parseDataset(bytes.toString('utf8'), { ...options, name: options.name ?? path }), sha256 };
}

/** The bootstrap cluster of an item: its ground truth (items sharing a paper are not independent). */
export function clusterKey(item: Pick<DatasetItem, 'ground_truth'>): string {
  return createHash('sha256').update(item.ground_truth).digest('hex').slice(0, 16);
}

/** Clusters (by ground truth) in first-appearance order and each item's cluster index. */
export function clusterIndex(items: readonly DatasetItem[]): { count: number; of: number[] } {
  const index = new Map<string, number>();
  const of = items.map((item) => {
    const key = clusterKey(item);
    let i = index.get(key);
    if (i === undefined) {
      i = index.size;
      index.set(key, i);
    }
    return i;
  });
  return { count: index.size, of };
}
