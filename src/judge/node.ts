/**
 * One node of a judgment (the graph executor `run.ts` runs a stage's nodes through here): the role's view of
 * the judgment so far, a local role's computation, or an LLM role's call through its route with the deadline
 * extension, the truncation raise and the re-ask (`reply.ts` decides which), and the transcript message it
 * leaves, ok or failed.
 */
import { performance } from 'node:perf_hooks';

import { RewardError, type ErrorCode } from '../errors.js';
import type { RoleContext, VisibleMessage } from '../roles/types.js';
import type { ReasoningEffort } from '../settings/routing-file.js';
import { defaultMaxTokens } from './budgets.js';
import {
  addKnown,
  cutByMovedDeadline,
  observeFailedCall,
  observeReply,
  toFailure,
  URGENT_PRIORITY,
} from './calls.js';
import type { CompiledGraph, ResolvedNode } from './graph.js';
import { learnedBudget, observeCompletion } from './learned-budgets.js';
import { isCutReply, MAX_REASKS, nextAsk, parseReply } from './reply.js';
import { boundTrace } from './reply-trace.js';
import type { RunOptions } from './run-options.js';
import type {
  ChatMessage,
  DebateMonitor,
  JudgmentInput,
  LlmReply,
  Route,
  TranscriptMessage,
  Usage,
} from './types.js';

/** One plain graph's judgment as it runs: what its nodes read and what they leave. */
export interface Execution {
  graph: CompiledGraph;
  input: JudgmentInput;
  options: RunOptions;
  nonce: string;
  signal: AbortSignal;
  transcript: TranscriptMessage[];
  usage: Usage;
  /** `performance.now()` at start: older judgments' calls go first among equals. */
  startedAt: number;
  /** LLM replies received so far: judgments further along get backend slots first. */
  progress: number;
  /** The debate monitor of a `converged` early stop. */
  debate?: DebateMonitor | undefined;
}

/** Progress dominates age: 2^40 ms is 34 years of `performance.now()`. */
const PROGRESS_WEIGHT = 2 ** 40;

/**
 * A call's backend-slot priority: judgments that have received more replies first (a final-stage call
 * before a first-stage one), then older judgments. Under a deadline, started judgments finish.
 */
const callPriority = (exec: Execution): number =>
  (exec.options.urgent === true ? URGENT_PRIORITY : 0) + exec.progress * PROGRESS_WEIGHT - exec.startedAt;

/** The transcript fields a node's outcome fills in (the rest say where in the judgment it ran). */
type Outcome = Omit<TranscriptMessage, 'round' | 'stage' | 'nodeId' | 'role'>;

/**
 * Runs one node of `round` and appends its message to the transcript. Throws (after appending a failed
 * message) when the node failed: a backend error, a reply still cut or invalid after the raise or re-ask.
 */
export async function runNode(exec: Execution, r: ResolvedNode, round: number): Promise<void> {
  exec.signal.throwIfAborted();
  const ctx = nodeContext(exec, r, round);
  const record = (m: Outcome): void => void exec.transcript.push(toMessage(r, round, m));
  if (r.role.kind === 'local') {
    record(computeLocal(r, ctx));
    return;
  }
  await askNode(exec, r, ctx, record);
}

/** What the role's prompt sees: the judgment's input and the messages visible to this node in this round. */
function nodeContext(exec: Execution, r: ResolvedNode, round: number): RoleContext {
  const { node } = r;
  return {
    question: exec.input.question,
    candidate: exec.input.candidate,
    groundTruth: exec.input.groundTruth,
    nonce: exec.nonce,
    round,
    rounds: exec.graph.spec.rounds,
    node: { id: node.id, focus: node.focus, strictness: node.strictness },
    visible: visibleTo(exec, r, round),
  };
}

