/**
 * The cross-process tier of the judgment cache (REDIS_URL): completed judgments other workers and replicas
 * computed, and a single-flight lease per judgment so that a burst of duplicates split across replicas
 * costs one judgment's calls. The in-process LRU and single-flight stay in front of it; without REDIS_URL
 * this tier does not exist and nothing changes.
 *
 * Values cross a process boundary, so they are validated on the way in (`decodeStored`): an entry this
 * version cannot read is a miss, never a wrong reward. Failures are handed to waiters (they share the
 * outcome, as local joiners do) but never stored.
 */
import { z } from 'zod';

import { isErrorCode, type ErrorCode } from '../../errors.js';
import type { Judgment } from '../../judge/types.js';
import type { SharedState } from '../../state/types.js';

/** A completed judgment as the service keeps it (structurally the service's `StoredJudgment`). */
export interface SharedJudgment {
  id: string;
  judgment: Judgment;
}

const ErrorInfo = z.strictObject({
  code: z.custom<ErrorCode>((v) => isErrorCode(v)),
  message: z.string(),
});
const Verdict = z.enum(['match', 'no_match']);
const TranscriptMessage = z.strictObject({
  round: z.number(),
  stage: z.enum(['debate', 'final']),
  nodeId: z.string(),
  role: z.string(),
  model: z.string(),
  stance: Verdict.nullable(),
  confidence: z.number().nullable(),
  output: z.unknown().optional(),
  promptTokens: z.number(),
  completionTokens: z.number(),
  cachedPromptTokens: z.number().nullable(),
  latencyMs: z.number(),
  attempts: z.number(),
  reasks: z.number(),
  error: ErrorInfo.optional(),
  servedModel: z.string().optional(),
  reasoning: z.string().optional(),
  reasoningTokens: z.number().optional(),
  reasoningTokensEstimated: z.boolean().optional(),
});
const JudgmentWire = z.strictObject({
  status: z.enum(['ok', 'rejected_input', 'judge_error', 'timeout', 'overloaded']),
  verdict: Verdict.nullable(),
  reward: z.union([z.literal(0), z.literal(1)]).nullable(),
  score: z.number().nullable(),
  incoherent: z.boolean(),
  reason: z.string().optional(),
  error: ErrorInfo.optional(),
  graph: z.strictObject({ name: z.string(), hash: z.string() }),
  promptVersion: z.string(),
  rounds: z.number(),
  stopReason: z.string(),
  transcript: z.array(TranscriptMessage),
  usage: z.strictObject({
    calls: z.number(),
    promptTokens: z.number(),
    completionTokens: z.number(),
    cachedPromptTokens: z.number().nullable(),
    reasoningTokens: z.number().optional(),
    reasoningTokensEstimated: z.boolean().optional(),
  }),
  latencyMs: z.number(),
});
/** `v` changes whenever this shape does; entries of another version are misses. */
const StoredWire = z.strictObject({ v: z.literal(1), id: z.string(), judgment: JudgmentWire });

export function encodeStored(stored: SharedJudgment): string {
  return JSON.stringify({ v: 1, id: stored.id, judgment: stored.judgment });
}

/** The judgment in `text`, or undefined when it is not a judgment this version wrote. */
export function decodeStored(text: string): SharedJudgment | undefined {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return undefined;
  }
  const parsed = StoredWire.safeParse(json);
  if (!parsed.success) return undefined;
  const judgment: Judgment = parsed.data.judgment;
  return { id: parsed.data.id, judgment };
}

export type SharedFlight =
  /** `waited`: handed over by a holder this caller waited for (else it was already stored). */
  | { kind: 'landed'; stored: SharedJudgment; waited: boolean }
  | {
      kind: 'acquired';
      /** Hands the outcome to waiters; stores it too when `cacheable`. */
      complete(stored: SharedJudgment, cacheable: boolean): Promise<void>;
      /** Lets a waiter elsewhere take over (this computation was aborted or broke). */
      abandon(): Promise<void>;
    };

/** What the shared tier knows of some keys. */
export interface SharedLookup {
  /** Completed judgments (entries that do not decode are left out and reported). */
  found: Map<string, SharedJudgment>;
  /** Keys with no stored judgment whose lease another process holds: being computed there now. */
  running: Set<string>;
}

export interface SharedJudgments {
  /** Completed judgments of `keys`, and which of the others are being computed elsewhere. */
  lookup(keys: readonly string[]): Promise<SharedLookup>;
  /**
   * The right to compute `key`, or the outcome of whoever computed it; waits until `deadline.at`, read again
   * as it moves (a request that joins the waiting flight extends it).
   */
  acquire(key: string, signal: AbortSignal, deadline: { readonly at: number }): Promise<SharedFlight>;
}

export interface SharedJudgmentsOptions {
  /** How long a completed judgment stays in the shared store, ms. */
  ttlMs: number;
  /** An entry could not be decoded (written by another version, or corrupt). */
  onUndecodable?: (() => void) | undefined;
}

/** The shared tier over `state`, or undefined for local state (the in-process cache is the whole cache). */
export function createSharedJudgments(
  state: SharedState,
  options: SharedJudgmentsOptions,
): SharedJudgments | undefined {
  const store = state.judgments;
  if (store === undefined) return undefined;
  const decode = (text: string): SharedJudgment | undefined => {
    const stored = decodeStored(text);
    if (stored === undefined) options.onUndecodable?.();
    return stored;
  };
  return {
    async lookup(keys) {
      const found = new Map<string, SharedJudgment>();
      const running = new Set<string>();
      if (keys.length === 0) return { found, running };
      // Two commands on one connection: one round trip.
      const [values, held] = await Promise.all([store.getMany(keys), state.leases.heldElsewhere(keys)]);
      for (const [i, key] of keys.entries()) {
        const text = values[i];
        const stored = text === undefined ? undefined : decode(text);
        if (stored !== undefined) found.set(key, stored);
        else if (held[i] === true) running.add(key);
      }
      return { found, running };
    },
    async acquire(key, signal, deadline) {
      // A landed outcome that does not decode is ignored: compute it here (the lease is not ours, but a
      // duplicate computation is the safe side of an unreadable entry).
      for (let attempt = 0; attempt < 3; attempt++) {
        const outcome = await state.leases.acquire(key, {
          signal,
          get deadline() {
            return deadline.at;
          },
        });
        if (outcome.kind === 'landed') {
          const stored = decode(outcome.value);
          if (stored !== undefined) return { kind: 'landed', stored, waited: outcome.waited };
          continue;
        }
        const { lease } = outcome;
        return {
          kind: 'acquired',
          complete: (stored, cacheable) =>
            lease.complete(encodeStored(stored), cacheable ? options.ttlMs : undefined),
          abandon: () => lease.abandon(),
        };
      }
      return { kind: 'acquired', complete: () => Promise.resolve(), abandon: () => Promise.resolve() };
    },
  };
}
