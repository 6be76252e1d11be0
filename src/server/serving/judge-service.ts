/**
 * The serving-side judging service: coalescing (LRU + single-flight), admission by predicted completion
 * (whole request or nothing), the per-request deadline, idempotent retries, metrics and transcripts.
 * Routes hand it items and get one `JudgedItem` per item back, in order; it never rejects for a judge
 * failure, only for overload.
 *
 * A flight (one judgment in progress) runs under the latest deadline of the requests waiting for it: a
 * retry that joins it extends it. A request with an idempotency id (`request_id`, `rollout_id`, a NeMo-Gym
 * rollout index, an `Idempotency-Key` header) is remembered for IDEMPOTENCY_WINDOW_MS: a retry with the
 * same id and the same items gets the completed judgments back even after the LRU dropped them, and when
 * its client disconnects, its flights are held for IDEMPOTENCY_LINGER_MS so the retry can join them. With
 * REDIS_URL the records are shared (`idempotency.ts`), and judgments another process is computing (a retry
 * that landed here, a duplicate) are waited for through their leases, not admitted (or refused) as new work.
 */
import { randomUUID } from 'node:crypto';

import { RewardError } from '../../errors.js';
import { JudgmentCache } from '../../judge/cache.js';
import { prepareInput, type ReasoningFormat } from '../../judge/candidate.js';
import type { CompiledGraph } from '../../judge/graph.js';
import { failedJudgment } from '../../judge/judgment.js';
import { judgmentKey, keyFormOf, keySettingsOf } from '../../judge/key.js';
import { runJudgment, type RunOptions } from '../../judge/run.js';
import type { Judgment, JudgmentInput, Router } from '../../judge/types.js';
import {
  admitOrHold,
  admitWhole,
  callObserver,
  overloadError,
  type Admission,
  type AdmitOrHold,
  type Refusal,
  type RefusalReporting,
  type Ticket,
  type WorkShape,
} from '../admission/admission.js';
import type { HoldPlace } from '../admission/hold.js';
import {
  createIdempotencyRecords,
  itemsDigest,
  type IdempotencyOptions,
  type IdempotencyRecords,
  type Recalled,
} from './idempotency.js';
import type { Metrics } from '../observe/metric-types.js';
import { cancelledJudgment, isCancelled } from '../controls/cancel.js';
import type { Lane } from '../admission/priority.js';
import type { TenantWork } from '../admission/fair-shares.js';
import { createFlightPayers, type FlightPayers } from './flight-payers.js';
import { scopedKey } from './tenant-work.js';
import { createFlightDeadlines, type FlightDeadline, type FlightDeadlines } from './flight-deadlines.js';
import { createRequestScope, DeadlineReached } from './request-scope.js';
import { createSharedFlights, type SharedFlights } from './shared-flights.js';
import type { SharedJudgments, SharedLookup } from './shared-judgments.js';
import type { IdempotencyStore } from '../../state/types.js';
import { toTranscriptRecord, type TranscriptSink } from '../observe/transcripts.js';

/** A graph as a request chose it: the compiled graph and its metrics label (preset name or `custom`). */
export interface GraphChoice {
  graph: CompiledGraph;
  label: string;
}

export interface JudgeItem {
  graph: GraphChoice;
  input: JudgmentInput;
  /** Set by `judge` once the input is prepared (src/judge/candidate.ts): the engine does not prepare it again. */
  prepared?: RunOptions['prepared'];
}

/** What admission counts for an item: its graph, or nothing at all for a candidate rejected unjudged. */
function shapeOf(item: JudgeItem): WorkShape {
  const graph = item.graph.graph;
  return item.prepared?.rejection === undefined ? graph : { ...pickShape(graph), rejected: true };
}

const pickShape = (g: CompiledGraph): WorkShape => ({
  hash: g.hash,
  llmCallsPerJudgment: g.llmCallsPerJudgment,
  criticalPathCalls: g.criticalPathCalls,
});

/** A signal that never aborts (a request without a disconnect signal). */
const NEVER = new AbortController().signal;

