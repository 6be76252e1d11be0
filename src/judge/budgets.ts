/**
 * Token budgets of judge calls: each role's default `max_tokens`, how far a truncated reply's budget may
 * be raised, and the prompt-size estimate that keeps a re-ask inside the backend's context window.
 */
import type { ChatMessage } from './types.js';

/**
 * Default `max_tokens` per role, used when neither the routing file nor the graph node sets one. Sized
 * from the roles' schemas (reasoning first, then the answer fields) with room to spare: a complete
 * Analyst reply is typically 250–600 tokens. Without a budget a misbehaving judge generates until its
 * context ends (measured on llama.cpp: 2 000 tokens and 28 s per call).
 */
export const ROLE_MAX_TOKENS: ReadonlyMap<string, number> = new Map([
  ['moderator', 1024], // fits a medium-effort trace (~800 tokens) + its short answer (issue 37)
  ['analyst', 1024],
  ['critic', 1024],
  ['reviewer', 1024],
  ['evaluator', 1536], // a reasoning judge's ~800-token trace (medium effort) + its answer (issue 37)
  ['judge', 1536],
]);

/** For a role not in the table. */
export const FALLBACK_MAX_TOKENS = 1024;

/** A truncated reply (finish_reason `length`) is re-asked once with this many times the budget… */
export const TRUNCATION_BUDGET_FACTOR = 2;
/** …but never more than this many tokens (nor more than the context leaves). */
export const MAX_RAISED_TOKENS = 8192;

/**
 * Tokens per character for text the backend has not counted yet. Deliberately pessimistic (English is
 * ~4 chars/token; JSON-escaped text and other scripts are denser), so a re-ask that passes the check fits.
 */
const CHARS_PER_TOKEN = 3;
/** Chat-template tokens per message (role header and separators). */
const TOKENS_PER_MESSAGE = 8;

export function defaultMaxTokens(role: string): number {
  return ROLE_MAX_TOKENS.get(role) ?? FALLBACK_MAX_TOKENS;
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
