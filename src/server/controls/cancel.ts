/**
 * Cancellation (`POST /v1/cancel {request_ids} | {tag}`): the live requests a cancel selects let go of
 * their judgments at once. A judgment only cancelled requests waited for loses its last waiter: the
 * single-flight cache aborts it (its backend calls are aborted, a queued one leaves the queue and never
 * starts) and reports the abandonment here, which is what a cancel counts. A judgment another live request
 * waits for keeps running. The cancelled requests answer at once, their unfinished items `cancelled`.
 *
 * Ids and tags are per tenant (REWARD_KEYS): a cancel selects only requests of its own tenant (`tenant`,
 * default `default`), however the ids or tags of two tenants collide.
 *
 * A cancel also leaves a tombstone for its tag and for the ids it found no live request for (for the
 * server's request deadline): a request that arrives just after the cancel (a trainer's reward call still on
 * the wire when it aborted the step) is answered `cancelled` without starting anything. An id whose live
 * request the cancel selected gets no tombstone (issue 38 item 6): that cancel is complete, and a request
 * that reuses the id afterwards (slime and NeMo-Gym reuse rollout ids across attempts) is a new request. The registry is per process: with WORKERS>1 the cluster
 * primary relays a cancel to every worker (`cluster.ts`); with REDIS_URL it is also published to every
 * process sharing that Redis (`state/redis-cancels.ts`, wired in `routes/cancel.ts`).
 */
import { failedJudgment, type GraphIdentity } from '../../judge/judgment.js';
import type { Judgment } from '../../judge/types.js';
import { evictOldest } from '../../state/bounded.js';

/** The abort reason of a request a cancel selected (tell it from a disconnect, a deadline or a shutdown). */
export class RequestCancelled extends Error {
  constructor() {
    super('request cancelled (POST /v1/cancel)');
    this.name = 'RequestCancelled';
  }
}

/** What a cancel selects: requests by their `request_id`, or every request carrying `tag`, of `tenant`. */
export interface CancelSelector {
  requestIds?: readonly string[] | undefined;
  tag?: string | undefined;
  /** The tenant whose requests it selects; default `default` (REWARD_API_KEY, or a server without keys). */
  tenant?: string | undefined;
}

/** Tenant of a request or cancel that names none. */
const NO_TENANT = 'default';

export interface CancelOutcome {
  /** Judgments aborted because no live request waited for them any more. */
  judgments: number;
  /** Live requests the cancel selected. */
  requests: number;
}

/** A request as the registry knows it; `leave` once it has answered. */
export interface LiveRequest {
  /** Aborts (reason `RequestCancelled`) when a cancel selects the request, or at once for a tombstoned one. */
  readonly signal: AbortSignal;
  leave(): void;
}

export interface CancelRegistry {
  enter(
    route: string,
    ids: { requestId?: string | undefined; tag?: string | undefined; tenant?: string | undefined },
  ): LiveRequest;
  /** `tombstoneMs`: how long the ids and tag stay cancelled (default: the registry's; a relayed cancel's rest). */
  cancel(selector: CancelSelector, options?: { tombstoneMs?: number | undefined }): CancelOutcome;
  /** The services' single-flight caches call this when a flight lost its last waiter. */
  abandoned(): void;
  /** Live requests registered (for tests and /readyz-style introspection). */
  readonly live: number;
}

export interface CancelRegistryOptions {
  /** How long a cancelled id or tag stays cancelled for requests arriving later, ms. */
  tombstoneMs: number;
  /** Counted per route of the cancelled request whose letting go aborted the judgment. */
  onCancelledJudgment?: ((route: string) => void) | undefined;
  now?: (() => number) | undefined;
}

/** Tombstones kept at most (oldest dropped first): a cancel storm cannot grow memory without bound. */
const MAX_TOMBSTONES = 10_000;

interface Entry {
  route: string;
  /** Index keys: `<tenant>\0<request_id>` and `<tenant>\0<tag>`. */
  requestId: string | undefined;
  tag: string | undefined;
  controller: AbortController;
}

/** An id or tag in the registry's indexes and tombstones: within its tenant. */
const scoped = (tenant: string | undefined, value: string | undefined): string | undefined =>
  value === undefined ? undefined : `${tenant ?? NO_TENANT}\u0000${value}`;