function visibleTo(exec: Execution, r: ResolvedNode, round: number): VisibleMessage[] {
  const deps = new Set(r.deps);
  const visible: VisibleMessage[] = [];
  for (const m of exec.transcript) {
    if (m.error !== undefined) continue;
    const seen =
      r.stage === 'final'
        ? deps.has(m.nodeId)
        : m.stage === 'debate' && (m.round < round || (m.round === round && deps.has(m.nodeId)));
    if (!seen) continue;
    visible.push({
      nodeId: m.nodeId,
      role: m.role,
      round: m.round,
      stance: m.stance,
      confidence: m.confidence,
      summary: summaryOf(exec, m),
    });
  }
  return visible;
}

function summaryOf(exec: Execution, m: TranscriptMessage): string {
  const r = exec.graph.byId.get(m.nodeId);
  return r === undefined ? '' : r.role.summarize(m.output);
}

/** One fixed literal shape for every transcript message (object spread gives each its own hidden class). */
function toMessage(r: ResolvedNode, round: number, m: Outcome): TranscriptMessage {
  return {
    round,
    stage: r.stage,
    nodeId: r.node.id,
    role: r.role.name,
    model: m.model,
    stance: m.stance,
    confidence: m.confidence,
    output: m.output,
    promptTokens: m.promptTokens,
    completionTokens: m.completionTokens,
    cachedPromptTokens: m.cachedPromptTokens,
    latencyMs: m.latencyMs,
    attempts: m.attempts,
    reasks: m.reasks,
    error: m.error,
    servedModel: m.servedModel,
    replica: m.replica,
    reasoning: m.reasoning,
    reasoningTokens: m.reasoningTokens,
    reasoningTokensEstimated: m.reasoningTokensEstimated,
  };
}

/** A local role (no LLM): its computed output, no tokens, no attempts. */
function computeLocal(r: ResolvedNode, ctx: RoleContext): Outcome {
  const { role } = r;
  if (role.compute === undefined) throw new RewardError('RW_INTERNAL', `role '${role.name}' has no compute`);
  const output: unknown = role.compute(ctx);
  return {
    model: 'local',
    stance: role.stance(output),
    confidence: role.confidence(output),
    output,
    promptTokens: 0,
    completionTokens: 0,
    cachedPromptTokens: 0,
    latencyMs: 0,
    attempts: 0,
    reasks: 0,
  };
}

/** One LLM node's conversation so far and what it has spent (its transcript message's counts). */
interface Ask {
  route: Route;
  messages: ChatMessage[];
  /** `performance.now()` when the node started: its message's latency. */
  started: number;
  attempts: number;
  reasks: number;
  promptTokens: number;
  completionTokens: number;
  cachedPromptTokens: number | null;
  reasoningTokens: number;
  reasoningTokensEstimated: boolean;
  /** The last reply's trace, bounded (boundTrace); undefined while none came. */
  reasoning: string | undefined;
  maxTokens: number;
  /** The `reasoning_effort` in force: route override, else the node's, else the backend's. */
  effort: ReasoningEffort | undefined;
  reasksLeft: number;
  raisesLeft: number;
}

/** The effort in force for a node's calls: its routing override, else the graph node's, else the backend's. */
export function effortOf(
  route: Route,
  node: { reasoning_effort?: ReasoningEffort | undefined },
): ReasoningEffort | undefined {
  return route.reasoningEffort ?? node.reasoning_effort ?? route.backendRequest?.reasoningEffort;
}

/**
 * A node's first budget: configured (routing override, then the node's max_tokens), else the role's default
 * at the effort in force, raised to what the (backend, role, effort) has learned its replies need.
 */
function firstBudget(r: ResolvedNode, route: Route, effort: ReasoningEffort | undefined): number {
  const configured = route.maxTokens ?? r.node.max_tokens;
  if (configured !== undefined) return configured;
  return learnedBudget(route.backend, r.role.name, effort, defaultMaxTokens(r.role.name, effort));
}

