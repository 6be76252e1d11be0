/**
 * A judge's reply as the executor reads it: strict JSON of the role's schema, and what follows a reply that
 * does not parse (a cut reply asked again with a larger budget, an invalid one re-asked once, or the node
 * gives up).
 */
import type { z } from 'zod';

import { promptTokens as countPrompt, raisedBudget } from './budgets.js';
import type { ChatMessage, LlmReply } from './types.js';

/** Invalid structured output is re-asked once, then the node (and the judgment) fails. */
export const MAX_REASKS = 1;
/** How much of an invalid reply is echoed back in the re-ask. */
const REASK_ECHO_CHARS = 2_000;

export type ParsedReply<T = unknown> = { ok: true; value: T } | { ok: false; error: string };

const FENCED = /^```(?:json)?\s*\n([\s\S]*?)\n?```$/;

/** The JSON text of a reply as the executor reads it: trimmed, one ```json fence removed. */
export function jsonBody(text: string): string {
  const body = text.trim();
  return FENCED.exec(body)?.[1] ?? body;
}

/**
 * A reply cut short: stopped at its budget (`finish_reason` length), or all trace (an inline trace that never
 * closed). A cut reply that does not parse is asked again with a raised budget, not re-asked as invalid.
 */
export function isCutReply(reply: Pick<LlmReply, 'finishReason' | 'reasoning'>): boolean {
  return reply.finishReason === 'length' || reply.reasoning?.unclosed === true;
}

/** Strict JSON of the role's schema; a single ```json fenced block is tolerated (some servers add it). */
export function parseReply<T>(text: string, schema: z.ZodType<T>): ParsedReply<T> {
  let json: unknown;
  try {
    json = JSON.parse(jsonBody(text));
  } catch {
    return { ok: false, error: 'reply is not valid JSON' };
  }
  const result = schema.safeParse(json);
  if (result.success) return { ok: true, value: result.data };
  const issues = result.error.issues.slice(0, 5).map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`);
  return { ok: false, error: `reply does not match the schema: ${issues.join('; ')}` };
}

/** The two messages appended to the conversation to re-ask after an invalid reply. */
export function reaskMessages(replyText: string, error: string): ChatMessage[] {
  return [
    { role: 'assistant', content: replyText.slice(0, REASK_ECHO_CHARS) },
    {
      role: 'user',
      content: `Your reply was rejected: ${error}. Answer again with only the JSON object required by the schema.`,
    },
  ];
}

/** What a node does after a reply that did not parse. */
export type NextAsk =
  | { kind: 'raise'; maxTokens: number }
  | { kind: 'reask'; messages: ChatMessage[] }
  | { kind: 'give_up'; code: 'RW_JUDGE_TRUNCATED' | 'RW_JUDGE_UNPARSABLE'; message: string };

/**
 * After an invalid reply: a reply cut at `max_tokens` (finish_reason `length`) is asked again as it was with
 * a raised budget (`raisedBudget`), once; any other invalid reply is re-asked (`reaskMessages`) while
 * `reasksLeft` lasts, if the longer prompt still fits `contextTokens` (unknown: assumed to fit). Otherwise
 * the node gives up with the code and the message its transcript and error carry. Pure: the caller applies
 * the step (and counts it as a re-ask).
 */
export function nextAsk(state: {
  nodeId: string;
  /** The conversation the reply answered. */
  messages: readonly ChatMessage[];
  maxTokens: number;
  raisesLeft: number;
  reasksLeft: number;
  /** Re-asks (and raises) so far. */
  reasks: number;
  /** `promptTokens`: the backend's count of `messages` (0 when it reported none). */
  reply: { text: string; promptTokens: number; truncated: boolean; error: string };
  contextTokens: number | undefined;
}): NextAsk {
  const { nodeId, messages, maxTokens, reply, contextTokens } = state;
  const counted = { messages: messages.length, tokens: reply.promptTokens };
  if (reply.truncated) {
    // A cut reply is re-asked as it was, with a larger budget: echoing the cut JSON back would only
    // lengthen the prompt, and the same budget would be cut again.
    const prompt = countPrompt(messages, counted);
    const next = state.raisesLeft > 0 ? raisedBudget(maxTokens, prompt, contextTokens) : undefined;
    if (next !== undefined) return { kind: 'raise', maxTokens: next };
    const why =
      state.raisesLeft > 0
        ? `no larger budget fits${contextTokens === undefined ? '' : ` the context (${contextTokens} tokens, prompt ~${prompt})`}`
        : 'also with the raised budget';
    const message = `node '${nodeId}': reply cut at max_tokens ${maxTokens} (finish_reason length), ${why}`;
    return { kind: 'give_up', code: 'RW_JUDGE_TRUNCATED', message };
  }
  if (state.reasksLeft <= 0) {
    const message = `node '${nodeId}': invalid output after ${state.reasks + 1} replies (${reply.error})`;
    return { kind: 'give_up', code: 'RW_JUDGE_UNPARSABLE', message };
  }
  const reask = reaskMessages(reply.text, reply.error);
  if (contextTokens !== undefined) {
    // The re-ask appends to the prompt: it must itself fit, or it is not sent.
    const prompt = countPrompt([...messages, ...reask], counted);
    if (prompt + maxTokens > contextTokens) {
      const message =
        `node '${nodeId}': invalid output (${reply.error}); the re-ask (~${prompt} prompt + ` +
        `${maxTokens} completion tokens) would not fit the context of ${contextTokens} tokens, not sent`;
      return { kind: 'give_up', code: 'RW_JUDGE_UNPARSABLE', message };
    }
  }
  return { kind: 'reask', messages: reask };
}
