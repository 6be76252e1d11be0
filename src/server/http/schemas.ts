/**
 * Request bodies (zod), built once per app from the limits in config. Strict objects: an unknown key is a
 * 400 naming it. The NeMo-Gym `/verify` row is the one exception: it is echoed back, so its other keys
 * are kept.
 */
import { z } from 'zod';

import { RewardError } from '../../errors.js';
import { MAX_JUDGES } from '../../judge/compare.js';
import { SCHEDULES } from '../../judge/tournament.js';
import { CriterionName, needsGroundTruth } from '../../roles/criteria.js';
import { CONTROL_FIELDS } from '../controls/fields.js';

const NUL = '\u0000';

/** Any text field: NUL bytes are refused (they break prompts, logs and C-string tooling downstream). */
export const Text = z.string().refine((s) => !s.includes(NUL), { error: 'must not contain NUL bytes' });

/**
 * A rollout's text (a candidate, a response, an OpenRLHF query): anything the policy wrote. A NUL or an
 * unpaired surrogate in it is that rollout's defect, not the caller's: preparation rejects that candidate
 * alone (`invalid_text`, a real 0) and the request's other candidates are judged (src/judge/invalid-text.ts).
 */
export const Rollout = z.string();

/** At least one letter or digit: `"."`, zero-width spaces or punctuation alone carry nothing to judge. */
const CONTENT = /[\p{L}\p{N}]/u;

/** Text limits of a request, in characters (UTF-16 code units). */
export interface TextLimits {
  maxGroundTruthChars: number;
  maxQuestionChars: number;
}

/** A ground truth: judging a candidate against nothing would be a silent, meaningless reward. */
function groundTruth(maxChars: number) {
  return Text.refine((s) => s.trim() !== '', { error: 'must not be empty' })
    .refine((s) => s.length <= maxChars, {
      error: `too long: at most ${maxChars} characters (MAX_GROUND_TRUTH_CHARS)`,
      abort: true,
    })
    .refine((s) => CONTENT.test(s), { error: 'has no content (no letter or digit)' });
}

/** A question: optional (empty or whitespace means none), but one that is given must carry content. */
function question(maxChars: number) {
  return Text.refine((s) => s.length <= maxChars, {
    error: `too long: at most ${maxChars} characters (MAX_QUESTION_CHARS)`,
    abort: true,
  }).refine((s) => s.trim() === '' || CONTENT.test(s), { error: 'has no content (no letter or digit)' });
}

/** The object form of a label. */
function labelObject(limits: TextLimits) {
  return z.strictObject({
    ground_truth: groundTruth(limits.maxGroundTruthChars),
    question: question(limits.maxQuestionChars).optional(),
  });
}

/**
 * A label: the ground-truth string, `{ground_truth, question?}`, or that object as a JSON string. Only the
 * shape is checked here; the route checks the fields (naming `labels[i].ground_truth`) once it knows the form.
 */
const LabelShape = z.union([Text, z.record(z.string(), z.unknown())], {
  error: 'label must be a string (the ground truth) or an object {ground_truth, question?}',
});
export type Label = z.infer<typeof LabelShape>;

/** A preset name, or an inline graph spec (validated by compileGraph → 400 RW_INVALID_GRAPH). */
export const GraphField = z.union([z.string().min(1).max(64), z.record(z.string(), z.unknown())], {
  error: 'graph must be a preset name or a graph spec object',
});

/** A chat message as trainers send it (OpenAI style; content a string or a list of text parts). */
const Message = z.looseObject({
  role: z.string(),
  content: z
    .union([Text, z.array(z.looseObject({ type: z.string().optional(), text: Text.optional() })), z.null()])
    .optional(),
});
export type Message = z.infer<typeof Message>;

/** Operator controls (issue 21): the priority lane (priority.ts); adapters send `x-reward-priority`. */
export const Priority = z.enum(['high', 'normal']);

/** The longest `/v1/reward/group-mean` waits for a group's judgments in flight, ms (a judgment's seconds, with room). */
export const MAX_GROUP_MEAN_WAIT_MS = 120_000;

/** `?graph=NAME` on the trainer adapters (their bodies are fixed by the trainers). */
export const AdapterQuery = z.strictObject({ graph: z.string().min(1).max(64).optional() });

/** What every judging body may carry besides its content: a request id, the operator controls, a lane. */
const REQUEST_FIELDS = {
  request_id: z.string().max(200).optional(),
  // Operator controls (issue 21): deadline_ms, tag.
  ...CONTROL_FIELDS,
  priority: Priority.optional(),
};

