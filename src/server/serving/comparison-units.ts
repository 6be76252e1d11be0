/**
 * The units comparative judging runs (comparing.ts): one pair or one pick, each a flight in the comparison
 * LRU + single-flight under the latest deadline of its waiters (`flight-deadlines.ts`), admitted into the
 * run slots judgments share, counted and transcribed when computed. Also what a request that lost its
 * flight gets instead (`missingPair`).
 */
import { randomUUID } from 'node:crypto';

import { RewardError } from '../../errors.js';
import { JudgmentCache } from '../../judge/cache.js';
import type { PreparedCandidate } from '../../judge/candidate.js';
import {
  comparePair,
  type ComparativeOptions,
  pickBest,
  type PairInput,
  type PairJudgment,
  type PickInput,
  type PickJudgment,
} from '../../judge/compare.js';
import { keySettingsOf, type KeySettings } from '../../judge/key.js';
import type { Router } from '../../judge/types.js';
import { COMPARATIVE_PROMPT_VERSION } from '../../roles/index.js';
import { cancelledJudgment, isCancelled } from '../controls/cancel.js';
import { admitWhole, callObserver, type Ticket, type WorkShape } from '../admission/admission.js';
import type { Lane } from '../admission/priority.js';
import { cappedLane, type TenantWork } from '../admission/fair-shares.js';
import type { ServingOptions } from './judge-types.js';
import { withSpend } from './tenant-work.js';
import { createFlightDeadlines, type FlightDeadline } from './flight-deadlines.js';
import { DeadlineReached } from './request-scope.js';
import { toComparisonTranscriptRecord } from '../observe/transcripts.js';

/** A computed unit as the comparison cache holds it. */
export type Stored =
  { id: string; kind: 'pair'; judgment: PairJudgment } | { id: string; kind: 'pick'; judgment: PickJudgment };

export interface RequestScope {
  /** Absolute deadline, epoch ms; unfinished comparisons come back `timeout`. */
  deadline: number;
  /** Aborts when the client goes away: the request lets go of its flights. */
  signal?: AbortSignal | undefined;
  requestId?: string | undefined;
  /** Aborts when POST /v1/cancel selects the request (`cancel.ts`): its flights are let go at once. */
  cancel?: AbortSignal | undefined;
  /** The priority lane of its new comparisons (priority.ts); default normal. */
  priority?: Lane | undefined;
  /** Its tenant (REWARD_KEYS): fair-queue flow, lane cap, budget and spend, cache scope. */
  tenant?: TenantWork | undefined;
}

export interface ComparisonServiceOptions extends ServingOptions {
  /** A flight lost its last waiter and was aborted (the cancel registry counts the ones a cancel caused). */
  onAbandoned?: (() => void) | undefined;
}

/** Where a unit's calls run: its lane, its tenant's flow, and the tenant (spend); a ticket is one. */
type Seat = Pick<Ticket, 'lane' | 'flow' | 'work'>;

/** Computes one unit (`Stored`) under its flight's signal and deadline for `request`. */
type Compute<I, X> = (
  input: I,
  extra: X,
  signal: AbortSignal,
  deadline: FlightDeadline,
  request: RequestScope,
  known: ReadonlyMap<string, PreparedCandidate>,
) => Promise<Stored>;

/** The comparison cache, its lookups counted, and the units it runs (one set per service). */
export interface ComparisonUnits {
  router: Router;
  cache: JudgmentCache<Stored>;
  /** `reward_comparison_cache_lookups_total` by result. */
  lookups: Record<'hit' | 'coalesced' | 'miss', { inc(): void }>;
  /** The settings candidates are prepared and keyed with. */
  settings: KeySettings;
  /** Admits a request's new units whole, or throws its refusal (RW_OVERLOADED and kin) before any starts. */
  admit(shapes: readonly WorkShape[], request: RequestScope): void;
  /**
   * The flight of `key` for a request with deadline `at`: started here (`own`) under `at`, or joined, which
   * moves its deadline to `at` when that is later; undefined when there is no flight to join.
   */
  fly(
    key: string,
    own: boolean,
    at: number,
    signal: AbortSignal,
    compute: (flightSignal: AbortSignal, deadline: FlightDeadline) => Promise<Stored>,
  ): Promise<Stored> | undefined;
  /** One pair with this many judges per order, in a run slot. */
  computePair: Compute<PairInput, number>;
  /** One pick; `decided` (fewer than two real candidates) runs without a call and takes no run slot. */
  computePick: Compute<PickInput, boolean>;
  onInternalError?: ((err: unknown) => void) | undefined;
}

