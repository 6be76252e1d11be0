/**
 * What an idempotency id (`reward\0<request_id>`, `slime\0<rollout_id>`, a NeMo-Gym rollout index, an
 * `Idempotency-Key` header) remembers, so that a retry is recognised wherever it lands.
 *
 * - In this process: the items' judgment keys and their completed judgments, for IDEMPOTENCY_WINDOW_MS, so a
 *   retry with the same items gets them back even after the LRU dropped them.
 * - With shared state (REDIS_URL), also a compact record (`<prefix>i:<sha256 of the id>` → the items'
 *   digest) that every worker and replica reads, so a retry is recognised wherever it lands. Records carry
 *   no judgments: a retry elsewhere is answered from the shared judgment store (REDIS_CACHE_TTL_MS), and
 *   one that arrives while the first attempt still runs waits for it through the shared leases (the
 *   judgment service does not count that wait as new work).
 *
 * Records are matched on the items too: the same id with other items is judged afresh, never replayed.
 * Records cross a process boundary, so they are validated on read; one this version cannot read is a miss.
 */
import { createHash } from 'node:crypto';

import { z } from 'zod';

import type { Judgment } from '../../judge/types.js';
import { evictOldest } from '../../state/bounded.js';
import type { IdempotencyStore } from '../../state/types.js';

/** A completed judgment as the judgment service keeps it. */
export interface RecordedJudgment {
  id: string;
  judgment: Judgment;
}

export interface IdempotencyOptions {
  windowMs: number;
  lingerMs: number;
  /** Records kept in this process (oldest dropped first). */
  maxEntries: number;
  /**
   * Completed judgments those records hold in all (oldest records dropped first): what bounds their
   * memory, since one record of a batch holds many and each holds its transcript.
   */
  maxItems: number;
}

/** What a retry learns from a record with its id and items. */
export type Recalled =
  /** This process answered it: the completed judgments by item (failures are absent: never replayed). */
  | { kind: 'here'; done: ReadonlyArray<RecordedJudgment | undefined> }
  /** Answered (by another process, or by this one before its own record went): see the shared store. */
  | { kind: 'elsewhere' };

export interface IdempotencyRecords {
  /** This process's record for `id` with these items (synchronous: no shared state involved). */
  recallHere(id: string, items: string): Recalled | undefined;
  /** Another process's record (shared state only; `undefined` without one, or for other items). */
  recallElsewhere(id: string, items: string): Promise<Recalled | undefined>;
  /** The request was answered: its completed (cacheable) judgments, by item. */
  answered(id: string, items: string, done: ReadonlyArray<RecordedJudgment | undefined>): void;
}

export interface IdempotencyRecordsOptions extends IdempotencyOptions {
  /** The shared record store (REDIS_URL); absent: records are this process's only. */
  shared?: IdempotencyStore | undefined;
  /** Epoch-ms clock (the requests' deadlines use the same). */
  now?: (() => number) | undefined;
  /** A shared record this version cannot read (another version, or corrupt). */
  onUndecodable?: (() => void) | undefined;
}

interface LocalRecord {
  items: string;
  done: ReadonlyArray<RecordedJudgment | undefined>;
  /** How many of `done` are judgments (the rest failed: never replayed). */
  held: number;
  expiresAt: number;
}

/** `v` changes whenever this shape does. `items` is a digest of the items' judgment keys. */
const SharedRecord = z.strictObject({ v: z.literal(1), items: z.string() });
type SharedRecord = z.infer<typeof SharedRecord>;

/**
 * The items of a request (their judgment keys, in order) as the one digest records are matched on: a
 * record of a 1 000-item batch stays 64 characters.
 */
export function itemsDigest(itemKeys: readonly string[]): string {
  const h = createHash('sha256');
  for (const key of itemKeys) h.update(`${key}\n`);
  return h.digest('hex');
}

/** Ids come from clients: the shared store sees a fixed-length digest, never the raw id. */
function storeId(id: string): string {
  return createHash('sha256').update(id).digest('hex');
}

function decodeShared(text: string): SharedRecord | undefined {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return undefined;
  }
  const parsed = SharedRecord.safeParse(json);
  return parsed.success ? parsed.data : undefined;
}

export function createIdempotencyRecords(options: IdempotencyRecordsOptions): IdempotencyRecords {
  const { windowMs, maxEntries, maxItems, shared } = options;
  const now = options.now ?? Date.now;
  const records = new Map<string, LocalRecord>();
  let held = 0;
  const drop = (id: string): void => {
    const record = records.get(id);
    if (record === undefined) return;
    records.delete(id);
    held -= record.held;
  };

  return {
    recallHere(id, items) {
      const record = records.get(id);
      if (record === undefined) return undefined;
      if (record.expiresAt <= now()) {
        drop(id);
        return undefined;
      }
      // Same id, other items: a client reusing an id for other work. Judge what was sent, never replay.
      return record.items === items ? { kind: 'here', done: record.done } : undefined;
    },

    async recallElsewhere(id, items) {
      if (shared === undefined) return undefined;
      const text = await shared.get(storeId(id));
      if (text === undefined) return undefined;
      const record = decodeShared(text);
      if (record === undefined) {
        options.onUndecodable?.();
        return undefined;
      }
      return record.items === items ? { kind: 'elsewhere' } : undefined;
    },

    answered(id, items, done) {
      drop(id);
      let count = 0;
      for (const d of done) if (d !== undefined) count += 1;
      records.set(id, { items, done, held: count, expiresAt: now() + windowMs });
      held += count;
      evictOldest(records, maxEntries, { drop, over: () => held > maxItems });
      if (shared === undefined || windowMs <= 0) return;
      const record: SharedRecord = { v: 1, items };
      // Not awaited: no answer waits for Redis. The store falls back to local state and never rejects.
      void shared.put(storeId(id), JSON.stringify(record), windowMs);
    },
  };
}
