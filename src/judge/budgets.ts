/**
 * Token budgets of judge calls: each role's default `max_tokens`, how far a truncated reply's budget may
 * be raised, and the prompt-size estimate that keeps a re-ask inside the backend's context window.
 */
import type { ReasoningEffort } from '../settings/routing-file.js';
import type { ChatMessage } from './types.js';

/**
 * The answer's share of the default `max_tokens` per role (a reasoning model's trace comes on top, see
 * TRACE_ALLOWANCE and defaultMaxTokens), used when neither the routing file nor the graph node sets one. Sized
 * from the roles' schemas (reasoning first, then the answer fields) with room to spare: a complete
 * Analyst reply is typically 250–600 tokens. Without a budget a misbehaving judge generates until its
 * context ends (measured on llama.cpp: 2 000 tokens and 28 s per call).
 */
export const ROLE_MAX_TOKENS: ReadonlyMap<string, number> = new Map([
  ['moderator', 512],
  ['analyst', 1024],
  ['critic', 1024],
  ['reviewer', 1024],
  ['evaluator', 768],
  ['judge', 768],
]);

/** For a role not in the table. */
export const FALLBACK_MAX_TOKENS = 1024;

/**
 * Completion tokens a reasoning model's trace may take before its answer, by the `reasoning_effort` in
 * force (OpenAI counts these in `completion_tokens` and under `max_completion_tokens`; vLLM, SGLang and
 * llama.cpp count them under `max_tokens`). `unset` is a call sent without one: a reasoning model then
 * thinks at its default, `medium` for GPT-OSS and gpt-5 / o-series. Sized at ~2.5× the traces of a judge's
 * reply at each effort (the fake plays 250 / 800 / 2 400 tokens for low / medium / high: docs/reasoning-judges.md),
 * so a cut-and-ask-again is rare; each (backend, role) also learns its lengths (learned-budgets.ts). A model
 * that does not reason stops at its answer: a larger budget costs it nothing but the token estimate.
 */
export const TRACE_ALLOWANCE: ReadonlyMap<ReasoningEffort | 'unset', number> = new Map<
  ReasoningEffort | 'unset',
  number
>([
  ['minimal', 256],
  ['low', 768],
  ['medium', 2048],
  ['high', 6144],
  ['unset', 2048],
]);

/** A truncated reply (finish_reason `length`) is re-asked once with this many times the budget… */
export const TRUNCATION_BUDGET_FACTOR = 2;
/**
 * …but never more than this many tokens (nor more than the context leaves): room for a `high` trace
 * (TRACE_ALLOWANCE) and the largest answer, doubled.
 */
export const MAX_RAISED_TOKENS = 16_384;

/**
 * Tokens per character for text the backend has not counted yet. Deliberately pessimistic (English is
 * ~4 chars/token; JSON-escaped text and other scripts are denser), so a re-ask that passes the check fits.
 */
const CHARS_PER_TOKEN = 3;
/** Chat-template tokens per message (role header and separators). */
const TOKENS_PER_MESSAGE = 8;

/** The role's answer budget plus the trace allowance of `effort` (absent: the model's default effort). */
export function defaultMaxTokens(role: string, effort?: ReasoningEffort): number {
  return (ROLE_MAX_TOKENS.get(role) ?? FALLBACK_MAX_TOKENS) + (TRACE_ALLOWANCE.get(effort ?? 'unset') ?? 0);
}

/** Pessimistic token count of messages the backend has not seen. */
export function estimateMessageTokens(messages: readonly ChatMessage[]): number {
  let tokens = 0;
  for (const m of messages) tokens += Math.ceil(m.content.length / CHARS_PER_TOKEN) + TOKENS_PER_MESSAGE;
  return tokens;
}

/**
 * Prompt tokens of a conversation: the backend's own count of the part it has seen (`countedTokens` for
 * `counted` messages, 0 when it reported none) plus an estimate of the rest.
 */
export function promptTokens(
  messages: readonly ChatMessage[],
  counted: { messages: number; tokens: number },
): number {
  if (counted.tokens <= 0) return estimateMessageTokens(messages);
  return counted.tokens + estimateMessageTokens(messages.slice(counted.messages));
}

/**
 * The budget for re-asking a truncated reply, or undefined when no larger budget is worth sending: at
 * most `TRUNCATION_BUDGET_FACTOR` × the current one, `MAX_RAISED_TOKENS`, and what the context leaves
 * after the prompt; it must be at least 1.25 × the current budget to be worth a call.
 */
export function raisedBudget(
  current: number,
  prompt: number,
  contextTokens: number | undefined,
): number | undefined {
  let next = Math.min(current * TRUNCATION_BUDGET_FACTOR, MAX_RAISED_TOKENS);
  if (contextTokens !== undefined) next = Math.min(next, contextTokens - prompt);
  return next >= current * 1.25 ? Math.floor(next) : undefined;
}