export function createCancelRegistry(options: CancelRegistryOptions): CancelRegistry {
  const now = options.now ?? Date.now;
  const byId = new Map<string, Set<Entry>>();
  const byTag = new Map<string, Set<Entry>>();
  let live = 0;
  /** `id:<request_id>` / `tag:<tag>` → expiry (epoch ms), in insertion order. */
  const tombstones = new Map<string, number>();
  /** The route of the request being cancelled right now (abandonments are reported synchronously). */
  let cancelling: string | undefined;
  let counted = 0;

  const add = (index: Map<string, Set<Entry>>, key: string | undefined, entry: Entry): void => {
    if (key === undefined) return;
    let set = index.get(key);
    if (set === undefined) {
      set = new Set();
      index.set(key, set);
    }
    set.add(entry);
  };
  const remove = (index: Map<string, Set<Entry>>, key: string | undefined, entry: Entry): void => {
    if (key === undefined) return;
    const set = index.get(key);
    if (set === undefined) return;
    set.delete(entry);
    if (set.size === 0) index.delete(key);
  };
  const tombstoned = (key: string): boolean => {
    const until = tombstones.get(key);
    if (until === undefined) return false;
    if (until > now()) return true;
    tombstones.delete(key);
    return false;
  };
  const bury = (key: string, ms: number): void => {
    const until = now() + ms;
    // Never shortens one already kept longer (a cancel relayed twice, the second time with less left).
    if ((tombstones.get(key) ?? 0) > until) return;
    tombstones.delete(key);
    tombstones.set(key, until);
    evictOldest(tombstones, MAX_TOMBSTONES);
  };

  return {
    get live() {
      return live;
    },
    enter(route, ids) {
      const entry: Entry = {
        route,
        requestId: scoped(ids.tenant, ids.requestId),
        tag: scoped(ids.tenant, ids.tag),
        controller: new AbortController(),
      };
      const dead =
        (entry.requestId !== undefined && tombstoned(`id:${entry.requestId}`)) ||
        (entry.tag !== undefined && tombstoned(`tag:${entry.tag}`));
      if (dead) {
        entry.controller.abort(new RequestCancelled());
        return { signal: entry.controller.signal, leave: () => undefined };
      }
      add(byId, entry.requestId, entry);
      add(byTag, entry.tag, entry);
      live += 1;
      let left = false;
      return {
        signal: entry.controller.signal,
        leave: () => {
          if (left) return;
          left = true;
          live -= 1;
          remove(byId, entry.requestId, entry);
          remove(byTag, entry.tag, entry);
        },
      };
    },
    cancel(selector, cancelOptions) {
      const ms = cancelOptions?.tombstoneMs ?? options.tombstoneMs;
      const selected = new Set<Entry>();
      for (const raw of selector.requestIds ?? []) {
        const id = scoped(selector.tenant, raw) ?? '';
        const found = [...(byId.get(id) ?? [])].filter((e) => !e.controller.signal.aborted);
        // An id whose request is live here is cancelled now: that cancel is complete, and a later request
        // with the id is a new one (a reused rollout_id). An id with no live request here may still be on
        // the wire: it is tombstoned, so that request is answered `cancelled` when it arrives.
        if (found.length === 0) bury(`id:${id}`, ms);
        for (const e of found) selected.add(e);
      }
      const tag = scoped(selector.tenant, selector.tag);
      if (tag !== undefined) {
        bury(`tag:${tag}`, ms);
        for (const e of byTag.get(tag) ?? []) selected.add(e);
      }
      const before = counted;
      let requests = 0;
      for (const e of selected) {
        if (e.controller.signal.aborted) continue;
        requests += 1;
        cancelling = e.route;
        try {
          // Synchronous: the request's scope aborts, its flights lose this waiter, and a flight left with
          // none is aborted and reported through `abandoned` before this returns.
          e.controller.abort(new RequestCancelled());
        } finally {
          cancelling = undefined;
        }
      }
      return { judgments: counted - before, requests };
    },
    abandoned() {
      if (cancelling === undefined) return;
      counted += 1;
      options.onCancelledJudgment?.(cancelling);
    },
  };
}

/** True when `signal` aborted because a cancel selected its request. */
export function isCancelled(signal: AbortSignal | undefined): boolean {
  return signal?.aborted === true && signal.reason instanceof RequestCancelled;
}

/** The answer for an item whose request was cancelled before its judgment finished: reward null. */
export function cancelledJudgment(graph: GraphIdentity, latencyMs: number): Judgment {
  return failedJudgment(
    graph,
    {
      status: 'judge_error',
      code: 'RW_CANCELLED',
      message: 'cancelled by POST /v1/cancel before the judgment finished',
      reason: 'cancelled',
      stopReason: 'cancelled',
    },
    { latencyMs },
  );
}

/** The status a route reports for a judgment: `cancelled` for a cancelled item, else the judgment's own. */
export function itemStatus(judgment: Pick<Judgment, 'status' | 'error'>): string {
  return judgment.error?.code === 'RW_CANCELLED' ? 'cancelled' : judgment.status;
}