/** One item's answer. `judgmentId` is null when no judgment ran for it (deadline reached while waiting). */
export interface JudgedItem {
  judgmentId: string | null;
  judgment: Judgment;
  /** True when this request did not compute it: an LRU hit or a flight shared with another item/request. */
  cached: boolean;
  /** Code points of the item's reasoning trace before its answer (src/judge/candidate.ts); 0 without one. */
  reasoningChars?: number | undefined;
}

export interface JudgeRequest {
  items: readonly JudgeItem[];
  /** Absolute deadline, epoch ms; unfinished items come back `timeout`. */
  deadline: number;
  /** Aborts when the client goes away: the request lets go of its flights. */
  signal?: AbortSignal | undefined;
  requestId?: string | undefined;
  /**
   * Idempotency id, scoped by the caller (e.g. `reward:<request_id>`): a retry with the same id and the
   * same items joins or replays this request's judgments.
   */
  idempotencyKey?: string | undefined;
  /** Aborts when POST /v1/cancel selects the request (`cancel.ts`): its flights are let go at once. */
  cancel?: AbortSignal | undefined;
  /** The priority lane of the request's new judgments (priority.ts); default normal. */
  priority?: Lane | undefined;
  /**
   * Its tenant (REWARD_KEYS): the fair-queue flow and lane cap its new judgments are admitted and run in,
   * the budget they are gated by and charged to, and its cache scope (CACHE_SCOPE=tenant).
   */
  tenant?: TenantWork | undefined;
  /**
   * Absolute time (epoch ms) until which the client waits for its answer (`/get_reward`: OpenRLHF's
   * timeout, GET_REWARD_HOLD_MS): work that would not fit `deadline` but fits by then is admitted with its
   * deadline moved there, instead of refused (admission.ts `DecideOptions.holdUntil`).
   */
  holdUntil?: number | undefined;
}

export interface JudgeService {
  judge(request: JudgeRequest): Promise<JudgedItem[]>;
  /** `judge` for a single item. */
  judgeOne(item: JudgeItem, scope: Omit<JudgeRequest, 'items'>): Promise<JudgedItem>;
  /** Aborts every judgment in flight (shutdown after the grace period). */
  abortAll(): void;
  readonly cache: JudgmentCache<StoredJudgment>;
}

export interface StoredJudgment {
  id: string;
  judgment: Judgment;
}

/** What the judgment and the comparison services both take (comparison-units.ts extends it too). */
export interface ServingOptions {
  router: Router;
  metrics: Metrics;
  admission: Admission;
  cacheSize: number;
  candidateLimits: { minChars: number; maxChars: number };
  /** REASONING_FORMAT: where a candidate's reasoning trace ends (default `auto`). */
  reasoningFormat?: ReasoningFormat | undefined;
  transcripts?: TranscriptSink | undefined;
  onInternalError?: ((err: unknown) => void) | undefined;
  /** Called on every refusal (the app rate-limits the log line, one for judgments and comparisons). */
  onRefusal?: ((refusal: Refusal) => void) | undefined;
}

export interface JudgeServiceOptions extends ServingOptions {
  /** Epoch-ms clock (default Date.now); the same one as the request deadlines. */
  now?: (() => number) | undefined;
  idempotency?: IdempotencyOptions | undefined;
  /** REDIS_URL: the cache and single-flight shared with other workers and replicas. */
  shared?: SharedJudgments | undefined;
  /** REDIS_URL: idempotency records shared with other workers and replicas. */
  sharedRecords?: IdempotencyStore | undefined;
  /** A flight lost its last waiter and was aborted (the cancel registry counts the ones a cancel caused). */
  onAbandoned?: (() => void) | undefined;
  /** Told about every judgment computed here (not cache hits): canaries, audits, drift (`integrity.ts`). */
  onComputed?: ((item: JudgeItem, stored: StoredJudgment) => void) | undefined;
}

const DEFAULT_IDEMPOTENCY = { windowMs: 600_000, lingerMs: 30_000, maxEntries: 65_536, maxItems: 10_000 };

function isCacheable(stored: StoredJudgment): boolean {
  return stored.judgment.status === 'ok' || stored.judgment.status === 'rejected_input';
}

/**
 * What the shared tier (Redis) stores: judged outcomes only. A rejected input costs no call to decide again,
 * and deciding it here always applies this replica's own preparation rules (a rolling deploy's replicas may
 * differ); its key carries those settings too (src/judge/key.ts).
 */
