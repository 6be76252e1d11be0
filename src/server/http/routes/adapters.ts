/**
 * Trainer adapters: the request/response shapes trainers already speak.
 * - POST /get_reward  OpenRLHF (`--remote_rm_url http://host:8080/get_reward`)
 * - POST /slime       slime (`--rm-type remote_rm --rm-url http://host:8080/slime --reward-key reward`)
 * - POST /verify      NeMo-Gym resource-server verify
 * Each takes `?graph=NAME` (a preset) since the trainers' bodies are fixed.
 */

import type { FastifyInstance, FastifyRequest } from 'fastify';

import { RewardError } from '../../../errors.js';
import { groupOf, idempotencyKey, presetChoice, type ServerContext } from '../context.js';
import { clientDeadlineMs, requestControls } from '../request-controls.js';
import type { GraphChoice, JudgedItem } from '../../serving/judge-types.js';
import { judgeInFlight, recordJudged } from '../../serving/group-means.js';
import {
  afterAssistantHeader,
  lastUserTurn,
  responseAfterPrompt,
  splitAtLastAssistantHeader,
  stripChatTokens,
} from '../../../text/chat-tokens.js';
import { traceOpenedBy, type ReasoningFormat } from '../../../text/reasoning.js';
import { laneOf, PRIORITY_HEADER } from '../../admission/priority.js';
import { AdapterQuery, parseOr400, type Label, type Message, type Schemas } from '../schemas.js';
import { stampsOf, votesOf } from '../../controls/stamps.js';
import {
  failureLogs,
  isMasked,
  isUnrewarded,
  judgmentOutcome,
  maskedReward,
  openRlhfReward,
  rejectionLogs,
  statusOf,
  trainerFailure,
  trainerReward,
  trainerScore,
  type Outcome,
} from '../../serving/outcomes.js';

/** The rollout's own text: `query` minus its `prompt` prefix (found despite pad/BOS tokens, whitespace and
 * NFKC differences in the decode), as the query spells it: its control tokens stay, for the one preparation
 * path (src/judge/candidate.ts) to find the trace and the end of the turn by. Without a prompt the query is
 * the rollout (after its first assistant header, when it is chat-templated). A query that does not start
 * with its prompt is refused: judging prompt + response would reward the prompt. Without a prompt the rollout
 * is the query's last assistant turn (`splitAtLastAssistantHeader`), on every route that reads a query. */
export function candidateFromQuery(query: string, prompt: string | undefined, index = 0): string {
  if (prompt === undefined || stripChatTokens(prompt) === '') return afterAssistantHeader(query);
  const response = responseAfterPrompt(query, prompt);
  if (response === undefined) {
    throw new RewardError(
      'RW_PROMPT_MISMATCH',
      `query[${index}] does not start with prompts[${index}] (after removing control tokens and whitespace); refusing to judge the prompt as part of the rollout`,
      { details: { index } },
    );
  }
  return response;
}

/**
 * The rollout with the reasoning-trace opener its prompt ended with (`<think>` from a Qwen3 / DeepSeek-R1
 * template, a harmony analysis opener) put back, so a trace the policy never closed is found
 * (`truncated_reasoning`). Text only: the rollout is prepared where every candidate is (src/judge/candidate.ts).
 */
export function withPromptTrace(
  candidate: string,
  prompt: string | readonly Message[] | undefined,
  format: ReasoningFormat,
): string {
  if (prompt === undefined) return candidate;
  // A message list (slime without --apply-chat-template) is templated by the engine: what the rollout
  // continues is a last assistant message (a prefill such as `<think>\n`), whose opener is put back as a
  // string prompt's is (issue 38 item 6). Without one, the generation prompt is the tokenizer's and is not
  // sent: a trace is then found by its own markers (a closing marker alone counts).
  const last = typeof prompt === 'string' ? undefined : prompt[prompt.length - 1];
  const text =
    typeof prompt === 'string' ? prompt : last?.role === 'assistant' ? partsText(last.content) : '';
  const opener = traceOpenedBy(text, format);
  return opener === undefined ? candidate : `${opener}${candidate}`;
}

/**
 * An OpenRLHF item's rollout, as every route that reads a query takes it: `candidateFromQuery`, with the trace
 * opener its prompt ended with put back (without `prompts`: the query's own prompt, before its last assistant
 * header).
 */
