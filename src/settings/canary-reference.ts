/**
 * The canary reference file (CANARY_REFERENCE): the judge's accuracy on the canary set measured offline,
 * before training, by `npm run ablate -- --canary-reference FILE` against the same judge (graph, prompt
 * version, models). The fleet-level canary test compares the pooled canaries of every replica with it, so
 * that a drop of the whole fleet at once (a new chat template, a bad model build rolled out everywhere) is
 * measured against something that does not move with the fleet.
 *
 * Per row (`rows`: each row's offline outcome) or overall (`overall`: n and correct, e.g. hand-written from
 * another tool). With rows, serving takes the accuracy over exactly the rows of its CANARY_DATASET and
 * refuses a set with a row the reference has no outcome for. A leaf: zod only; the writer is the ablation
 * CLI, the reader config.ts.
 */
import { z } from 'zod';

const Verdict = z.enum(['match', 'no_match']);

/** Who the reference measured: compared with the serving judge at start-up. */
export const CanaryJudge = z.strictObject({
  graph: z.strictObject({ name: z.string(), hash: z.string().min(1) }),
  prompt_version: z.string().min(1),
  /** `node=backend/model` of every LLM node, in graph order. */
  routes: z.array(z.string()),
});
export type CanaryJudge = z.infer<typeof CanaryJudge>;

export const CanaryReferenceFile = z
  .strictObject({
    kind: z.literal('canary-reference'),
    version: z.literal(1),
    written_at: z.string().optional(),
    tool: z.string().optional(),
    judge: CanaryJudge,
    dataset: z.strictObject({ path: z.string(), sha256: z.string() }).optional(),
    /** Each decided row's offline outcome (failed judgments are left out: no evidence). */
    rows: z
      .array(
        z.strictObject({ id: z.string().min(1), label: Verdict, verdict: Verdict, correct: z.boolean() }),
      )
      .optional(),
    overall: z.strictObject({
      n: z.number().int().min(1),
      correct: z.number().int().min(0),
      accuracy: z.number().min(0).max(1).optional(),
      ci95: z.tuple([z.number(), z.number()]).optional(),
    }),
  })
  .superRefine((file, ctx) => {
    if (file.overall.correct > file.overall.n) {
      ctx.addIssue({ code: 'custom', path: ['overall', 'correct'], message: 'more correct than n' });
    }
    if (file.rows !== undefined && file.rows.length !== file.overall.n) {
      ctx.addIssue({ code: 'custom', path: ['rows'], message: 'rows and overall.n disagree' });
    }
  });
export type CanaryReferenceFile = z.infer<typeof CanaryReferenceFile>;

/** The reference as the fleet test uses it: n decided canary rows, `wrong` of them answered wrong. */
export interface CanaryReference {
  source: 'file';
  path: string;
  n: number;
  wrong: number;
  judge: CanaryJudge;
  /** Whether n and wrong were taken over exactly the serving canary set (per-row file) or as written. */
  per_row: boolean;
}

/**
 * Parses a reference file's text and fits it to the serving canary rows: with per-row outcomes, the
 * accuracy over exactly those row ids. Throws an Error naming the field (or the first canary row the file
 * has no outcome for).
 */
export function parseCanaryReference(
  text: string,
  path: string,
  canaryIds: readonly string[],
): CanaryReference {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new Error(`${path}: not JSON: ${err instanceof Error ? err.message : String(err)}`);
  }
  const parsed = CanaryReferenceFile.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`${path}: field "${issue?.path.join('.') ?? ''}": ${issue?.message ?? 'invalid'}`);
  }
  const file = parsed.data;
  if (file.rows === undefined) {
    return {
      source: 'file',
      path,
      n: file.overall.n,
      wrong: file.overall.n - file.overall.correct,
      judge: file.judge,
      per_row: false,
    };
  }
  const byId = new Map(file.rows.map((r) => [r.id, r]));
  let n = 0;
  let wrong = 0;
  const missing: string[] = [];
  for (const id of canaryIds) {
    const row = byId.get(id);
    if (row === undefined) {
      missing.push(id);
      continue;
    }
    n += 1;
    if (!row.correct) wrong += 1;
  }
  if (missing.length > 0) {
    throw new Error(
      `${path}: no offline outcome for ${missing.length} of the ${canaryIds.length} canary rows (first: ${missing[0] ?? ''}); ` +
        'write the reference with the same CANARY_DATASET (`npm run ablate -- --dataset FILE --canary-reference OUT`)',
    );
  }
  return { source: 'file', path, n, wrong, judge: file.judge, per_row: true };
}

/** `node=backend/model` of every LLM node: what a reference and the serving judge must share. */
export function judgeRoutes(
  nodes: ReadonlyArray<{ id: string; backend: string; model: string }>,
): CanaryJudge['routes'] {
  return nodes.map((n) => `${n.id}=${n.backend}/${n.model}`);
}

/** Why the serving judge is not the one the reference measured, or undefined when it is. */
export function judgeMismatch(reference: CanaryJudge, serving: CanaryJudge): string | undefined {
  if (reference.graph.hash !== serving.graph.hash) {
    return `it measured graph ${reference.graph.name} (${reference.graph.hash}), the canaries judge ${serving.graph.name} (${serving.graph.hash})`;
  }
  if (reference.prompt_version !== serving.prompt_version) {
    return `it measured prompt version ${reference.prompt_version}, serving has ${serving.prompt_version}`;
  }
  if (reference.routes.join(',') !== serving.routes.join(',')) {
    return `it measured routes ${reference.routes.join(', ')}, serving has ${serving.routes.join(', ')}`;
  }
  return undefined;
}