/** An LLM node: asks until a reply parses, raising a cut reply's budget once and re-asking an invalid one once. */
async function askNode(
  exec: Execution,
  r: ResolvedNode,
  ctx: RoleContext,
  record: (m: Outcome) => void,
): Promise<void> {
  const { role } = r;
  const ask = startAsk(exec, r, ctx);
  const { route } = ask;
  const fail = (code: ErrorCode, message: string): void =>
    record({ ...spent(ask, route.model), stance: null, confidence: null, error: { code, message } });

  for (;;) {
    const reply = await callOnce(exec, r, ctx, ask, fail);
    if (reply === undefined) continue;
    account(exec, ask, reply);
    observeCompletion(route.backend, role.name, ask.effort, reply.completionTokens);
    const parsed = parseReply(reply.text, role.output);
    const truncated = !parsed.ok && isCutReply(reply);
    const outcome = parsed.ok ? 'ok' : truncated ? 'RW_JUDGE_TRUNCATED' : 'RW_JUDGE_UNPARSABLE';
    observeReply(exec.options.observer, role.name, route, outcome, reply);
    if (parsed.ok) {
      record({
        ...spent(ask, route.model),
        stance: role.stance(parsed.value),
        confidence: role.confidence(parsed.value),
        output: parsed.value,
        servedModel: reply.model,
        replica: reply.replica,
      });
      return;
    }
    const invalid = { text: reply.text, promptTokens: reply.promptTokens, truncated, error: parsed.error };
    prepareRetry(ask, r.node.id, invalid, fail);
  }
}

/** A node's conversation before its first call: the role's prompt, its route and effort, nothing spent yet. */
function startAsk(exec: Execution, r: ResolvedNode, ctx: RoleContext): Ask {
  const { role, node } = r;
  const route = exec.options.router.route(node);
  const prompt = role.render(ctx);
  const effort = effortOf(route, node);
  return {
    route,
    messages: [
      { role: 'system', content: prompt.system },
      { role: 'user', content: prompt.user },
    ],
    started: performance.now(),
    attempts: 0,
    reasks: 0,
    promptTokens: 0,
    completionTokens: 0,
    cachedPromptTokens: 0,
    reasoningTokens: 0,
    reasoningTokensEstimated: false,
    reasoning: undefined,
    maxTokens: firstBudget(r, route, effort),
    effort,
    reasksLeft: MAX_REASKS,
    raisesLeft: 1,
  };
}

/**
 * After a reply that did not parse: applies `nextAsk`'s step to the conversation (a raised budget or the
 * re-ask messages), or records the give-up (`fail`) and throws it.
 */
function prepareRetry(
  ask: Ask,
  nodeId: string,
  reply: { text: string; promptTokens: number; truncated: boolean; error: string },
  fail: (code: ErrorCode, message: string) => void,
): void {
  const next = nextAsk({
    nodeId,
    messages: ask.messages,
    maxTokens: ask.maxTokens,
    raisesLeft: ask.raisesLeft,
    reasksLeft: ask.reasksLeft,
    reasks: ask.reasks,
    reply,
    contextTokens: ask.route.backend.contextTokens?.(),
  });
  switch (next.kind) {
    case 'raise':
      ask.raisesLeft -= 1;
      ask.reasks += 1;
      ask.maxTokens = next.maxTokens;
      break;
    case 'reask':
      ask.reasksLeft -= 1;
      ask.reasks += 1;
      ask.messages.push(...next.messages);
      break;
    case 'give_up':
      fail(next.code, next.message);
      throw new RewardError(next.code, next.message);
  }
}

/** The counts of a node's message: what the node has spent so far. */
function spent(
  ask: Ask,
  model: string,
): Pick<
  Outcome,
  | 'model'
  | 'promptTokens'
  | 'completionTokens'
  | 'cachedPromptTokens'
  | 'latencyMs'
  | 'attempts'
  | 'reasks'
  | 'reasoning'
  | 'reasoningTokens'
  | 'reasoningTokensEstimated'
