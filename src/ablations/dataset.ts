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

function describeIssue(issue: z.core.$ZodIssue): { field: string; message: string } {
  const field = issue.path.length === 0 ? '(root)' : issue.path.map(String).join('.');
  return { field, message: issue.message };
}

function labelConsistency(item: DatasetItem): InvalidLine | undefined {
  const positive = item.kind === 'positive';
  if (positive === (item.label === 1)) return undefined;
  return { line: 0, field: 'label', message: `label ${item.label} contradicts kind "${item.kind}"` };
}

/**
 * Parses JSONL text. Blank lines are ignored. A bad line (invalid JSON, a schema violation, a label that
 * contradicts `kind`, a duplicate `id`) throws `RW_BAD_REQUEST` naming the line and the field, unless
 * `skipInvalid` is set, in which case it is skipped and listed in `invalid`.
 */
export function parseDataset(text: string, options: ParseOptions = {}): Omit<Dataset, 'sha256'> {
  const name = options.name ?? 'dataset';
  const items: DatasetItem[] = [];
  const invalid: InvalidLine[] = [];
  const seen = new Map<string, number>();
  const lines = text.split('\n');
  for (let index = 0; index < lines.length; index++) {
    const raw = lines[index]?.trim() ?? '';
    if (raw === '') continue;
    const line = index + 1;
    let problem: InvalidLine | undefined;
    let json: unknown;
    try {
      json = JSON.parse(raw);
    } catch (err) {
      problem = { line, field: '(json)', message: err instanceof Error ? err.message : String(err) };
    }
    if (problem === undefined) {
      const parsed = DatasetItem.safeParse(json);
      if (!parsed.success) {
        const first = parsed.error.issues[0];
        problem =
          first === undefined
            ? { line, field: '(root)', message: 'invalid' }
            : { line, ...describeIssue(first) };
      } else {
        const inconsistent = labelConsistency(parsed.data);
        const previous = seen.get(parsed.data.id);
        if (inconsistent !== undefined) problem = { ...inconsistent, line };
        else if (previous !== undefined)
          problem = {
            line,
            field: 'id',
            message: `duplicate id "${parsed.data.id}" (first on line ${previous})`,
          };
        else {
          seen.set(parsed.data.id, line);
          items.push(parsed.data);
        }
      }
    }
    if (problem === undefined) continue;
    if (options.skipInvalid !== true) {
      throw new RewardError(
        'RW_BAD_REQUEST',
        `${name}:${line}: field "${problem.field}": ${problem.message}`,
        {
          details: [problem],
        },
      );
    }
    invalid.push(problem);
  }
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