export function rolloutOfQuery(
  query: string,
  prompt: string | undefined,
  index: number,
  format: ReasoningFormat,
): string {
  const templated = prompt ?? splitAtLastAssistantHeader(query).prompt;
  return withPromptTrace(candidateFromQuery(query, prompt, index), templated, format);
}

/** Every text-bearing part of a message's content (`text`, `output_text`, `input_text`, a `refusal`). */
function partsText(content: Message['content']): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  const texts: string[] = [];
  for (const part of content) {
    const refusal: unknown = part['refusal'];
    if (typeof part.text === 'string' && part.text !== '') texts.push(part.text);
    else if (typeof refusal === 'string' && refusal !== '') texts.push(refusal);
  }
  return texts.join('\n');
}

/**
 * The question of an OpenRLHF item, taken the way every route takes it (issue 38 item 6): the label's
 * question, else the last user turn of the prompt; without `prompts`, of the query before its last assistant
 * turn (the prompt the query starts with), so `question_restated` and the cache key see the same question
 * whether or not the trainer sent `prompts`.
 */
export function questionOfQuery(
  labelQuestion: string | undefined,
  query: string,
  prompt: string | undefined,
): string {
  if (labelQuestion !== undefined) return labelQuestion;
  const templated = prompt ?? splitAtLastAssistantHeader(query).prompt;
  return templated === undefined ? '' : questionFromMessages(templated);
}

/** A prompt as a trainer sends it: a chat-templated string's last user turn (else the string without
 * control tokens), or a chat's last user message, else every message's text. */
export function questionFromMessages(messages: string | readonly Message[]): string {
  if (typeof messages === 'string') return lastUserTurn(messages) ?? stripChatTokens(messages);
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m?.role === 'user') return stripChatTokens(partsText(m.content));
  }
  return stripChatTokens(messages.map((m) => partsText(m.content)).join('\n'));
}

/** A label: the ground truth, `{ground_truth, question?}`, or that object as a JSON string (as some
 * trainers' datasets store it); the parsed object goes through the same checks as an inline one. */
export function labelParts(label: Label, schemas: Schemas, at: ReadonlyArray<PropertyKey>): LabelFields {
  if (typeof label !== 'string') {
    const parsed = parseOr400(schemas.LabelObject, label, 'body', at);
    return { groundTruth: parsed.ground_truth, question: parsed.question };
  }
  const trimmed = label.trim();
  if (trimmed.startsWith('{') && trimmed.endsWith('}')) {
    let json: unknown;
    try {
      json = JSON.parse(trimmed);
    } catch {
      json = undefined;
    }
    if (json !== null && typeof json === 'object' && Object.hasOwn(json, 'ground_truth')) {
      const parsed = parseOr400(schemas.LabelObject, json, 'body (a JSON-string label)', at);
      return { groundTruth: parsed.ground_truth, question: parsed.question };
    }
  }
  return { groundTruth: parseOr400(schemas.GroundTruth, label, 'body', at), question: undefined };
}

interface LabelFields {
  groundTruth: string;
  question: string | undefined;
}

/** A NeMo-Gym row's own id: `rollout_id`, else its `(_ng_task_index, _ng_rollout_index)` pair. */
function nemoGymId(row: Record<string, unknown>): string | number | undefined {
  const rolloutId = row['rollout_id'];
  if (typeof rolloutId === 'string' || typeof rolloutId === 'number') return rolloutId;
  const task = row['_ng_task_index'];
  const rollout = row['_ng_rollout_index'];
  return Number.isInteger(task) && Number.isInteger(rollout)
    ? `ng:${String(task)}:${String(rollout)}`
    : undefined;
}

/** The id POST /v1/cancel {"request_ids"} names a NeMo-Gym row by: its rollout id or index pair. */
function verifyId(row: Record<string, unknown>): string | undefined {
  const id = nemoGymId(row);
  return id === undefined ? undefined : String(id);
}