/**
 * A comparison as admission sees it: both orders of every judge run concurrently (2 × judges calls, one on
 * the critical path); its measured cost is tracked per number of judges.
 */
export const pairShape = (judges: number): WorkShape => ({
  hash: `comparison/${judges}`,
  llmCallsPerJudgment: 2 * judges,
  criticalPathCalls: 1,
});
/** A pick as admission sees it: one call. */
export const PICK_SHAPE: WorkShape = { hash: 'pick', llmCallsPerJudgment: 1, criticalPathCalls: 1 };

const isCacheable = (s: Stored): boolean =>
  s.judgment.status === 'ok' || s.judgment.status === 'rejected_input';

/**
 * A comparison that never ran for this request: the deadline came first, the client left, shutdown, or a
 * bug (`internal`: the caller logs `err`).
 */
export function missingPair(
  signal: AbortSignal,
  err: unknown,
): { judgment: PairJudgment; internal: boolean } {
  if (isCancelled(signal)) {
    const cancelled = cancelledJudgment({ name: 'comparison', hash: '' }, 0);
    return {
      internal: false,
      judgment: {
        status: 'judge_error',
        preference: null,
        orders: { ab: null, ba: null },
        positionBias: false,
        votes: [],
        reason: cancelled.reason,
        error: cancelled.error,
        usage: cancelled.usage,
        latencyMs: 0,
        promptVersion: COMPARATIVE_PROMPT_VERSION,
      },
    };
  }
  const deadline = signal.reason instanceof DeadlineReached;
  const aborted = !deadline && signal.aborted;
  // The flight itself was aborted while waiting for a slot: shutdown past its grace period.
  const shutdown = !deadline && !aborted && err instanceof RewardError && err.code === 'RW_SHUTTING_DOWN';
  const code = deadline
    ? 'RW_JUDGE_TIMEOUT'
    : aborted
      ? 'RW_CLIENT_ABORTED'
      : shutdown
        ? 'RW_SHUTTING_DOWN'
        : 'RW_INTERNAL';
  const message = deadline
    ? 'request deadline reached before the comparison finished'
    : aborted
      ? 'aborted by the caller'
      : shutdown
        ? 'server shutting down'
        : 'internal error';
  return {
    internal: !deadline && !aborted && !shutdown,
    judgment: {
      status: deadline ? 'timeout' : 'judge_error',
      preference: null,
      orders: { ab: null, ba: null },
      positionBias: false,
      votes: [],
      reason: deadline ? 'deadline' : aborted ? 'aborted' : shutdown ? 'shutting down' : 'internal error',
      error: { code, message },
      usage: { calls: 0, promptTokens: 0, completionTokens: 0, cachedPromptTokens: 0 },
      latencyMs: 0,
      promptVersion: COMPARATIVE_PROMPT_VERSION,
    },
  };
}