> {
  return {
    model,
    promptTokens: ask.promptTokens,
    completionTokens: ask.completionTokens,
    cachedPromptTokens: ask.cachedPromptTokens,
    latencyMs: performance.now() - ask.started,
    attempts: ask.attempts,
    reasks: ask.reasks,
    reasoning: ask.reasoning,
    // Absent for a judge that does not reason, so its messages stay as they were.
    reasoningTokens: ask.reasoningTokens > 0 ? ask.reasoningTokens : undefined,
    reasoningTokensEstimated: ask.reasoningTokensEstimated ? true : undefined,
  };
}

/**
 * One backend call of the node's conversation. Undefined when the call was cut by a deadline that has moved
 * later since (a request joined the judgment): the caller asks again under the new one, not a re-ask (the
 * reply never came). Any other failure is recorded (`fail`) and thrown.
 */
async function callOnce(
  exec: Execution,
  r: ResolvedNode,
  ctx: RoleContext,
  ask: Ask,
  fail: (code: ErrorCode, message: string) => void,
): Promise<LlmReply | undefined> {
  const { role, node } = r;
  const { route } = ask;
  exec.usage.calls += 1;
  const callStarted = performance.now();
  const callDeadline = exec.options.deadline;
  try {
    return await route.backend.complete(
      {
        role: role.name,
        nodeId: node.id,
        model: route.model,
        messages: ask.messages,
        schemaName: role.name,
        jsonSchema: role.jsonSchema,
        // Operator routing overrides (config file) win over the graph's own sampling values.
        temperature: route.temperature ?? node.temperature,
        topP: route.topP ?? node.top_p,
        maxTokens: ask.maxTokens,
        reasoningEffort: ask.effort,
        seed: node.seed,
        focus: node.focus,
        context: ctx,
      },
      {
        signal: exec.signal,
        deadline: callDeadline,
        priority: callPriority(exec),
        flow: exec.options.flow,
        urgent: exec.options.urgent,
        observer: exec.options.observer,
        pin: exec.options.pin,
      },
    );
  } catch (err) {
    const failure = toFailure(err);
    ask.attempts += 1;
    // Cut by the deadline it was given, which has moved later since (a request joined the judgment).
    const extended = cutByMovedDeadline(failure.code, exec.signal, callDeadline, exec.options.deadline);
    observeFailedCall(exec.options.observer, role.name, route, failure.code, performance.now() - callStarted);
    if (extended) return undefined;
    fail(failure.code, failure.message);
    throw err;
  }
}

/** Adds a reply's attempts and tokens to the node's counts and the judgment's usage. */
function account(exec: Execution, ask: Ask, reply: LlmReply): void {
  exec.progress += 1;
  ask.attempts += reply.attempts;
  ask.promptTokens += reply.promptTokens;
  ask.completionTokens += reply.completionTokens;
  exec.usage.promptTokens += reply.promptTokens;
  exec.usage.completionTokens += reply.completionTokens;
  // Unknown (not reported) stays unknown: one unreported call makes the sum null, never a lower bound.
  const cached = reply.cachedPromptTokens ?? null;
  ask.cachedPromptTokens = addKnown(ask.cachedPromptTokens, cached);
  exec.usage.cachedPromptTokens = addKnown(exec.usage.cachedPromptTokens, cached);
  const reasoning = reply.reasoningTokens ?? 0;
  const estimated = reasoning > 0 && reply.reasoningTokensEstimated === true;
  ask.reasoningTokens += reasoning;
  ask.reasoningTokensEstimated ||= estimated;
  if (reply.reasoning !== undefined) ask.reasoning = boundTrace(reply.reasoning.text);
  if (reasoning > 0) exec.usage.reasoningTokens = (exec.usage.reasoningTokens ?? 0) + reasoning;
  if (estimated) exec.usage.reasoningTokensEstimated = true;
}
