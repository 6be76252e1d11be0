/** Cost of a graph per judgment: LLM calls and tokens (deterministic) and latency (run-dependent). */
import { quantile } from '../../math/sampling.js';
import type { ItemRecord } from '../records.js';
import type { GraphEntry, Timing, Usage } from '../types.js';

/** Mean, median and 95th percentile of a list of numbers (nulls when empty). */
export function summarize(values: readonly number[]): {
  mean: number | null;
  p50: number | null;
  p95: number | null;
} {
  if (values.length === 0) return { mean: null, p50: null, p95: null };
  const sorted = [...values].sort((a, b) => a - b);
  return {
    mean: sorted.reduce((s, x) => s + x, 0) / sorted.length,
    p50: quantile(sorted, 0.5),
    p95: quantile(sorted, 0.95),
  };
}

/**
 * Mean LLM calls and tokens per judgment that reached the LLM (a rejected input makes no call, for a graph
 * and for its vote baseline alike), or null when none did. What the budget-matched baselines are sized by.
 */
export function spend(records: readonly ItemRecord[]): { calls: number; tokens: number } | null {
  let n = 0;
  let calls = 0;
  let tokens = 0;
  for (const r of records) {
    if (r.status === 'rejected_input') continue;
    n++;
    calls += r.usage.calls;
    tokens += r.usage.promptTokens + r.usage.completionTokens;
  }
  return n === 0 ? null : { calls: calls / n, tokens: tokens / n };
}

export function usage(records: readonly ItemRecord[]): Usage {
  const n = records.length;
  if (n === 0) {
    return {
      callsPerJudgment: null,
      promptTokensPerJudgment: null,
      completionTokensPerJudgment: null,
      tokensPerJudgment: null,
      cachedPromptTokensPerJudgment: null,
      uncachedPromptTokensPerJudgment: null,
      perRole: {},
    };
  }
  let cachedPromptTokens: number | null = 0;
  let calls = 0;
  let promptTokens = 0;
  let completionTokens = 0;
  let reasoningTokens = 0;
  let reasoningEstimated = false;
  const roles = new Map<string, { calls: number; prompt: number; completion: number; reasoning: number }>();
  for (const r of records) {
    calls += r.usage.calls;
    promptTokens += r.usage.promptTokens;
    completionTokens += r.usage.completionTokens;
    reasoningTokens += r.usage.reasoningTokens ?? 0;
    reasoningEstimated ||= r.usage.reasoningTokensEstimated === true;
    const cached = r.usage.cachedPromptTokens ?? null;
    if (r.usage.calls > 0)
      cachedPromptTokens =
        cached === null || cachedPromptTokens === null ? null : cachedPromptTokens + cached;
    for (const [role, u] of Object.entries(r.roles)) {
      const acc = roles.get(role) ?? { calls: 0, prompt: 0, completion: 0, reasoning: 0 };
      acc.calls += u.calls;
      acc.prompt += u.promptTokens;
      acc.completion += u.completionTokens;
      acc.reasoning += u.reasoningTokens ?? 0;
      roles.set(role, acc);
    }
  }
  const perRole: Usage['perRole'] = {};
  for (const [role, acc] of [...roles].sort(([a], [b]) => (a < b ? -1 : 1))) {
    perRole[role] = {
      callsPerJudgment: acc.calls / n,
      promptTokensPerJudgment: acc.prompt / n,
      completionTokensPerJudgment: acc.completion / n,
      // Only for a judge that reasons, so reports of other judges stay as they were.
      ...(acc.reasoning > 0 ? { reasoningTokensPerJudgment: acc.reasoning / n } : {}),
    };
  }
  return {
    callsPerJudgment: calls / n,
    promptTokensPerJudgment: promptTokens / n,
    completionTokensPerJudgment: completionTokens / n,
    tokensPerJudgment: (promptTokens + completionTokens) / n,
    cachedPromptTokensPerJudgment: cachedPromptTokens === null ? null : cachedPromptTokens / n,
    uncachedPromptTokensPerJudgment:
      cachedPromptTokens === null ? null : (promptTokens - cachedPromptTokens) / n,
    ...(reasoningTokens > 0
      ? { reasoningTokensPerJudgment: reasoningTokens / n, reasoningTokensEstimated: reasoningEstimated }
      : {}),
    perRole,
  };
}

/** Judgment latency (ms) per graph, and per role (a role's summed node latency within one judgment). */
export function timingSummary(
  entries: readonly GraphEntry[],
  outcomes: ReadonlyMap<string, readonly ItemRecord[]>,
): Timing {
  const graphs: Timing['graphs'] = {};
  for (const entry of entries) {
    const records = (outcomes.get(entry.label) ?? []).filter((r) => r.status !== 'rejected_input');
    const roles = new Map<string, number[]>();
    for (const r of records) {
      for (const [role, u] of Object.entries(r.roles)) {
        const list = roles.get(role) ?? [];
        list.push(u.latencyMs);
        roles.set(role, list);
      }
    }
    graphs[entry.label] = {
      latencyMs: summarize(records.map((r) => r.latencyMs)),
      perRole: Object.fromEntries([...roles].map(([role, xs]) => [role, summarize(xs)])),
    };
  }
  return { graphs };
}