const isSharedCacheable = (stored: StoredJudgment): boolean => stored.judgment.status === 'ok';

type SyntheticCode =
  | 'RW_JUDGE_TIMEOUT'
  | 'RW_CLIENT_ABORTED'
  | 'RW_SHUTTING_DOWN'
  | 'RW_OVERLOADED'
  | 'RW_BUDGET_EXHAUSTED'
  | 'RW_INTERNAL';
type SyntheticStatus = 'timeout' | 'judge_error' | 'overloaded';

/** Why a request got no judgment for an item. Only the last case is a bug worth logging. */
function classify(
  err: unknown,
  request: AbortSignal,
): { status: SyntheticStatus; code: SyntheticCode; message: string; internal: boolean } {
  if (request.reason instanceof DeadlineReached) {
    return {
      status: 'timeout',
      code: 'RW_JUDGE_TIMEOUT',
      message: 'request deadline reached before the judgment finished',
      internal: false,
    };
  }
  if (request.aborted) {
    return {
      status: 'judge_error',
      code: 'RW_CLIENT_ABORTED',
      message: 'aborted by the caller',
      internal: false,
    };
  }
  if (err instanceof RewardError && err.code === 'RW_JUDGE_TIMEOUT') {
    // Waited for another replica's judgment (a shared lease) until the deadline.
    return { status: 'timeout', code: 'RW_JUDGE_TIMEOUT', message: err.message, internal: false };
  }
  if (err instanceof RewardError && (err.code === 'RW_OVERLOADED' || err.code === 'RW_BUDGET_EXHAUSTED')) {
    // Taken over from another process that gave it up, when this one had no room (or budget) for it.
    return { status: 'overloaded', code: err.code, message: err.message, internal: false };
  }
  if (err instanceof RewardError && err.code === 'RW_SHUTTING_DOWN') {
    // The flight itself was aborted while waiting for a slot: shutdown past its grace period.
    return { status: 'judge_error', code: 'RW_SHUTTING_DOWN', message: err.message, internal: false };
  }
  return { status: 'judge_error', code: 'RW_INTERNAL', message: 'internal error', internal: true };
}

const SYNTHETIC_REASONS: Record<SyntheticStatus, { reason: string; stopReason: string }> = {
  timeout: { reason: 'deadline', stopReason: 'deadline' },
  judge_error: { reason: 'internal error', stopReason: 'node_failed' },
  overloaded: { reason: 'overloaded', stopReason: 'not_admitted' },
};

/** A judgment that never ran: the deadline came first, there was no room for it, or something broke. */
function syntheticFailure(
  graph: CompiledGraph,
  status: SyntheticStatus,
  code: SyntheticCode,
  message: string,
  latencyMs: number,
): Judgment {
  return failedJudgment(graph, { status, code, message, ...SYNTHETIC_REASONS[status] }, { latencyMs });
}

/** The shapes of the flights this request starts that no other process is computing (its new work). */
function newWork(
  items: readonly JudgeItem[],
  starters: ReadonlyMap<string, number>,
  elsewhere: SharedLookup | undefined,
): WorkShape[] {
  const shapes: WorkShape[] = [];
  for (const [key, i] of starters) {
    const item = items[i];
    if (item !== undefined && elsewhere?.running.has(key) !== true) shapes.push(shapeOf(item));
  }
  return shapes;
}

/** The request's unanswered items as `cancelled` (cancelled before any of its judgments started). */
function cancelledRest(
  items: readonly JudgeItem[],
  results: Array<JudgedItem | undefined>,
  startedAt: number,
): Array<JudgedItem | undefined> {
  for (const [i, item] of items.entries()) {
    results[i] ??= {
      judgmentId: null,
      judgment: cancelledJudgment(item.graph.graph, Date.now() - startedAt),
      cached: false,
    };
  }
  return results;
}

/** One pass over a request: answered, or held before admission (`newJudgments`: what it would start). */
type Once =
  { kind: 'done'; results: JudgedItem[] } | { kind: 'held'; place: HoldPlace; newJudgments: number };

