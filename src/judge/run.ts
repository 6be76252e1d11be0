/**
 * Orchestration: runs one judgment through a compiled graph (stages, rounds, early stop, the deadline and
 * the caller's abort), one node at a time through its route's backend.
 */
import { performance } from 'node:perf_hooks';

import { RewardError, type ErrorCode } from '../errors.js';
import type { RoleContext, VisibleMessage } from '../roles/types.js';
import { defaultMaxTokens, promptTokens as countPrompt, raisedBudget } from './budgets.js';
import {
  addKnown,
  cutByMovedDeadline,
  deadlineScope,
  observeFailedCall,
  observeReply,
  toFailure,
  URGENT_PRIORITY,
} from './calls.js';
import { decide } from './decision.js';
import type { RejectionReason } from './degenerate.js';
import { prepareInput, type ReasoningFormat } from './candidate.js';
import type { CompiledCascade, CompiledGraph, ResolvedNode } from './graph.js';
import { failedJudgment, okJudgment, rejectedJudgment, type JudgmentRun } from './judgment.js';
import { monitorRound } from './monitor.js';
import { nextNonce } from './nonce.js';
import { MAX_REASKS, parseReply, reaskMessages } from './reply.js';
import type {
  ChatMessage,
  DebateMonitor,
  Judgment,
  JudgeObserver,
  JudgmentInput,
  Router,
  TranscriptMessage,
  Usage,
} from './types.js';

export interface RunOptions {
  router: Router;
  /**
   * Absolute deadline, epoch ms. Unfinished judgments end with status `timeout`. Read again whenever it
   * matters (a getter may move it later while the judgment runs: serving extends a flight joined by a
   * later request); it never moves earlier.
   */
  deadline: number;
  signal?: AbortSignal | undefined;
  observer?: JudgeObserver | undefined;
  limits?: { minChars: number; maxChars: number } | undefined;
  /** How the candidate's reasoning trace is found (REASONING_FORMAT; default `auto`). */
  reasoningFormat?: ReasoningFormat | undefined;
  /** Fence nonce; random per judgment unless a test pins it. */
  nonce?: string | undefined;
  /** Replies an earlier stage of the same judgment received (a cascade's escalation): slot priority. */
  progress?: number | undefined;
  /** Canaries and audits: every call of a backend named here goes to that replica (`CallOptions.pin`). */
  pin?: ReadonlyMap<string, string> | undefined;
  /**
   * A high-priority judgment (the serving priority lane): its calls take a free backend slot before every
   * other queued call. Calls in flight are never preempted. Default false.
   */
  urgent?: boolean | undefined;
  /**
   * Set when the caller already put the input through `prepareInput` with these `limits` and
   * `reasoningFormat` (serving does, to key and cache it): the engine judges the input as given, or rejects
   * it with this reason, instead of preparing it again (the preparation is idempotent, so the outcome is
   * the same; it costs about a millisecond per long candidate).
   */
  prepared?: { rejection?: RejectionReason | undefined } | undefined;
}