/** What `/slime` and `/verify` report about the judgment behind their reward. */
function judgeSummary(judged: JudgedItem, choice: GraphChoice, backend: string) {
  const j = judged.judgment;
  const outcome = judgmentOutcome(j);
  return {
    score: trainerScore(outcome, undefined),
    status: statusOf(outcome),
    verdict: j.verdict,
    cached: judged.cached,
    judgment_id: judged.judgmentId,
    ...(j.reason === undefined ? {} : { reason: j.reason }),
    reasoning_chars: judged.reasoningChars ?? 0,
    graph: { name: choice.graph.name, hash: choice.graph.hash },
    backend,
  };
}

/** OpenRLHF's `extra_logs`: it logs the mean of each list, so the same keys for every item, numbers only. */
function openRlhfLogs(
  judged: readonly JudgedItem[],
  outcomes: readonly Outcome[],
  votes: ReadonlyArray<ReadonlyArray<{ stance: string }>>,
): Record<string, number[]> {
  return {
    ...failureLogs(outcomes),
    // A deciding reply that contradicts itself: a rising mean is a judge (or prompt) problem.
    incoherent: judged.map((j) => (j.judgment.incoherent ? 1 : 0)),
    cached: judged.map((j) => (j.cached ? 1 : 0)),
    score: judged.map((j) => j.judgment.score ?? 0),
    latency_s: judged.map((j) => j.judgment.latencyMs / 1000),
    // The reasoning trace's length, for a trainer that penalises it; and why items were a real 0.
    reasoning_chars: judged.map((j) => j.reasoningChars ?? 0),
    ...rejectionLogs(outcomes),
    votes: votes.map((v) => v.length),
    votes_match_share: votes.map((v) =>
      v.length === 0 ? 0 : v.filter((x) => x.stance === 'match').length / v.length,
    ),
  };
}

/**
 * Until when a `/get_reward` request may be answered (GET_REWARD_HOLD_MS after it arrived), unless its
 * client sent a deadline of its own (that one then holds). OpenRLHF's remote reward client gives each
 * attempt 180 s and then retries 5 times 1 s apart, ignoring Retry-After: holding work that fits this
 * window is better than a refusal its retries cannot wait out.
 */
function getRewardHoldUntil(ctx: ServerContext, request: FastifyRequest): number | undefined {
  const holdMs = ctx.config.getRewardHoldMs;
  if (holdMs <= 0 || clientDeadlineMs(request, undefined) !== undefined) return undefined;
  return ctx.now() + holdMs;
}

