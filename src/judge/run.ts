/**
 * Orchestration: runs one judgment through a compiled graph (the candidate's preparation, a cascade's
 * stages, rounds, early stop, the deadline and the caller's abort); each node runs in `node.ts`.
 */
import { performance } from 'node:perf_hooks';

import { RewardError } from '../errors.js';
import { addKnown, deadlineScope, toFailure } from './calls.js';
import { decide } from './decision.js';
import { prepareInput } from './candidate.js';
import type { CompiledCascade, CompiledGraph, ResolvedNode } from './graph.js';
import {
  failedJudgment,
  okJudgment,
  rejectedJudgment,
  type JudgmentFailure,
  type JudgmentRun,
} from './judgment.js';
import { monitorRound } from './monitor.js';
import { runNode, type Execution } from './node.js';
import { nextNonce } from './nonce.js';
import type { RunOptions } from './run-options.js';
import type { DebateMonitor, Judgment, JudgmentInput, TranscriptMessage, Usage } from './types.js';

export type { RunOptions } from './run-options.js';

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
  // final answer after a reasoning trace, no chat-template control tokens, not degenerate. Prepared here
  // once (or by the caller, `options.prepared`); everything below judges the prepared input as given.
  const prepared =
    options.prepared !== undefined
      ? { input: rawInput, rejection: options.prepared.rejection }
      : prepareInput(rawInput, { reasoningFormat: options.reasoningFormat, limits: options.limits });
  if (prepared.rejection !== undefined)
    return rejectedJudgment(graph, prepared.rejection, performance.now() - started);
  if (graph.cascade !== undefined) return runCascade(graph, graph.cascade, prepared.input, options, started);
  return runGraph(graph, prepared.input, options, started);
}

/** A plain graph's judgment of a prepared input: its rounds and final stage, then the decision. */
async function runGraph(
  graph: CompiledGraph,
  input: JudgmentInput,
  options: RunOptions,
  started: number,
): Promise<Judgment> {
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

  const progress = { roundsUsed: 0 };
  try {
    if (remainingMs <= 0) throw new RewardError('RW_JUDGE_TIMEOUT', 'request deadline reached before start');
    const stopReason = await runRounds(exec, progress);
    const roundsUsed = progress.roundsUsed;
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
    return failedJudgment(graph, failureOf(err, options, scope.timedOut()), spent(progress.roundsUsed));
  } finally {
    // A failed node must not leave its siblings' calls (and retries) running after the judgment ended.
    scope.end();
  }
}

/**
 * The debate rounds, until the last one or an early stop (`unanimous`, or the monitor's `converged` /
 * `token_budget`); returns the stop reason. `progress.roundsUsed` is the round started last, also when a
 * round throws.
 */
async function runRounds(exec: Execution, progress: { roundsUsed: number }): Promise<string> {
  const { spec } = exec.graph;
  const stop = spec.early_stop;
  const monitor: DebateMonitor | undefined =
    stop?.kind === 'converged'
      ? { threshold: stop.similarity, budgetTokens: stop.budget_tokens ?? null, rounds: [] }
      : undefined;
  exec.debate = monitor;
  for (let round = 1; round <= spec.rounds; round++) {
    progress.roundsUsed = round;
    await runStage(exec, exec.graph.debate, round);
    if (round < spec.rounds && stop?.kind === 'unanimous' && isUnanimous(exec, round)) return 'unanimous';
    const converged = monitor === undefined ? undefined : watchDebate(exec, monitor, round);
    if (converged !== undefined && round < spec.rounds) return converged;
  }
  return spec.rounds > 1 ? 'max_rounds' : 'single_round';
}

/** What a judgment that threw ends as: a timeout (the deadline), the caller's abort, or the node's failure. */
function failureOf(err: unknown, options: RunOptions, timedOut: boolean): JudgmentFailure {
  const failure = toFailure(err);
  if (timedOut || (failure.code === 'RW_JUDGE_TIMEOUT' && Date.now() >= options.deadline)) {
    return {
      status: 'timeout',
      code: 'RW_JUDGE_TIMEOUT',
      message: 'request deadline reached before the committee finished',
      reason: 'deadline',
      stopReason: 'deadline',
    };
  }
  if (options.signal?.aborted === true) {
    return {
      status: 'judge_error',
      // The caller's own reason (e.g. shutdown) when it gave one, else the caller left.
      code: options.signal.reason instanceof RewardError ? options.signal.reason.code : 'RW_CLIENT_ABORTED',
      message: 'aborted by the caller',
      reason: 'aborted',
      stopReason: 'aborted',
    };
  }
  return {
    status: 'judge_error',
    code: failure.code,
    message: failure.message,
    reason: failure.message,
    stopReason: 'node_failed',
  };
}

/**
 * A cascade: the first stage decides alone when it is confident in `stopOn` (`cascade_stop`); anything else
 * escalates to `then` (`escalated`, or the escalation's own failure reason). One nonce for both stages; the
 * transcript holds both stages' messages (node ids are distinct across stages) and usage is their sum. A
 * first stage that failed escalates too, unless the deadline passed or the caller aborted. Both stages
 * judge `input` as given: the caller prepared it (neither stage is a `runJudgment`, which would prepare).
 */
async function runCascade(
  graph: CompiledGraph,
  cascade: CompiledCascade,
  input: JudgmentInput,
  options: RunOptions,
  started: number,
): Promise<Judgment> {
  const staged = restage(options, { nonce: options.nonce ?? nextNonce() });
  const first = await runGraph(cascade.first, input, staged, performance.now());
  const confidence = first.score === null ? 0 : first.verdict === 'match' ? first.score : 1 - first.score;
  const stops = first.status === 'ok' && first.verdict === cascade.stopOn && confidence >= cascade.threshold;
  const ended = first.status === 'timeout' || first.stopReason === 'aborted';
  if (stops || ended) {
    return relabel(graph, first, stops ? 'cascade_stop' : first.stopReason, first, started);
  }
  // The escalation is a later stage of the same judgment: its calls keep the first stage's progress.
  const escalated = restage(staged, { progress: first.usage.calls });
  const second = await runGraph(cascade.then, input, escalated, performance.now());
  return relabel(graph, second, second.status === 'ok' ? 'escalated' : second.stopReason, first, started);
}

/**
 * `options` with `fields` replaced; `deadline` is still read through `options`, so a getter behind it (serving
 * moves a flight's deadline later when a request joins it) keeps working. A spread would freeze it.
 */
function restage(options: RunOptions, fields: Pick<RunOptions, 'nonce' | 'progress'>): RunOptions {
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
          ...sumReasoning(first.usage, decided.usage),
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

/** The reasoning fields of two usages summed; none when neither stage's judge reasoned. */
function sumReasoning(a: Usage, b: Usage): Pick<Usage, 'reasoningTokens' | 'reasoningTokensEstimated'> {
  const tokens = (a.reasoningTokens ?? 0) + (b.reasoningTokens ?? 0);
  if (tokens === 0) return {};
  const estimated = a.reasoningTokensEstimated === true || b.reasoningTokensEstimated === true;
  return { reasoningTokens: tokens, ...(estimated ? { reasoningTokensEstimated: true } : {}) };
}
