/** Response shapes of DESIGN §5: per-item results, group statistics (Dr. GRPO advantages), usage. */
import type { CompiledGraph } from '../../judge/graph.js';
import type { Usage } from '../../judge/types.js';
import type { JudgedItem } from './judge-types.js';
import { judgmentOutcome, rewardOf, scoreOf, statusOf } from './outcomes.js';
import { votesOf, type Vote } from '../controls/stamps.js';

export interface ItemResult {
  /** `outcomes.ts`: the verdict's 0/1, 0 for a rejected input, null for a failure or a cancel. */
  reward: number | null;
  verdict: 'match' | 'no_match' | null;
  status: string;
  score: number | null;
  /** A deciding reply gave its own stance a confidence < 0.5 (its stance decided); false unless `ok`. */
  incoherent: boolean;
  cached: boolean;
  calls: number;
  /** The judgment's own prompt tokens and the part its backend served from cache (null: not reported). */
  prompt_tokens: number;
  cached_prompt_tokens: number | null;
  latency_ms: number;
  judgment_id: string | null;
  reason?: string;
  error?: string;
  error_code?: string;
  rounds?: number;
  /** Why the judgment ended (`cascade_stop`, `escalated`, `single_round`, `deadline`…); always present. */
  stop_reason: string;
  transcript?: unknown;
  /** Per-round similarity, objection shares and why it stopped (a `converged` early stop only). */
  debate?: unknown;
  /** Code points of the candidate's reasoning trace before its answer (REASONING_FORMAT); 0 without one. */
  reasoning_chars?: number;
  /** Every stance-bearing message (deciding members and voters), also when replayed from a cache. */
  votes: Vote[];
}

export function toResult(item: JudgedItem, includeTranscript: boolean): ItemResult {
  const j = item.judgment;
  const outcome = judgmentOutcome(j);
  const result: ItemResult = {
    reward: rewardOf(outcome),
    verdict: j.verdict,
    status: statusOf(outcome),
    score: scoreOf(outcome),
    incoherent: j.incoherent,
    cached: item.cached,
    calls: j.usage.calls,
    prompt_tokens: j.usage.promptTokens,
    cached_prompt_tokens: j.usage.cachedPromptTokens,
    latency_ms: Math.round(j.latencyMs),
    judgment_id: item.judgmentId,
    stop_reason: j.stopReason,
    votes: votesOf(j),
  };
  if (j.reason !== undefined) result.reason = j.reason;
  result.reasoning_chars = item.reasoningChars ?? 0;
  if (j.error !== undefined) {
    result.error = j.error.message;
    result.error_code = j.error.code;
  }
  if (includeTranscript) {
    result.rounds = j.rounds;
    result.transcript = j.transcript;
    if (j.debate !== undefined) result.debate = j.debate;
  }
  return result;
}

export interface GroupStats {
  mean: number | null;
  std: number | null;
  /** r − mean over the items that carry a reward (Dr. GRPO: no std normalisation); null for failures. */
  advantages: Array<number | null>;
  n_ok: number;
  n_failed: number;
}

/** Statistics over the items with a reward (`ok` and `rejected_input`, a real 0); failures are excluded. */
export function groupStats(rewards: ReadonlyArray<number | null>): GroupStats {
  let n = 0;
  let sum = 0;
  for (const r of rewards) {
    if (r === null) continue;
    n += 1;
    sum += r;
  }
  if (n === 0) {
    return { mean: null, std: null, advantages: rewards.map(() => null), n_ok: 0, n_failed: rewards.length };
  }
  const mean = sum / n;
  let sq = 0;
  for (const r of rewards) if (r !== null) sq += (r - mean) ** 2;
  return {
    mean,
    std: Math.sqrt(sq / n),
    advantages: rewards.map((r) => (r === null ? null : r - mean)),
    n_ok: n,
    n_failed: rewards.length - n,
  };
}

export interface UsageJson {
  calls: number;
  prompt_tokens: number;
  completion_tokens: number;
  /** Backend-reported prefix-cache hits; null when any computed judgment's backend did not report them. */
  cached_prompt_tokens: number | null;
  /**
   * Reasoning tokens (part of completion_tokens): `completion_tokens_details.reasoning_tokens`, or estimated
   * from the trace where a server reported none; then `reasoning_tokens_estimated` is true.
   */
  reasoning_tokens: number;
  reasoning_tokens_estimated: boolean;
}

/**
 * LLM usage this request caused: the judgments (or comparisons) it computed itself (cache hits and shared
 * flights cost nothing).
 */
export function usageOf(items: ReadonlyArray<{ cached: boolean; judgment: { usage: Usage } }>): UsageJson {
  const usage: UsageJson = {
    calls: 0,
    prompt_tokens: 0,
    completion_tokens: 0,
    cached_prompt_tokens: 0,
    reasoning_tokens: 0,
    reasoning_tokens_estimated: false,
  };
  for (const item of items) {
    if (item.cached) continue;
    usage.calls += item.judgment.usage.calls;
    usage.prompt_tokens += item.judgment.usage.promptTokens;
    usage.completion_tokens += item.judgment.usage.completionTokens;
    usage.reasoning_tokens += item.judgment.usage.reasoningTokens ?? 0;
    if (item.judgment.usage.reasoningTokensEstimated === true) usage.reasoning_tokens_estimated = true;
    const cached = item.judgment.usage.cachedPromptTokens;
    usage.cached_prompt_tokens =
      usage.cached_prompt_tokens === null || cached === null ? null : usage.cached_prompt_tokens + cached;
  }
  return usage;
}

export function groupResponse(
  items: readonly JudgedItem[],
  graph: CompiledGraph,
  backend: string,
  includeTranscripts: boolean,
  requestId: string | undefined,
) {
  const outcomes = items.map((i) => judgmentOutcome(i.judgment));
  const rewards = outcomes.map(rewardOf);
  return {
    rewards,
    scores: outcomes.map(scoreOf),
    results: items.map((i) => toResult(i, includeTranscripts)),
    group: groupStats(rewards),
    graph: { name: graph.name, hash: graph.hash },
    backend,
    usage: usageOf(items),
    ...(requestId === undefined ? {} : { request_id: requestId }),
  };
}