export function registerAdapterRoutes(app: FastifyInstance, ctx: ServerContext): void {
  const { schemas, service, config } = ctx;
  const failureReward = config.failureReward;

  const graphFor = (query: unknown): GraphChoice => {
    const q = parseOr400(AdapterQuery, query, 'query string');
    return q.graph === undefined ? ctx.defaultGraph : presetChoice(q.graph);
  };

  app.post('/get_reward', async (request, reply) => {
    const choice = graphFor(request.query);
    const body = parseOr400(schemas.OpenRlhf, request.body);
    if (body.query.length === 0) return { rewards: [], scores: [], extra_logs: {} };
    const items = body.query.map((query, i) => {
      const prompt = body.prompts?.[i];
      const { groundTruth, question } = labelParts(body.labels[i] ?? '', schemas, ['labels', i]);
      return {
        graph: choice,
        input: {
          // Same question as a per-rollout call with the chat's messages: the last user turn.
          question: questionOfQuery(question, query, prompt),
          candidate: rolloutOfQuery(query, prompt, i, config.reasoningFormat),
          groundTruth,
        },
      };
    });
    const judged = await service.judge({
      items,
      ...requestControls(ctx, request, reply, '/get_reward', {}),
      idempotencyKey: idempotencyKey('get_reward', request, undefined),
      priority: laneOf(undefined, request.headers[PRIORITY_HEADER]),
      holdUntil: getRewardHoldUntil(ctx, request),
    });
    const outcomes = judged.map((j) => judgmentOutcome(j.judgment));
    const refusal = trainerFailure(outcomes, failureReward, 'judgments', isUnrewarded);
    if (refusal !== undefined) throw refusal;
    const votes = judged.map((j) => votesOf(j.judgment));
    return {
      rewards: outcomes.map((o) => openRlhfReward(o, failureReward)),
      // Operator stamps (issue 21) beside extra_logs, whose values must stay numbers.
      votes,
      ...stampsOf(
        judged.map((j) => j.judgment),
        choice.graph,
        ctx.router,
      ),
      scores: outcomes.map((o) =>
        o.kind === 'cancelled' ? (failureReward ?? null) : trainerScore(o, failureReward),
      ),
      extra_logs: openRlhfLogs(judged, outcomes, votes),
    };
  });

  app.post('/slime', async (request, reply) => {
    const choice = graphFor(request.query);
    const body = parseOr400(schemas.Slime, request.body);
    const { groundTruth, question } = labelParts(body.label, schemas, ['label']);
    const judged = await service.judgeOne(
      {
        graph: choice,
        input: {
          question: question ?? questionFromMessages(body.prompt),
          candidate: withPromptTrace(body.response, body.prompt, config.reasoningFormat),
          groundTruth,
        },
      },
      {
        // Cancellable by its rollout_id too (POST /v1/cancel {"request_ids"}).
        ...requestControls(ctx, request, reply, '/slime', {
          request_id: body.rollout_id === undefined ? undefined : String(body.rollout_id),
        }),
        idempotencyKey: idempotencyKey('slime', request, body.rollout_id),
        priority: laneOf(undefined, request.headers[PRIORITY_HEADER]),
      },
    );
    const outcome = judgmentOutcome(judged.judgment);
    const refusal = trainerFailure([outcome], failureReward, 'judgments');
    if (refusal !== undefined) throw refusal;
    const j = judged.judgment;
    return {
      reward: trainerReward(outcome, failureReward),
      ...judgeSummary(judged, choice, ctx.router.name),
      votes: votesOf(j),
      ...stampsOf([j], choice.graph, ctx.router),
      ...(j.error === undefined ? {} : { error: j.error.message, error_code: j.error.code }),
    };
  });

  app.post('/verify', async (request, reply) => {
    const choice = graphFor(request.query);
    const body = parseOr400(schemas.Verify, request.body);
    // The answer is the last assistant `message` item: never a `reasoning` or `function_call` item, nor an
    // earlier message (a preamble before a tool call).
    const texts: string[] = [];
    for (const item of body.response.output) {
      if (item.type !== 'message' || (item.role !== undefined && item.role !== 'assistant')) continue;
      const content = item.content;
      texts.length = 0;
      if (typeof content === 'string') texts.push(content);
      else if (content !== undefined) texts.push(partsText(content));
    }
    const input = body.responses_create_params.input;
    const question =
      body.question ??
      questionFromMessages(
        typeof input === 'string'
          ? input
          : input.map((m) => ({ role: m.role ?? 'user', content: m.content })),
      );
    const group = groupOf(request, choice, { question, groundTruth: body.ground_truth });
    // In flight until recorded, as on /v1/reward: a streamed sibling's failure may wait for it.
    const judged = await judgeInFlight(
      ctx.groupMeans,
      [{ parts: group, count: 1 }],
      () =>
        service.judgeOne(
          { graph: choice, input: { question, candidate: texts.join('\n'), groundTruth: body.ground_truth } },
          {
            ...requestControls(ctx, request, reply, '/verify', { request_id: verifyId(body) }),
            idempotencyKey: idempotencyKey('verify', request, nemoGymId(body)),
            priority: laneOf(undefined, request.headers[PRIORITY_HEADER]),
          },
        ),
      (done) => recordJudged(ctx.groupMeans, group, [done]),
    );
    const j = judged.judgment;
    const outcome = judgmentOutcome(j);
    const judge = judgeSummary(judged, choice, ctx.router.name);
    const stamps = { votes: votesOf(j), ...stampsOf([j], choice.graph, ctx.router) };
    const reward = maskedReward(outcome, ctx.groupMeans.mean(group).mean ?? undefined, failureReward);
    if (!isMasked(outcome)) return { ...body, reward, judge, ...stamps };
    // A failed or cancelled judgment is not a wrong answer: a number NeMo-RL can float() with the sample
    // masked (and the row routed to NeMo-Gym's failures file via _ng_failure_class).
    return {
      ...body,
      reward,
      instance_config: { ...body.instance_config, mask_sample: true },
      failure_reason: j.error?.message ?? j.status,
      _ng_failure_class: outcome.kind === 'cancelled' ? 'cancelled' : 'judge_failed',
      judge,
      ...stamps,
    };
  });
}
