/**
 * One structured LLM answer for a comparative role: a backend call (the backend retries 408/429/5xx,
 * connection errors and timeouts within the deadline), schema validation, one bounded re-ask on invalid
 * output and one raised budget for a cut reply (all trace included) — the same semantics as a graph node in
 * `runJudgment` (`nextAsk` decides for both). Never rejects: failures come back as values.
 */
import { performance } from 'node:perf_hooks';
import type { z } from 'zod';

import type { ErrorCode } from '../errors.js';
import type { ComparativeContext, RenderedPrompt } from '../roles/types.js';
import {
  addKnown,
  cutByMovedDeadline,
  observeFailedCall,
  observeReply,
  toFailure,
  URGENT_PRIORITY,
} from './calls.js';
import { defaultMaxTokens } from './budgets.js';
import type { Flow } from './fair-queue.js';
import { isCutReply, MAX_REASKS, nextAsk, parseReply } from './reply.js';
import type { ChatMessage, JudgeObserver, LlmReply, Route } from './types.js';

export interface AskSpec<T> {
  /** Role name: the schema name sent to the backend and the metrics label. */
  role: string;
  /** Routing node id (the routing file may map it to another backend or model). */
  nodeId: string;
  route: Route;
  prompt: RenderedPrompt;
  schema: z.ZodType<T>;
  jsonSchema: Record<string, unknown>;
  context: ComparativeContext;
  temperature?: number | undefined;
  seed?: number | undefined;
  /** A check the schema cannot express (e.g. a pick within 1..N): an error text makes the reply invalid. */
  check?: ((value: T) => string | null) | undefined;
}

export interface AskOptions {
  signal: AbortSignal;
  /** Absolute deadline, epoch ms; read at every call (a getter may move it later). */
  readonly deadline: number;
  observer?: JudgeObserver | undefined;
  /** Take a free backend slot before queued normal calls (the priority lane). */
  urgent?: boolean | undefined;
  /** The tenant's fair-queue flow for backend slots (fair-queue.ts). */
  flow?: Flow | undefined;
}

/** What one ask cost, whether it succeeded or not. */
export interface AskCost {
  model: string;
  /** Backend calls made: 1 + re-asks (HTTP retries are inside one call). */
  calls: number;
  attempts: number;
  reasks: number;
  promptTokens: number;
  completionTokens: number;
  /** Backend-reported prefix-cache hits summed over calls; null when a call did not report them. */
  cachedPromptTokens: number | null;
  /** Reasoning tokens over calls (reported, else estimated from traces: `reasoningTokensEstimated`). */
  reasoningTokens?: number | undefined;
  reasoningTokensEstimated?: boolean | undefined;
  latencyMs: number;
}

export type AskResult<T> =
  ({ ok: true; value: T } & AskCost) | ({ ok: false; error: { code: ErrorCode; message: string } } & AskCost);

export async function askStructured<T>(spec: AskSpec<T>, options: AskOptions): Promise<AskResult<T>> {
  const { route } = spec;
  const messages: ChatMessage[] = [
    { role: 'system', content: spec.prompt.system },
    { role: 'user', content: spec.prompt.user },
  ];
  const started = performance.now();
  const cost = noCost(route.model);
  const done = (): AskCost => ({ ...cost, latencyMs: performance.now() - started });
  // The budget sent (routed; none: the server's own), raised once for a cut reply as a graph node's is.
  const budget = { maxTokens: route.maxTokens, raisesLeft: 1, reasksLeft: MAX_REASKS };
  for (;;) {
    if (options.signal.aborted) {
      return { ok: false, error: toFailure(options.signal.reason), ...done() };
    }
    cost.calls += 1;
    const call = await callBackend(spec, options, messages, budget.maxTokens);
    if (!call.ok) {
      cost.attempts += 1;
      // Cut by a deadline that has moved later since (a request joined the comparison): ask again.
      if (call.again) continue;
      return { ok: false, error: call.failure, ...done() };
    }
    const { reply } = call;
    addReplyCost(cost, reply);
    const parsed = parseReply(reply.text, spec.schema);
    const problem = parsed.ok ? (spec.check?.(parsed.value) ?? null) : parsed.error;
    const truncated = !parsed.ok && isCutReply(reply);
    const outcome = problem === null ? 'ok' : truncated ? 'RW_JUDGE_TRUNCATED' : 'RW_JUDGE_UNPARSABLE';
    observeReply(options.observer, spec.role, route, outcome, reply);
    if (parsed.ok && problem === null) return { ok: true, value: parsed.value, ...done() };
    const next = nextAsk({
      nodeId: spec.nodeId,
      messages,
      maxTokens: budget.maxTokens ?? serverCut(spec, reply),
      raisesLeft: budget.raisesLeft,
      reasksLeft: budget.reasksLeft,
      reasks: cost.reasks,
      reply: { text: reply.text, promptTokens: reply.promptTokens, truncated, error: problem ?? 'invalid' },
      contextTokens: route.backend.contextTokens?.(),
    });
    if (next.kind === 'give_up')
      return { ok: false, error: { code: next.code, message: next.message }, ...done() };
    cost.reasks += 1;
    if (next.kind === 'raise') {
      budget.raisesLeft -= 1;
      budget.maxTokens = next.maxTokens;
    } else {
      budget.reasksLeft -= 1;
      messages.push(...next.messages);
    }
  }
}

