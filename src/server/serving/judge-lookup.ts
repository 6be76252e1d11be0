/**
 * A request's items keyed and looked up (judge-service.ts): its idempotency record (here, or with REDIS_URL
 * elsewhere), the shared tier and the LRU; the flights it starts; the record written once it is answered.
 */
import { judgmentKey, keyFormOf } from '../../judge/key.js';
import { itemsDigest, type Recalled } from './idempotency.js';
import { scopedKey } from './tenant-work.js';
import type { SharedLookup } from './shared-judgments.js';
import type { Service, JudgedItem, JudgeRequest, StoredJudgment } from './judge-types.js';

export function isCacheable(stored: StoredJudgment): boolean {
  return stored.judgment.status === 'ok' || stored.judgment.status === 'rejected_input';
}

/** The request's idempotency record: answered (completed judgments only, never failures). */
export function remember(svc: Service, id: string, items: string, results: readonly JudgedItem[]): void {
  svc.records.answered(
    id,
    items,
    results.map((r) =>
      r.judgmentId !== null && isCacheable({ id: r.judgmentId, judgment: r.judgment })
        ? { id: r.judgmentId, judgment: r.judgment }
        : undefined,
    ),
  );
}

/** Completed judgments in the shared tier for keys this process has neither cached nor in flight. */
async function lookupElsewhere(svc: Service, keys: readonly string[]): Promise<SharedLookup | undefined> {
  const { shared } = svc.options;
  if (shared === undefined) return undefined;
  const { cache } = svc;
  const wanted = [...new Set(keys.filter((k) => !cache.has(k) && !cache.holds(k)))];
  if (wanted.length === 0) return undefined;
  const lookup = await shared.lookup(wanted);
  for (const [key, stored] of lookup.found) cache.remember(key, stored);
  return lookup;
}

/** A request's items keyed and looked up: its idempotency record, the shared tier, the LRU. */
export interface Looked {
  keys: string[];
  /** `itemsDigest(keys)` when the request has an idempotency id, else ''. */
  itemsKey: string;
  /** The items answered by the lookup (replayed, shared or LRU hits); the rest are empty. */
  results: Array<JudgedItem | undefined>;
  /** Index of the item that starts each new flight. */
  starters: Map<string, number>;
  hits: number;
  sharedHits: number;
  elsewhere: SharedLookup | undefined;
}

/** A request's items keyed, its record recalled here, and (with REDIS_URL) the shared tier being asked. */
interface Recalling {
  keys: string[];
  itemsKey: string;
  record: Recalled | undefined;
  /** The record elsewhere and the shared tier's judgments, asked in parallel; undefined without Redis. */
  pending: Promise<[Recalled | undefined, SharedLookup | undefined]> | undefined;
}

/**
 * Keys the request's items and recalls its idempotency record here; with a shared tier, asks it for the
 * record and the judgments (the caller awaits `pending` itself, once, so that what follows stays
 * synchronous: no other request runs between the lookup and the start of the flights).
 */
export function recall(svc: Service, request: JudgeRequest): Recalling {
  const { options, records } = svc;
  const cacheScope = request.tenant?.cacheScope;
  const keys = request.items.map((item) =>
    scopedKey(
      judgmentKey(
        item.graph.graph,
        item.input,
        options.router,
        svc.settings,
        keyFormOf(item.prepared?.rejection),
      ),
      cacheScope,
    ),
  );
  const id = request.idempotencyKey;
  const itemsKey = id === undefined ? '' : itemsDigest(keys);
  const record: Recalled | undefined = id === undefined ? undefined : records.recallHere(id, itemsKey);
  if (options.shared === undefined && options.sharedRecords === undefined)
    return { keys, itemsKey, record, pending: undefined };
  const elsewhereRecord =
    record !== undefined || id === undefined ? record : records.recallElsewhere(id, itemsKey);
  // Items this process's record replays need no shared lookup (all of them: no round trip at all).
  const replayed = record?.kind === 'here' ? record.done : undefined;
  const unanswered = replayed === undefined ? keys : keys.filter((_, i) => replayed[i] === undefined);
  return {
    keys,
    itemsKey,
    record,
    pending: Promise.all([elsewhereRecord, lookupElsewhere(svc, unanswered)]),
  };
}

/**
 * The request's items answered from its record, the shared tier or the LRU, and the flights it starts.
 * Synchronous: it runs in the same tick as the admission decision and the start of the flights.
 */
export function sortItems(
  svc: Service,
  request: JudgeRequest,
  recalled: Pick<Recalling, 'keys' | 'itemsKey' | 'record'>,
  elsewhere: SharedLookup | undefined,
): Looked {
  const { keys, itemsKey, record } = recalled;
  const id = request.idempotencyKey;
  if (id !== undefined)
    svc.options.metrics.idempotencyLookups.labels(record === undefined ? 'miss' : 'hit').inc();
  const replay = record?.kind === 'here' ? record.done : undefined;
  const results: Array<JudgedItem | undefined> = [];
  const starters = new Map<string, number>();
  let hits = 0;
  let sharedHits = 0;
  for (let i = 0; i < request.items.length; i++) {
    const key = keys[i] ?? '';
    // Found elsewhere just now (and remembered in the LRU by the lookup): a shared hit.
    const remembered = replay?.[i];
    const remote = remembered === undefined ? elsewhere?.found.get(key) : undefined;
    const cached = remembered ?? remote ?? svc.cache.get(key);
    if (cached !== undefined) {
      results[i] = { judgmentId: cached.id, judgment: cached.judgment, cached: true };
      hits += 1;
      if (remote !== undefined) sharedHits += 1;
    } else if (!svc.cache.has(key) && !starters.has(key)) {
      starters.set(key, i);
    }
  }
  return { keys, itemsKey, results, starters, hits, sharedHits, elsewhere };
}

/** Counts the request's lookups once it is admitted: LRU and shared hits, items joining a flight. */
export function countLookups(svc: Service, looked: Looked, itemCount: number): void {
  const { hits, sharedHits, starters } = looked;
  if (hits > sharedHits) svc.lookups.hit.inc(hits - sharedHits);
  if (sharedHits > 0) svc.lookups.sharedHit.inc(sharedHits);
  const joined = itemCount - hits - starters.size;
  if (joined > 0) svc.lookups.coalesced.inc(joined);
}