/** How a pair and a pick are computed: admitted, run, counted and transcribed. */
function createComputes(
  options: ComparisonServiceOptions,
): Pick<ComparisonUnits, 'computePair' | 'computePick'> {
  const { router, metrics, admission, transcripts } = options;
  const observer = callObserver(metrics, admission);

  /**
   * A unit's options: its flight's signal and deadline (read through the flight as joiners move it: never
   * spread these options), the seat (lane, tenant flow and spend), the candidates' known preparations.
   */
  const unitOptions = (
    signal: AbortSignal,
    deadline: FlightDeadline,
    seat: Seat,
    known: ReadonlyMap<string, PreparedCandidate>,
    judges?: number,
  ): ComparativeOptions & { judges?: number | undefined } => ({
    router,
    get deadline() {
      return deadline.at;
    },
    signal,
    observer: withSpend(observer, seat.work),
    flow: seat.flow,
    judges,
    limits: options.candidateLimits,
    reasoningFormat: options.reasoningFormat,
    urgent: seat.lane === 'high',
    preparedText: (text) => known.get(text),
  });

  const computePair: ComparisonUnits['computePair'] = (input, judges, signal, deadline, request, known) => {
    const ticket = admission.admit(pairShape(judges), request.priority, request.tenant);
    const { requestId } = request;
    return admission.run(
      ticket,
      signal,
      () => comparePair(input, unitOptions(signal, deadline, ticket, known, judges)),
      async (judgment) => {
        metrics.observeComparison(input.criterion, judgment);
        const stored = { id: randomUUID(), kind: 'pair' as const, judgment };
        if (transcripts !== undefined)
          await transcripts.write(
            toComparisonTranscriptRecord(stored.id, judgment, input, judges, router.name, requestId),
          );
        return stored;
      },
    );
  };

  // Fewer than two real candidates: decided without a call (src/judge/compare.ts), no run slot.
  const computePick: ComparisonUnits['computePick'] = (input, decided, signal, deadline, request, known) => {
    const run = (seat: Seat) => (): Promise<PickJudgment> =>
      pickBest(input, unitOptions(signal, deadline, seat, known));
    const store = (judgment: PickJudgment): Stored => ({ id: randomUUID(), kind: 'pick', judgment });
    const { tenant } = request;
    const lane = request.priority ?? 'normal';
    if (decided)
      return run({ lane: cappedLane(lane, tenant), flow: tenant?.flow, work: tenant })().then(store);
    const ticket = admission.admit(PICK_SHAPE, lane, tenant);
    return admission.run(ticket, signal, run(ticket), store);
  };

  return { computePair, computePick };
}

/** The comparison cache (CACHE_SIZE entries), its flights and their deadlines, and the units they run. */
export function createComparisonUnits(options: ComparisonServiceOptions): ComparisonUnits {
  const { metrics, admission } = options;
  const cache = new JudgmentCache<Stored>({
    maxEntries: options.cacheSize,
    isCacheable,
    onAbandon: options.onAbandoned,
  });
  const lookups = {
    hit: metrics.comparisonCacheLookups.labels('hit'),
    coalesced: metrics.comparisonCacheLookups.labels('coalesced'),
    miss: metrics.comparisonCacheLookups.labels('miss'),
  };
  const deadlines = createFlightDeadlines();
  // The settings candidates are prepared with are the ones they are keyed with.
  const settings = keySettingsOf({
    reasoningFormat: options.reasoningFormat,
    limits: options.candidateLimits,
  });

  /** Whole request or nothing, decided before any comparison starts (nothing awaits in between). */
  const admit: ComparisonUnits['admit'] = (shapes, request) => {
    admitWhole(
      admission,
      shapes,
      request.deadline - Date.now(),
      'comparisons',
      'use a cheaper schedule or fewer candidates',
      { metrics, onRefusal: options.onRefusal },
      request.priority,
      { work: request.tenant },
    );
  };

  const fly: ComparisonUnits['fly'] = (key, own, at, signal, compute) => {
    (own ? lookups.miss : lookups.coalesced).inc();
    if (own) return cache.run(key, (s) => deadlines.run(key, at, (d) => compute(s, d)), signal);
    deadlines.extend(key, at);
    return cache.join(key, signal);
  };

  return {
    router: options.router,
    cache,
    lookups,
    settings,
    admit,
    fly,
    ...createComputes(options),
    onInternalError: options.onInternalError,
  };
}