/**
 * The budget a reply sent without one of ours was cut at: where the server stopped it, else (no count
 * reported) the role's default at the effort in force.
 */
function serverCut<T>(spec: AskSpec<T>, reply: LlmReply): number {
  if (reply.completionTokens > 0) return reply.completionTokens;
  const { route } = spec;
  return defaultMaxTokens(spec.role, route.reasoningEffort ?? route.backendRequest?.reasoningEffort);
}

type BackendCall =
  | { ok: true; reply: LlmReply }
  | { ok: false; failure: { code: ErrorCode; message: string }; again: boolean };

/**
 * One backend call of the ask's conversation. A failure is observed; `again` when the call was cut by a
 * deadline that has moved later since it was sent (the caller asks again, not as a re-ask).
 */
async function callBackend<T>(
  spec: AskSpec<T>,
  options: AskOptions,
  messages: ChatMessage[],
  maxTokens: number | undefined,
): Promise<BackendCall> {
  const { route } = spec;
  const callStarted = performance.now();
  const callDeadline = options.deadline;
  try {
    const reply = await route.backend.complete(
      {
        role: spec.role,
        nodeId: spec.nodeId,
        model: route.model,
        messages,
        schemaName: spec.role,
        jsonSchema: spec.jsonSchema,
        temperature: route.temperature ?? spec.temperature,
        topP: route.topP,
        maxTokens,
        reasoningEffort: route.reasoningEffort ?? route.backendRequest?.reasoningEffort,
        seed: spec.seed,
        context: spec.context,
      },
      {
        signal: options.signal,
        deadline: callDeadline,
        observer: options.observer,
        flow: options.flow,
        ...(options.urgent === true ? { priority: URGENT_PRIORITY, urgent: true } : {}),
      },
    );
    return { ok: true, reply };
  } catch (err) {
    const failure = toFailure(err);
    observeFailedCall(options.observer, spec.role, route, failure.code, performance.now() - callStarted);
    const again = cutByMovedDeadline(failure.code, options.signal, callDeadline, options.deadline);
    return { ok: false, failure, again };
  }
}

/** What an ask has cost before its first call. */
function noCost(model: string): AskCost {
  return {
    model,
    calls: 0,
    attempts: 0,
    reasks: 0,
    promptTokens: 0,
    completionTokens: 0,
    cachedPromptTokens: 0,
    latencyMs: 0,
  };
}

/** Adds one reply's attempts and tokens to what the ask has cost. */
function addReplyCost(cost: AskCost, reply: LlmReply): void {
  cost.attempts += reply.attempts;
  cost.promptTokens += reply.promptTokens;
  cost.completionTokens += reply.completionTokens;
  cost.cachedPromptTokens = addKnown(cost.cachedPromptTokens, reply.cachedPromptTokens ?? null);
  // Set only for a judge that reasons, so the cost of others stays as it was.
  if ((reply.reasoningTokens ?? 0) > 0) {
    cost.reasoningTokens = (cost.reasoningTokens ?? 0) + (reply.reasoningTokens ?? 0);
    if (reply.reasoningTokensEstimated === true) cost.reasoningTokensEstimated = true;
  }
}