/** The request schemas of every route, with the configured limits. */
export function createSchemas(maxCandidates: number, limits: TextLimits) {
  return {
    ...judgingSchemas(maxCandidates, limits),
    ...adapterSchemas(maxCandidates, limits),
    ...comparativeSchemas(maxCandidates, limits),
    GroundTruth: groundTruth(limits.maxGroundTruthChars),
  };
}

/** `/v1/reward`, `/v1/reward/batch` and `/v1/judge`. */
function judgingSchemas(maxCandidates: number, limits: TextLimits) {
  const GroundTruth = groundTruth(limits.maxGroundTruthChars);
  const Question = question(limits.maxQuestionChars);
  const Group = z.strictObject({
    question: Question.default(''),
    ground_truth: GroundTruth,
    candidates: z.array(Rollout).min(1).max(maxCandidates),
    graph: GraphField.optional(),
    include_transcripts: z.boolean().optional(),
    ...REQUEST_FIELDS,
  });

  const Batch = z
    .strictObject({
      groups: z
        .array(Group.omit({ include_transcripts: true, deadline_ms: true, tag: true, priority: true }))
        .min(1)
        .max(maxCandidates),
      graph: GraphField.optional(),
      include_transcripts: z.boolean().optional(),
      ...REQUEST_FIELDS,
    })
    .superRefine((body, ctx) => {
      let total = 0;
      for (const g of body.groups) total += g.candidates.length;
      if (total > maxCandidates) {
        ctx.addIssue({
          code: 'custom',
          path: ['groups'],
          message: `${total} candidates in all; at most ${maxCandidates} per request`,
        });
      }
    });

  const Judge = z.strictObject({
    question: Question.default(''),
    ground_truth: GroundTruth,
    candidate: Rollout,
    graph: GraphField.optional(),
    ...REQUEST_FIELDS,
  });

  /** POST /v1/reward/group-mean: a group as /v1/reward names it (src/server/serving/group-means.ts). */
  const GroupMeanQuery = z.strictObject({
    question: Question.default(''),
    ground_truth: GroundTruth,
    graph: GraphField.optional(),
    /** Wait up to this long for the group's judgments in flight (0: answer at once). */
    wait_ms: z.number().int().min(0).max(MAX_GROUP_MEAN_WAIT_MS).default(0),
  });
  return { Group, Batch, Judge, GroupMeanQuery };
}

/** The trainers' bodies: OpenRLHF, slime (one sample and `--group-rm`), NeMo-Gym's verify. */
function adapterSchemas(maxCandidates: number, limits: TextLimits) {
  const GroundTruth = groundTruth(limits.maxGroundTruthChars);
  const Question = question(limits.maxQuestionChars);
  const LabelObject = labelObject(limits);
  const OpenRlhf = z
    .strictObject({
      query: z.array(Rollout).max(maxCandidates),
      prompts: z.array(Text).optional(),
      labels: z.array(LabelShape),
    })
    .superRefine((body, ctx) => {
      if (body.prompts !== undefined && body.prompts.length !== body.query.length) {
        ctx.addIssue({
          code: 'custom',
          path: ['prompts'],
          message: `has ${body.prompts.length} items, query has ${body.query.length}`,
        });
      }
      if (body.labels.length !== body.query.length) {
        ctx.addIssue({
          code: 'custom',
          path: ['labels'],
          message: `has ${body.labels.length} items, query has ${body.query.length}`,
        });
      }
    });

  const Slime = z.strictObject({
    prompt: z.union([Text, z.array(Message)], { error: 'prompt must be a string or a list of messages' }),
    response: Rollout,
    label: LabelShape,
    /** Idempotency id: a retry with the same id and body joins or replays the judgment. */
    rollout_id: z.union([z.string().min(1).max(200), z.number().int()]).optional(),
  });

  const ResponsesInputItem = z.looseObject({
    role: z.string().optional(),
    content: z
      .union([Text, z.array(z.looseObject({ type: z.string().optional(), text: Text.optional() }))])
      .optional(),
  });
  const Verify = z.looseObject({
    responses_create_params: z.looseObject({ input: z.union([Text, z.array(ResponsesInputItem)]) }),
    response: z.looseObject({
      output: z.array(
        z.looseObject({
          type: z.string(),
          role: z.string().optional(),
          content: z
            .union([Rollout, z.array(z.looseObject({ type: z.string(), text: Rollout.optional() }))])
            .optional(),
        }),
      ),
    }),
    ground_truth: GroundTruth,
    question: Question.optional(),
    instance_config: z.record(z.string(), z.unknown()).optional(),
  });

  /** slime `--group-rm`: the samples of one (or more) prompt groups. */
  const SlimeGroup = z.strictObject({ samples: z.array(Slime).min(1).max(maxCandidates) });

  return { OpenRlhf, Slime, Verify, LabelObject, SlimeGroup };
}