/**
 * The request, decided whole: admitted at once, or held while the fleet's capacity is being measured
 * (admission.ts `hold`) and then tried again from the start by `once` (the cache and the flights may have
 * moved meanwhile; the admitted request's backlog is reserved for it until it admits its judgments).
 */
async function judgeHolding(
  request: JudgeRequest,
  once: (request: JudgeRequest, admitted: HoldPlace | undefined, noHold?: boolean) => Promise<Once>,
  refuse: (refusal: Refusal, n: number) => RewardError,
): Promise<JudgedItem[]> {
  let place: HoldPlace | undefined;
  try {
    for (;;) {
      const outcome = await once(request, place);
      if (outcome.kind === 'done') return outcome.results;
      place = outcome.place;
      const verdict = await place.verdict;
      if (verdict.kind === 'refuse') throw refuse(verdict.refusal, outcome.newJudgments);
      if (verdict.kind === 'gone') {
        place.leave();
        place = undefined;
        // Cancelled, its client gone, or its deadline passed while held: decided now without holding
        // (a cancelled request answers `cancelled`, an expired one is refused).
        const last = await once(request, undefined, true);
        return last.kind === 'done' ? last.results : [];
      }
      request = { ...request, deadline: verdict.deadline };
    }
  } finally {
    place?.leave();
  }
}

/**
 * A request's new judgments admitted whole (admission.ts), in its lane and with its hold window: held while
 * the capacity is measured when `mayHold`, else decided now (`deadline` absolute, `now` epoch ms).
 */
function admitRequest(
  admission: Admission,
  shapes: readonly WorkShape[],
  request: JudgeRequest,
  deadline: number,
  now: number,
  mayHold: boolean,
  reporting: RefusalReporting,
): AdmitOrHold {
  const lane = request.priority ?? 'normal';
  const hint = 'split it into smaller requests';
  const options = { holdUntil: request.holdUntil, work: request.tenant };
  if (mayHold)
    return admitOrHold(
      admission,
      shapes,
      deadline,
      request.signal ?? NEVER,
      'judgments',
      hint,
      reporting,
      lane,
      options,
    );
  return {
    kind: 'admitted',
    ...admitWhole(admission, shapes, deadline - now, 'judgments', hint, reporting, lane, options),
  };
}

/** Every slot is filled by construction; a hole would be a bug, answered as an internal failure. */
function complete(items: readonly JudgeItem[], results: Array<JudgedItem | undefined>): JudgedItem[] {
  return items.map(
    (item, i) =>
      results[i] ?? {
        judgmentId: null,
        judgment: syntheticFailure(item.graph.graph, 'judge_error', 'RW_INTERNAL', 'internal error', 0),
        cached: false,
      },
  );
}

/** A cache-lookup counter (`reward_cache_lookups_total{result}`). */
type LookupCounter = ReturnType<Metrics['cacheLookups']['labels']>;

/** The service's state, built once by `createJudgeService` and shared by the functions below. */
interface Service {
  options: JudgeServiceOptions;
  cache: JudgmentCache<StoredJudgment>;
  observer: ReturnType<typeof callObserver>;
  lookups: Record<'hit' | 'coalesced' | 'miss' | 'sharedHit' | 'sharedCoalesced', LookupCounter>;
  /** Judgments another process computed: the items that receive them are `cached` here. */
  fromElsewhere: WeakSet<StoredJudgment>;
  /** Latest deadline of the requests waiting for each flight in progress (extended by joiners). */
  deadlines: FlightDeadlines;
  /** Who pays for each flight in progress, and whose flow its calls wait in (flight-payers.ts). */
  payers: FlightPayers;
  settings: ReturnType<typeof keySettingsOf>;
  idem: IdempotencyOptions;
  now: () => number;
  records: IdempotencyRecords;
  refuse: (refusal: Refusal, n: number) => RewardError;
  sharedFlights: SharedFlights | undefined;
}

/**
 * One flight: through the shared tier when there is one (`shared-flights.ts`), else computed here.
 * `miss` counts the judgments this process computes.
 */
