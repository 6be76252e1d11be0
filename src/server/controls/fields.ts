/**
 * The operator-control fields every body route takes (issue 21): `deadline_ms` (the client's own deadline,
 * capped by REQUEST_DEADLINE_MS) and `tag` (what `POST /v1/cancel {"tag"}` selects, e.g. the trainer's
 * step). The trainer adapters' bodies are fixed by the trainers: they take the headers instead.
 */
import { z } from 'zod';

/** A day: anything longer is capped by REQUEST_DEADLINE_MS anyway; a larger number is a unit mistake. */
export const MAX_DEADLINE_MS = 86_400_000;
export const MAX_TAG_CHARS = 200;

export const DeadlineMs = z.number().int().positive().max(MAX_DEADLINE_MS);
export const Tag = z.string().min(1).max(MAX_TAG_CHARS);

/** Spread into a strict body schema. */
export const CONTROL_FIELDS = {
  deadline_ms: DeadlineMs.optional(),
  tag: Tag.optional(),
};

/** The headers the adapters (and, when the body has no such field, every route) read. */
export const DEADLINE_HEADER = 'x-reward-deadline-ms';
export const TAG_HEADER = 'x-reward-tag';

/** Another tenant's name, in a cancel an `admin` key sends for it (REWARD_KEYS). */
const OtherTenant = z.string().min(1).max(63);

/** `POST /v1/cancel`: ids or a tag (exactly one of the two), and `tenant` for an admin's cancel. */
export const CancelBody = z.union(
  [
    z.strictObject({
      request_ids: z.array(z.string().min(1).max(200)).min(1).max(10_000),
      tenant: OtherTenant.optional(),
    }),
    z.strictObject({ tag: Tag, tenant: OtherTenant.optional() }),
  ],
  { error: 'give {"request_ids": [...]} or {"tag": "..."}' },
);
