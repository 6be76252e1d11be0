/**
 * The constructors of a `Judgment`: every judgment, whether the engine ran it, rejected its input, or
 * serving / ablations had to answer for one that never ran, is built here with one fixed field order.
 */
import type { ErrorCode } from '../errors.js';
import { PROMPT_VERSION } from '../roles/index.js';
import type { DebateMonitor, Judgment, TranscriptMessage, Usage, Verdict } from './types.js';
import type { RejectionReason } from './degenerate.js';

/** What a judgment names of its graph. */
export interface GraphIdentity {
  name: string;
  hash: string;
}

/** What the engine spent on a judgment; a judgment that never ran spent nothing. */
export interface JudgmentRun {
  rounds: number;
  transcript: TranscriptMessage[];
  usage: Usage;
  latencyMs: number;
  /** The debate monitor's rounds, for a graph with a `converged` early stop. */
  debate?: DebateMonitor | undefined;
}

/** Why a judgment has no reward. */
export interface JudgmentFailure {
  status: 'judge_error' | 'timeout' | 'overloaded';
  code: ErrorCode;
  message: string;
  /** Short reason shown to callers, e.g. `deadline`, `aborted`, `internal error`. */
  reason: string;
  /** e.g. `deadline`, `aborted`, `node_failed`, `engine_error`. */
  stopReason: string;
}

const noUsage = (): Usage => ({ calls: 0, promptTokens: 0, completionTokens: 0, cachedPromptTokens: 0 });

/** One literal shape for every judgment (object spread would give each its own hidden class). */
function judgment(
  graph: GraphIdentity,
  head: Pick<Judgment, 'status' | 'verdict' | 'reward' | 'score' | 'stopReason'> &
    Partial<Pick<Judgment, 'error' | 'reason' | 'incoherent'>>,
  run: JudgmentRun,
): Judgment {
  return {
    status: head.status,
    verdict: head.verdict,
    reward: head.reward,
    score: head.score,
    incoherent: head.incoherent ?? false,
    reason: head.reason,
    error: head.error,
    rounds: run.rounds,
    stopReason: head.stopReason,
    graph: { name: graph.name, hash: graph.hash },
    promptVersion: PROMPT_VERSION,
    transcript: run.transcript,
    usage: run.usage,
    latencyMs: run.latencyMs,
    debate: run.debate,
  };
}

/**
 * The committee decided. The verdict gives the reward; `score` (rounded to 1e-6: `1 - 0.9921` is 0.0079,
 * not 0.007900000000000018) is reported as derived; `incoherent` as the decision found it.
 */
export function okJudgment(
  graph: GraphIdentity,
  decided: { verdict: Verdict; score: number; incoherent?: boolean | undefined; stopReason: string },
  run: JudgmentRun,
): Judgment {
  const score = Math.round(decided.score * 1e6) / 1e6;
  return judgment(
    graph,
    {
      status: 'ok',
      verdict: decided.verdict,
      reward: decided.verdict === 'match' ? 1 : 0,
      score,
      incoherent: decided.incoherent ?? false,
      stopReason: decided.stopReason,
    },
    run,
  );
}

/** A degenerate candidate: a real reward of 0, decided without any LLM call. */
export function rejectedJudgment(graph: GraphIdentity, reason: RejectionReason, latencyMs: number): Judgment {
  return judgment(
    graph,
    {
      status: 'rejected_input',
      verdict: 'no_match',
      reward: 0,
      score: 0,
      reason,
      stopReason: 'rejected_input',
    },
    { rounds: 0, transcript: [], usage: noUsage(), latencyMs },
  );
}

/**
 * A failed judgment: `reward: null`, never 0. `run` is what the engine spent before it failed; omit it
 * for a judgment that never ran (deadline while queued, an engine bug).
 */
export function failedJudgment(
  graph: GraphIdentity,
  failure: JudgmentFailure,
  run: Partial<JudgmentRun> = {},
): Judgment {
  return judgment(
    graph,
    {
      status: failure.status,
      verdict: null,
      reward: null,
      score: null,
      reason: failure.reason,
      error: { code: failure.code, message: failure.message },
      stopReason: failure.stopReason,
    },
    {
      rounds: run.rounds ?? 0,
      transcript: run.transcript ?? [],
      usage: run.usage ?? noUsage(),
      latencyMs: run.latencyMs ?? 0,
    },
  );
}