async function compute(
  svc: Service,
  key: string,
  item: JudgeItem,
  signal: AbortSignal,
  deadline: FlightDeadline,
  admitted: Ticket | undefined,
  owner: Pick<JudgeRequest, 'requestId' | 'tenant'>,
): Promise<StoredJudgment> {
  const here = (ticket: Ticket): Promise<StoredJudgment> => {
    svc.lookups.miss.inc();
    return computeHere(svc, key, item, signal, deadline, ticket, owner.requestId);
  };
  const { sharedFlights } = svc;
  if (sharedFlights === undefined)
    return here(admitted ?? svc.options.admission.admit(shapeOf(item), 'normal', owner.tenant));
  const flight = await sharedFlights.run(key, shapeOf(item), signal, deadline, admitted, here, owner.tenant);
  if (flight.elsewhere) svc.fromElsewhere.add(flight.stored);
  return flight.stored;
}

/** Wait for a run slot, run, count, write the transcript. */
function computeHere(
  svc: Service,
  key: string,
  item: JudgeItem,
  signal: AbortSignal,
  deadline: FlightDeadline,
  ticket: Ticket,
  requestId: string | undefined,
): Promise<StoredJudgment> {
  const { router, metrics, admission, transcripts } = svc.options;
  return admission.run(
    ticket,
    signal,
    () =>
      runJudgment(item.graph.graph, item.input, {
        router,
        // Read again by the engine whenever it needs it: a joining retry moves it later.
        get deadline() {
          return deadline.at;
        },
        signal,
        // Its receivers are charged for its calls, which wait in the flow of a tenant still waiting for it.
        observer: svc.payers.observer(key, svc.observer),
        get flow() {
          return svc.payers.flow(key, ticket.flow);
        },
        limits: svc.options.candidateLimits,
        reasoningFormat: svc.options.reasoningFormat,
        urgent: ticket.lane === 'high',
        prepared: item.prepared,
      }),
    async (judgment) => {
      metrics.observeJudgment(item.graph.label, judgment);
      const stored: StoredJudgment = { id: randomUUID(), judgment };
      svc.options.onComputed?.(item, stored);
      if (transcripts !== undefined)
        await transcripts.write(
          toTranscriptRecord(stored.id, judgment, item.input, item.graph.label, router.name, requestId),
        );
      return stored;
    },
  );
}

