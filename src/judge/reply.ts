/**
 * A judge's reply as the executor reads it: strict JSON of the role's schema, and the re-ask sent once
 * when a reply does not parse.
 */
import type { z } from 'zod';

import type { ChatMessage } from './types.js';

/** Invalid structured output is re-asked once, then the node (and the judgment) fails. */
export const MAX_REASKS = 1;
/** How much of an invalid reply is echoed back in the re-ask. */
const REASK_ECHO_CHARS = 2_000;

export type ParsedReply<T = unknown> = { ok: true; value: T } | { ok: false; error: string };

/** Strict JSON of the role's schema; a single ```json fenced block is tolerated (some servers add it). */
export function parseReply<T>(text: string, schema: z.ZodType<T>): ParsedReply<T> {
  let body = text.trim();
  const fenced = /^```(?:json)?\s*\n([\s\S]*?)\n?```$/.exec(body);
  if (fenced?.[1] !== undefined) body = fenced[1];
  let json: unknown;
  try {
    json = JSON.parse(body);
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
