/**
 * The canary set (CANARY_DATASET): labelled rows in the dataset schema of `datasets/README.md` (the same
 * JSONL `ablate` reads), validated here for serving, which does not import the ablations. Only the fields a
 * canary needs are kept; other keys are ignored. A leaf: zod only.
 */
import { z } from 'zod';

const CanaryLine = z.object({
  id: z.string().min(1),
  question: z.string(),
  candidate: z.string(),
  ground_truth: z.string().min(1),
  label: z.union([z.literal(0), z.literal(1)]),
  kind: z.enum(['positive', 'hard_negative', 'easy_negative']).optional(),
});

export interface CanaryRow {
  id: string;
  question: string;
  candidate: string;
  groundTruth: string;
  /** The verdict a correct judge gives. */
  label: 'match' | 'no_match';
}

/**
 * Parses the JSONL text; throws an Error naming `name:line` and the field on the first bad line (invalid
 * JSON, a schema violation, a duplicate id, a `kind` contradicting `label`), or when no row has each label
 * (an always-`match` judge must be able to get a canary wrong, and so must an always-`no_match` one).
 */
export function parseCanaryDataset(text: string, name: string): CanaryRow[] {
  const rows: CanaryRow[] = [];
  const ids = new Set<string>();
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i]?.trim() ?? '';
    if (raw === '') continue;
    const at = `${name}:${i + 1}`;
    let json: unknown;
    try {
      json = JSON.parse(raw);
    } catch (err) {
      throw new Error(`${at}: field "(json)": ${err instanceof Error ? err.message : String(err)}`);
    }
    const parsed = CanaryLine.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new Error(`${at}: field "${issue?.path.join('.') ?? ''}": ${issue?.message ?? 'invalid'}`);
    }
    const row = parsed.data;
    if (ids.has(row.id)) throw new Error(`${at}: field "id": duplicate id ${row.id}`);
    if (row.kind !== undefined && (row.kind === 'positive') !== (row.label === 1)) {
      throw new Error(`${at}: field "label": ${row.label} contradicts kind ${row.kind}`);
    }
    ids.add(row.id);
    rows.push({
      id: row.id,
      question: row.question,
      candidate: row.candidate,
      groundTruth: row.ground_truth,
      label: row.label === 1 ? 'match' : 'no_match',
    });
  }
  if (!rows.some((r) => r.label === 'match') || !rows.some((r) => r.label === 'no_match')) {
    throw new Error(`${name}: needs rows of both labels (1 and 0); has ${rows.length} row(s)`);
  }
  return rows;
}