/** The request's idempotency record: answered (completed judgments only, never failures). */
function remember(svc: Service, id: string, items: string, results: readonly JudgedItem[]): void {
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

/**
 * What is judged (src/judge/candidate.ts), at the one door every route's items come through: each item's
 * texts normalised and its candidate's final answer extracted before anything is keyed, cached or judged.
 */
async function judge(svc: Service, request: JudgeRequest): Promise<JudgedItem[]> {
  const { reasoningFormat, candidateLimits: limits, metrics } = svc.options;
  const prepared = request.items.map((item) => prepareInput(item.input, { reasoningFormat, limits }));
  const judged = await judgeHolding(
    {
      ...request,
      items: request.items.map((item, i) => {
        const p = prepared[i];
        return p === undefined
          ? item
          : { graph: item.graph, input: p.input, prepared: { rejection: p.rejection } };
      }),
    },
    (r, admitted, noHold) => judgeOnce(svc, r, admitted, noHold),
    svc.refuse,
  );
  return judged.map((j, i) => {
    const p = prepared[i];
    if (p?.rejection !== undefined && j.judgment.status === 'rejected_input')
      metrics.rejectedInputs.labels(p.rejection).inc();
    return { ...j, reasoningChars: p?.reasoningChars ?? 0 };
  });
}

/** A request's items keyed and looked up: its idempotency record, the shared tier, the LRU. */
interface Looked {
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
function recall(svc: Service, request: JudgeRequest): Recalling {
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
function sortItems(
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
function countLookups(svc: Service, looked: Looked, itemCount: number): void {
  const { hits, sharedHits, starters } = looked;
  if (hits > sharedHits) svc.lookups.hit.inc(hits - sharedHits);
  if (sharedHits > 0) svc.lookups.sharedHit.inc(sharedHits);
  const joined = itemCount - hits - starters.size;
  if (joined > 0) svc.lookups.coalesced.inc(joined);
}

/** The request answered: every slot filled, and remembered under its idempotency id (if it has one). */
function answer(svc: Service, request: JudgeRequest, looked: Looked): Once {
  const answered = complete(request.items, looked.results);
  const id = request.idempotencyKey;
  if (id !== undefined) remember(svc, id, looked.itemsKey, answered);
  return { kind: 'done', results: answered };
}

/**
 * One pass over a request (`judgeHolding`): looked up, admitted whole (or held, or refused), then its
 * flights started or joined and waited for until its deadline.
 */
async function judgeOnce(
  svc: Service,
  request: JudgeRequest,
  admitted: HoldPlace | undefined,
  noHold = false,
): Promise<Once> {
  let { deadline } = request;
  const { items } = request;
  const startedAt = Date.now();
  const recalled = recall(svc, request);
  let { record } = recalled;
  let elsewhere: SharedLookup | undefined;
  // The only await before the flights start (none at all without a shared tier).
  if (recalled.pending !== undefined) [record, elsewhere] = await recalled.pending;
  const looked = sortItems(svc, request, { ...recalled, record }, elsewhere);
  // Judgments another process is computing (a retry that landed here, a duplicate rollout) are not new
  // work: this process waits for them through their leases, holding no run slot, so they are not admitted
  // (nor refused) here. Only keys nobody computes count against this server's capacity.
  const shapes = newWork(items, looked.starters, looked.elsewhere);
  // Cancelled before it started (a tombstoned id or tag, or a cancel during the shared lookup): nothing
  // starts, the unanswered items are `cancelled`.
  if (isCancelled(request.cancel))
    return { kind: 'done', results: complete(items, cancelledRest(items, looked.results, startedAt)) };
  // Whole request or nothing: decided before any judgment starts (nothing awaits in between). A request
  // admitted while held has its calls reserved already.
  if (admitted === undefined) {
    const { metrics, onRefusal, admission } = svc.options;
    const reporting = { metrics, onRefusal };
    const decided = admitRequest(admission, shapes, request, deadline, svc.now(), !noHold, reporting);
    if (decided.kind === 'held') return { kind: 'held', place: decided.place, newJudgments: shapes.length };
    if (decided.deadline !== undefined) deadline = decided.deadline;
  }
  countLookups(svc, looked, items.length);
  if (looked.hits === items.length) return answer(svc, request, looked);

  // A client that gave an idempotency id may retry: its flights are held a little for the retry to join.
  const id = request.idempotencyKey;
  const scope = createRequestScope({
    deadline,
    signal: request.signal,
    fanOut: items.length,
    cancel: request.cancel,
    holdMs: () => (id === undefined ? 0 : Math.min(svc.idem.lingerMs, deadline - Date.now())),
  });
  try {
    await Promise.all(startFlights(svc, request, looked, deadline, scope.signal, startedAt));
  } finally {
    scope.end();
  }
  return answer(svc, request, looked);
}

/**
 * Starts the flights the request owns and joins the others, each settling its item's slot in
 * `looked.results` when it lands (`deadline` absolute, `startedAt` epoch ms).
 */
function startFlights(
  svc: Service,
  request: JudgeRequest,
  looked: Looked,
  deadline: number,
  signal: AbortSignal,
  startedAt: number,
): Promise<void>[] {
  const { cache, deadlines } = svc;
  const { results, starters, elsewhere } = looked;
  const lane = request.priority ?? 'normal';
  const waits: Promise<void>[] = [];
  for (const [i, item] of request.items.entries()) {
    if (results[i] !== undefined) continue;
    const key = looked.keys[i] ?? '';
    const own = starters.get(key) === i;
    let flight: Promise<StoredJudgment> | undefined;
    if (own) {
      // Waited for elsewhere: not in this server's backlog until it is computed here (`compute` admits it
      // then, if the holder gives it up).
      const ticket =
        elsewhere?.running.has(key) === true
          ? undefined
          : svc.options.admission.admit(shapeOf(item), lane, request.tenant);
      svc.payers.enter(key, request.tenant, signal, true);
      flight = cache.run(
        key,
        (s) =>
          deadlines
            .run(key, deadline, (d) => compute(svc, key, item, s, d, ticket, request))
            .finally(() => svc.payers.settle(key)),
        signal,
      );
    } else {
      flight = cache.join(key, signal);
      if (flight !== undefined) svc.payers.enter(key, request.tenant, signal, false);
      // The flight now also answers this request: it may run until this request's deadline.
      if (flight !== undefined) deadlines.extend(key, deadline);
    }
    // No flight to join (e.g. the request was already aborted and let go of it): `complete` answers the
    // empty slot as a failure, never a reward.
    if (flight === undefined) continue;
    waits.push(
      flight.then(
        (stored) => {
          results[i] = {
            judgmentId: stored.id,
            judgment: stored.judgment,
            cached: !own || svc.fromElsewhere.has(stored),
          };
        },
        (err: unknown) => {
          results[i] = failedItem(svc, item, err, signal, startedAt);
        },
      ),
    );
  }
  return waits;
}

/** A flight that failed for the request: `cancelled`, or a synthetic failure (an internal one is reported). */
function failedItem(
  svc: Service,
  item: JudgeItem,
  err: unknown,
  signal: AbortSignal,
  startedAt: number,
): JudgedItem {
  if (isCancelled(signal))
    return {
      judgmentId: null,
      judgment: cancelledJudgment(item.graph.graph, Date.now() - startedAt),
      cached: false,
    };
  const failure = classify(err, signal);
  if (failure.internal) svc.options.onInternalError?.(err);
  return {
    judgmentId: null,
    judgment: syntheticFailure(
      item.graph.graph,
      failure.status,
      failure.code,
      failure.message,
      Date.now() - startedAt,
    ),
    cached: false,
  };
}

/**
 * The judging service: coalescing, whole-request admission, deadlines, idempotent retries, metrics and
 * transcripts (see the file's header). Never rejects for a judge failure (the item carries it), only with
 * an overload `RewardError` (RW_OVERLOADED / RW_BUDGET_EXHAUSTED) when a request's new judgments are refused.
 */
export function createJudgeService(options: JudgeServiceOptions): JudgeService {
  const { metrics, admission } = options;
  const cache = new JudgmentCache<StoredJudgment>({
    maxEntries: options.cacheSize,
    isCacheable,
    onAbandon: options.onAbandoned,
  });
  const idem = options.idempotency ?? DEFAULT_IDEMPOTENCY;
  const now = options.now ?? Date.now;
  const refuse = (refusal: Refusal, n: number): RewardError =>
    overloadError(refusal, n, 'judgments', { metrics, onRefusal: options.onRefusal });
  const label = (result: string): LookupCounter => metrics.cacheLookups.labels(result);
  const lookups = {
    hit: label('hit'),
    coalesced: label('coalesced'),
    miss: label('miss'),
    sharedHit: label('shared_hit'),
    sharedCoalesced: label('shared_coalesced'),
  };
  const svc: Service = {
    options,
    cache,
    observer: callObserver(metrics, admission),
    lookups,
    fromElsewhere: new WeakSet<StoredJudgment>(),
    deadlines: createFlightDeadlines(),
    payers: createFlightPayers(),
    // The settings inputs are prepared with are the ones they are keyed with.
    settings: keySettingsOf({ reasoningFormat: options.reasoningFormat, limits: options.candidateLimits }),
    idem,
    now,
    records: createIdempotencyRecords({
      ...idem,
      shared: options.sharedRecords,
      now,
      onUndecodable: () => metrics.sharedStateErrors.labels('decode').inc(),
    }),
    refuse,
    sharedFlights:
      options.shared === undefined
        ? undefined
        : createSharedFlights({
            shared: options.shared,
            admission,
            now,
            refuse: (refusal) => refuse(refusal, 1),
            isCacheable: isSharedCacheable,
            onLanded: (waited) => (waited ? lookups.sharedCoalesced : lookups.sharedHit).inc(),
          }),
  };
  return {
    judge: (request) => judge(svc, request),
    judgeOne: async (item, scope) => {
      const [judged] = await judge(svc, { ...scope, items: [item] });
      if (judged === undefined) throw new Error('judge service returned no item');
      return judged;
    },
    cache,
    // A RewardError, so the judgments it cuts report RW_SHUTTING_DOWN rather than a caller's abort.
    abortAll: () => cache.abortAll(new RewardError('RW_SHUTTING_DOWN', 'server shutting down')),
  };
}