/** `/v1/rank`, `/v1/best-of-n` and the group adapters' query. */
function comparativeSchemas(maxCandidates: number, limits: TextLimits) {
  const GroundTruth = groundTruth(limits.maxGroundTruthChars);
  const Question = question(limits.maxQuestionChars);
  /** Criterion rules shared by the comparative bodies: `match` needs a ground truth, and so does omitting it. */
  const checkCriterion = (
    body: { ground_truth?: string | undefined; criterion?: string | undefined },
    ctx: z.RefinementCtx,
  ): void => {
    if (body.criterion === undefined && body.ground_truth === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['criterion'],
        message: 'required when there is no ground_truth',
      });
    }
    const c = CriterionName.safeParse(body.criterion);
    if (c.success && needsGroundTruth(c.data) && body.ground_truth === undefined) {
      ctx.addIssue({ code: 'custom', path: ['ground_truth'], message: `required by criterion "${c.data}"` });
    }
  };
  const Comparative = {
    question: Question.default(''),
    ground_truth: GroundTruth.optional(),
    criterion: CriterionName.optional(),
    judges: z.number().int().min(1).max(MAX_JUDGES).default(1),
    ...REQUEST_FIELDS,
  };
  const Rank = z
    .strictObject({
      ...Comparative,
      candidates: z.array(Rollout).min(2).max(maxCandidates),
      schedule: z.enum(SCHEDULES).default('all_pairs'),
      method: z.enum(['bradley_terry', 'elo']).default('bradley_terry'),
      reward_mode: z.enum(['graded', 'top_k']).default('graded'),
      top_k: z.number().int().min(1).optional(),
      include_transcripts: z.boolean().optional(),
    })
    .superRefine((body, ctx) => {
      checkCriterion(body, ctx);
      if (body.top_k !== undefined && body.reward_mode !== 'top_k') {
        ctx.addIssue({ code: 'custom', path: ['top_k'], message: 'only with reward_mode "top_k"' });
      }
    });

  const BestOfN = z
    .strictObject({
      ...Comparative,
      candidates: z.array(Rollout).min(1).max(maxCandidates),
      method: z.enum(['tournament', 'pick']).default('tournament'),
      schedule: z.enum(SCHEDULES).default('all_pairs'),
    })
    .superRefine(checkCriterion);

  /** `?schedule=…&criterion=…` on the group adapters (their bodies are fixed by the trainers). */
  const GroupQuery = z.strictObject({
    schedule: z.enum(SCHEDULES).default('all_pairs'),
    criterion: CriterionName.default('match'),
    reward_mode: z.enum(['graded', 'top_k']).default('graded'),
    top_k: z.coerce.number().int().min(1).optional(),
    judges: z.coerce.number().int().min(1).max(MAX_JUDGES).default(1),
  });

  return { Rank, BestOfN, GroupQuery };
}

export type Schemas = ReturnType<typeof createSchemas>;

function formatPath(path: ReadonlyArray<PropertyKey>): string {
  let out = '';
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else out += out === '' ? String(part) : `.${String(part)}`;
  }
  return out === '' ? '(body)' : out;
}

/** One line per problem, each naming the field: `candidates[3]: must not contain NUL bytes`. */
export function toIssues(
  error: z.ZodError,
  prefix: ReadonlyArray<PropertyKey> = [],
): Array<{ path: string; message: string }> {
  const issues: Array<{ path: string; message: string }> = [];
  for (const issue of error.issues) {
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys)
        issues.push({ path: formatPath([...prefix, ...issue.path, key]), message: 'unknown key' });
    } else {
      issues.push({ path: formatPath([...prefix, ...issue.path]), message: issue.message });
    }
  }
  return issues;
}

/** Parses a body (or the part of it at `prefix`) or throws 400 RW_BAD_REQUEST naming the first offending field. */
export function parseOr400<T>(
  schema: z.ZodType<T>,
  value: unknown,
  what = 'body',
  prefix: ReadonlyArray<PropertyKey> = [],
): T {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issues = toIssues(result.error, prefix);
  const first = issues[0];
  const more = issues.length > 1 ? ` (and ${issues.length - 1} more)` : '';
  const message =
    first === undefined ? `invalid ${what}` : `invalid ${what}: ${first.path}: ${first.message}${more}`;
  throw new RewardError('RW_BAD_REQUEST', message, { details: issues.slice(0, 20) });
}