interface Execution {
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

/**
 * Runs one judgment through a graph. Never rejects because a judge failed: failures come back as
 * `judge_error` (backend error, unparsable reply after one re-ask, aborted) or `timeout` (deadline),
 * with `reward: null`. Degenerate candidates are `rejected_input` with reward 0 and no LLM call.
 */
export async function runJudgment(
  graph: CompiledGraph,
  rawInput: JudgmentInput,
  options: RunOptions,
): Promise<Judgment> {
  const started = performance.now();
  // What is judged (src/judge/candidate.ts), whichever route or tool sent the candidate: normalised, the
  // final answer after a reasoning trace, no chat-template control tokens, not degenerate.
  const prepared =
    options.prepared !== undefined
      ? { input: rawInput, rejection: options.prepared.rejection }
      : prepareInput(rawInput, { reasoningFormat: options.reasoningFormat, limits: options.limits });
  const input = prepared.input;
  if (prepared.rejection !== undefined)
    return rejectedJudgment(graph, prepared.rejection, performance.now() - started);
  if (graph.cascade !== undefined) return runCascade(graph, graph.cascade, input, options, started);

  const remainingMs = options.deadline - Date.now();
  const scope = deadlineScope(options, 'judgment ended');

  const exec: Execution = {
    graph,
    input,
    options,
    nonce: options.nonce ?? nextNonce(),
    signal: scope.signal,
    transcript: [],
    usage: { calls: 0, promptTokens: 0, completionTokens: 0, cachedPromptTokens: 0 },
    startedAt: started,
    progress: options.progress ?? 0,
  };
  // Snapshots: a judgment, once returned (and maybe cached), never changes.
  const spent = (rounds: number): JudgmentRun => ({
    rounds,
    transcript: exec.transcript.slice(),
    usage: { ...exec.usage },
    debate: exec.debate === undefined ? undefined : structuredClone(exec.debate),
    latencyMs: performance.now() - started,
  });

  let roundsUsed = 0;
  try {
    if (remainingMs <= 0) throw new RewardError('RW_JUDGE_TIMEOUT', 'request deadline reached before start');
    let stopReason = graph.spec.rounds > 1 ? 'max_rounds' : 'single_round';
    const stop = graph.spec.early_stop;
    const monitor: DebateMonitor | undefined =
      stop?.kind === 'converged'
        ? { threshold: stop.similarity, budgetTokens: stop.budget_tokens ?? null, rounds: [] }
        : undefined;
    exec.debate = monitor;
    for (let round = 1; round <= graph.spec.rounds; round++) {
      roundsUsed = round;
      await runStage(exec, graph.debate, round);
      if (
        round < graph.spec.rounds &&
        graph.spec.early_stop?.kind === 'unanimous' &&
        isUnanimous(exec, round)
      ) {
        stopReason = 'unanimous';
        break;
      }
      const converged = monitor === undefined ? undefined : watchDebate(exec, monitor, round);
      if (converged !== undefined && round < graph.spec.rounds) {
        stopReason = converged;
        break;
      }
    }
    if (graph.final.length > 0) await runStage(exec, graph.final, roundsUsed);

    const last = new Map<string, TranscriptMessage>();
    for (const m of exec.transcript) last.set(m.nodeId, m);
    const decided = decide(graph.spec.decision, last, graph.voters, graph.weights);
    if (decided === null) {
      throw new RewardError('RW_JUDGE_UNPARSABLE', 'the deciding node produced no stance');
    }
    return okJudgment(
      graph,
      { verdict: decided.verdict, score: decided.score, incoherent: decided.incoherent, stopReason },
      spent(roundsUsed),
    );
  } catch (err) {
    const failure = toFailure(err);
    if (scope.timedOut() || (failure.code === 'RW_JUDGE_TIMEOUT' && Date.now() >= options.deadline)) {
      return failedJudgment(
        graph,
        {
          status: 'timeout',
          code: 'RW_JUDGE_TIMEOUT',
          message: 'request deadline reached before the committee finished',
          reason: 'deadline',
          stopReason: 'deadline',
        },
        spent(roundsUsed),
      );
    }
    const aborted = options.signal?.aborted === true;
    return failedJudgment(
      graph,
      aborted
        ? {
            status: 'judge_error',
            // The caller's own reason (e.g. shutdown) when it gave one, else the caller left.
            code:
              options.signal?.reason instanceof RewardError
                ? options.signal.reason.code
                : 'RW_CLIENT_ABORTED',
            message: 'aborted by the caller',
            reason: 'aborted',
            stopReason: 'aborted',
          }
        : {
            status: 'judge_error',
            code: failure.code,
            message: failure.message,
            reason: failure.message,
            stopReason: 'node_failed',
          },
      spent(roundsUsed),
    );
  } finally {
    // A failed node must not leave its siblings' calls (and retries) running after the judgment ended.
    scope.end();
  }
}

/**
 * A cascade: the first stage decides alone when it is confident in `stopOn` (`cascade_stop`); anything else
 * escalates to `then` (`escalated`, or the escalation's own failure reason). One nonce for both stages; the
 * transcript holds both stages' messages (node ids are distinct across stages) and usage is their sum. A
 * first stage that failed escalates too, unless the deadline passed or the caller aborted.
 */
async function runCascade(
  graph: CompiledGraph,
  cascade: CompiledCascade,
  input: JudgmentInput,
  options: RunOptions,
  started: number,
): Promise<Judgment> {
  // Both stages judge the input prepared above: neither prepares it again.
  const staged = restage(options, { nonce: options.nonce ?? nextNonce(), prepared: {} });
  const first = await runJudgment(cascade.first, input, staged);
  const confidence = first.score === null ? 0 : first.verdict === 'match' ? first.score : 1 - first.score;
  const stops = first.status === 'ok' && first.verdict === cascade.stopOn && confidence >= cascade.threshold;
  const ended = first.status === 'timeout' || first.stopReason === 'aborted';
  if (stops || ended) {
    return relabel(graph, first, stops ? 'cascade_stop' : first.stopReason, first, started);
  }
  // The escalation is a later stage of the same judgment: its calls keep the first stage's progress.
  const second = await runJudgment(cascade.then, input, restage(staged, { progress: first.usage.calls }));
  return relabel(graph, second, second.status === 'ok' ? 'escalated' : second.stopReason, first, started);
}

/**
 * `options` with `fields` replaced; `deadline` is still read through `options`, so a getter behind it (serving
 * moves a flight's deadline later when a request joins it) keeps working. A spread would freeze it.
 */
function restage(
  options: RunOptions,
  fields: Pick<RunOptions, 'nonce' | 'progress' | 'prepared'>,
): RunOptions {
  return {
    ...options,
    ...fields,
    get deadline() {
      return options.deadline;
    },
  };
}

/** The deciding stage's outcome under the cascade's name and hash, with both stages' work. */
function relabel(
  graph: CompiledGraph,
  decided: Judgment,
  stopReason: string,
  first: Judgment,
  started: number,
): Judgment {
  const both = decided !== first;
  return {
    status: decided.status,
    verdict: decided.verdict,
    reward: decided.reward,
    score: decided.score,
    incoherent: decided.incoherent,
    reason: decided.reason,
    error: decided.error,
    graph: { name: graph.name, hash: graph.hash },
    promptVersion: decided.promptVersion,
    rounds: both ? first.rounds + decided.rounds : decided.rounds,
    stopReason,
    transcript: both ? first.transcript.concat(decided.transcript) : decided.transcript,
    usage: both
      ? {
          calls: first.usage.calls + decided.usage.calls,
          promptTokens: first.usage.promptTokens + decided.usage.promptTokens,
          completionTokens: first.usage.completionTokens + decided.usage.completionTokens,
          cachedPromptTokens: addKnown(first.usage.cachedPromptTokens, decided.usage.cachedPromptTokens),
        }
      : decided.usage,
    latencyMs: performance.now() - started,
  };
}

/** Records the monitor's row for a finished round; returns the stop reason when the debate should end. */
function watchDebate(
  exec: Execution,
  monitor: DebateMonitor,
  round: number,
): 'converged' | 'token_budget' | undefined {
  const tokens = exec.usage.promptTokens + exec.usage.completionTokens;
  const row = monitorRound(exec.transcript, round, monitor.threshold, tokens);
  monitor.rounds.push(row);
  if (row.repeated) {
    const detail = Object.entries(row.similarity)
      .map(([id, s]) => `${id} ${s}`)
      .join(', ');
    monitor.stop = {
      reason: 'converged',
      round,
      detail: `turns repeat round ${round - 1} (${detail}) ≥ ${monitor.threshold}`,
    };
    return 'converged';
  }
  if (monitor.budgetTokens !== null && tokens >= monitor.budgetTokens) {
    monitor.stop = {
      reason: 'token_budget',
      round,
      detail: `${tokens} tokens ≥ budget ${monitor.budgetTokens}`,
    };
    return 'token_budget';
  }
  return undefined;
}

function isUnanimous(exec: Execution, round: number): boolean {
  const stances = new Set<string>();
  for (const m of exec.transcript)
    if (m.round === round && m.stage === 'debate' && m.stance !== null) stances.add(m.stance);
  return stances.size === 1;
}

/** Runs one stage of one round: each node starts as soon as its same-round inputs are done. */
async function runStage(exec: Execution, nodes: readonly ResolvedNode[], round: number): Promise<void> {
  const inStage = new Set(nodes.map((r) => r.node.id));
  const pending = new Map<string, Promise<void>>();
  for (const r of nodes) {
    const deps: Promise<void>[] = [];
    for (const d of r.deps) {
      const p = inStage.has(d) ? pending.get(d) : undefined;
      if (p !== undefined) deps.push(p);
    }
    const run =
      deps.length === 0 ? runNode(exec, r, round) : Promise.all(deps).then(() => runNode(exec, r, round));
    pending.set(r.node.id, run);
  }
  await Promise.all(pending.values());
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

async function runNode(exec: Execution, r: ResolvedNode, round: number): Promise<void> {
  exec.signal.throwIfAborted();
  const { role, node } = r;
  const ctx: RoleContext = {
    question: exec.input.question,
    candidate: exec.input.candidate,
    groundTruth: exec.input.groundTruth,
    nonce: exec.nonce,
    round,
    rounds: exec.graph.spec.rounds,
    node: { id: node.id, focus: node.focus, strictness: node.strictness },
    visible: visibleTo(exec, r, round),
  };
  // One fixed literal shape for every transcript message (object spread gives each its own hidden class).
  const toMessage = (
    m: Omit<TranscriptMessage, 'round' | 'stage' | 'nodeId' | 'role'>,
  ): TranscriptMessage => ({
    round,
    stage: r.stage,
    nodeId: node.id,
    role: role.name,
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
  });

  if (role.kind === 'local') {
    if (role.compute === undefined)
      throw new RewardError('RW_INTERNAL', `role '${role.name}' has no compute`);
    const output: unknown = role.compute(ctx);
    exec.transcript.push(
      toMessage({
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
      }),
    );
    return;
  }

  const route = exec.options.router.route(node);
  const prompt = role.render(ctx);
  const messages: ChatMessage[] = [
    { role: 'system', content: prompt.system },
    { role: 'user', content: prompt.user },
  ];
  const started = performance.now();
  let attempts = 0;
  let reasks = 0;
  let promptTokens = 0;
  let completionTokens = 0;
  let cachedPromptTokens: number | null = 0;
  const fail = (code: ErrorCode, message: string): void => {
    exec.transcript.push(
      toMessage({
        model: route.model,
        stance: null,
        confidence: null,
        promptTokens,
        completionTokens,
        cachedPromptTokens,
        latencyMs: performance.now() - started,
        attempts,
        reasks,
        error: { code, message },
      }),
    );
  };

  let maxTokens = route.maxTokens ?? node.max_tokens ?? defaultMaxTokens(role.name);
  let reasksLeft = MAX_REASKS;
  let raisesLeft = 1;
  for (;;) {
    exec.usage.calls += 1;
    const callStarted = performance.now();
    const callDeadline = exec.options.deadline;
    let reply;
    try {
      reply = await route.backend.complete(
        {
          role: role.name,
          nodeId: node.id,
          model: route.model,
          messages,
          schemaName: role.name,
          jsonSchema: role.jsonSchema,
          // Operator routing overrides (config file) win over the graph's own sampling values.
          temperature: route.temperature ?? node.temperature,
          topP: route.topP ?? node.top_p,
          maxTokens,
          seed: node.seed,
          focus: node.focus,
          context: ctx,
        },
        {
          signal: exec.signal,
          deadline: callDeadline,
          priority: callPriority(exec),
          observer: exec.options.observer,
          pin: exec.options.pin,
        },
      );
    } catch (err) {
      const failure = toFailure(err);
      attempts += 1;
      // Cut by the deadline it was given, which has moved later since (a request joined the judgment):
      // ask again under the new one; not a re-ask, the reply never came.
      const extended = cutByMovedDeadline(failure.code, exec.signal, callDeadline, exec.options.deadline);
      observeFailedCall(
        exec.options.observer,
        role.name,
        route,
        failure.code,
        performance.now() - callStarted,
      );
      if (extended) continue;
      fail(failure.code, failure.message);
      throw err;
    }
    exec.progress += 1;
    attempts += reply.attempts;
    promptTokens += reply.promptTokens;
    completionTokens += reply.completionTokens;
    exec.usage.promptTokens += reply.promptTokens;
    exec.usage.completionTokens += reply.completionTokens;
    // Unknown (not reported) stays unknown: one unreported call makes the sum null, never a lower bound.
    const cached = reply.cachedPromptTokens ?? null;
    cachedPromptTokens = addKnown(cachedPromptTokens, cached);
    exec.usage.cachedPromptTokens = addKnown(exec.usage.cachedPromptTokens, cached);
    const parsed = parseReply(reply.text, role.output);
    const truncated = !parsed.ok && reply.finishReason === 'length';
    const outcome = parsed.ok ? 'ok' : truncated ? 'RW_JUDGE_TRUNCATED' : 'RW_JUDGE_UNPARSABLE';
    observeReply(exec.options.observer, role.name, route, outcome, reply);
    if (parsed.ok) {
      exec.transcript.push(
        toMessage({
          model: route.model,
          stance: role.stance(parsed.value),
          confidence: role.confidence(parsed.value),
          output: parsed.value,
          promptTokens,
          completionTokens,
          cachedPromptTokens,
          latencyMs: performance.now() - started,
          attempts,
          reasks,
          servedModel: reply.model,
          replica: reply.replica,
        }),
      );
      return;
    }
    const contextTokens = route.backend.contextTokens?.();
    const counted = { messages: messages.length, tokens: reply.promptTokens };
    if (truncated) {
      // A cut reply is re-asked as it was, with a larger budget: echoing the cut JSON back would only
      // lengthen the prompt, and the same budget would be cut again.
      const prompt = countPrompt(messages, counted);
      const next = raisesLeft > 0 ? raisedBudget(maxTokens, prompt, contextTokens) : undefined;
      if (next === undefined) {
        const why =
          raisesLeft > 0
            ? `no larger budget fits${contextTokens === undefined ? '' : ` the context (${contextTokens} tokens, prompt ~${prompt})`}`
            : 'also with the raised budget';
        const message = `node '${node.id}': reply cut at max_tokens ${maxTokens} (finish_reason length), ${why}`;
        fail('RW_JUDGE_TRUNCATED', message);
        throw new RewardError('RW_JUDGE_TRUNCATED', message);
      }
      raisesLeft -= 1;
      reasks += 1;
      maxTokens = next;
      continue;
    }
    if (reasksLeft <= 0) {
      const message = `node '${node.id}': invalid output after ${reasks + 1} replies (${parsed.error})`;
      fail('RW_JUDGE_UNPARSABLE', message);
      throw new RewardError('RW_JUDGE_UNPARSABLE', message);
    }
    const reask = reaskMessages(reply.text, parsed.error);
    if (contextTokens !== undefined) {
      // The re-ask appends to the prompt: it must itself fit, or it is not sent.
      const prompt = countPrompt([...messages, ...reask], counted);
      if (prompt + maxTokens > contextTokens) {
        const message =
          `node '${node.id}': invalid output (${parsed.error}); the re-ask (~${prompt} prompt + ` +
          `${maxTokens} completion tokens) would not fit the context of ${contextTokens} tokens, not sent`;
        fail('RW_JUDGE_UNPARSABLE', message);
        throw new RewardError('RW_JUDGE_UNPARSABLE', message);
      }
    }
    reasksLeft -= 1;
    reasks += 1;
    messages.push(...reask);
  }
}
