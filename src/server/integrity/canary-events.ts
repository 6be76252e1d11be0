/** Canary log entries read back into the ledger's events (Redis is a boundary: entries are validated). */
import { z } from 'zod';

import type { CanaryEvent } from './canary-ledger.js';

const Verdict = z.enum(['match', 'no_match']);
/** A log entry as the ledger needs it (Redis is a boundary: entries are validated, not trusted). */
const CanaryEventSchema = z.object({
  at: z.number(),
  row: z.string(),
  label: Verdict,
  verdict: Verdict.nullable(),
  outcome: z.enum(['correct', 'wrong', 'failed']),
  pins: z.array(z.object({ backend: z.string(), replica: z.string() })),
  members: z.array(
    z.object({
      node: z.string(),
      role: z.string(),
      backend: z.string(),
      replica: z.string(),
      stance: Verdict,
    }),
  ),
  targeted: z.boolean().optional(),
});

/** Parses a log entry back into an event; undefined when it is not one (another version's, corrupt). */
export function toEvent(entry: string): CanaryEvent | undefined {
  try {
    const parsed = CanaryEventSchema.safeParse(JSON.parse(entry));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}
