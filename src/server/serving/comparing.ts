/**
 * The serving side of comparative judging (/v1/rank, /v1/best-of-n, the group adapters): the same coalescing
 * (LRU + single-flight, keyed per canonical pair), admission (run slots shared with judgments, whole request
 * or nothing), per-request deadline, client-disconnect release, metrics and transcripts as judgments get.
 * It never rejects for a judge failure (a failed comparison is a result with a null preference), only for
 * overload or a request too large to admit.
 *
 * Every candidate is prepared once per request, here (`prepare`: src/judge/candidate.ts), and what its
 * preparation decided comes back with the pairs (`rejections`), so routes say why a candidate is not an idea
 * without preparing it again. The schedule is played among a group's real candidates only: a rejected one is
 * no idea to compare (the standings decide its outcomes: it loses to every real one), so a circular or Swiss
 * schedule compares the real ideas with each other rather than with fillers. A flight runs under the latest
 * deadline of the requests waiting for it (`flight-deadlines.ts`).
 */
import { randomUUID } from 'node:crypto';

import { RewardError } from '../../errors.js';
import { JudgmentCache } from '../../judge/cache.js';
import { prepareCandidate, type PreparedCandidate, type ReasoningFormat } from '../../judge/candidate.js';
import {
  canonicalPair,
  comparePair,
  mirrorPair,
  type ComparativeOptions,
  normalizeShared,
  pickBest,
  type PairInput,
  type PairJudgment,
  type PickInput,
  type PickJudgment,
} from '../../judge/compare.js';
import {
  allPairs,
  circularPairs,
  plannedPairs,
  runTournament,
  type PairResult,
  type Pairing,
  type PlayedPair,
  type Schedule,
} from '../../judge/tournament.js';
import type { RejectionReason } from '../../judge/degenerate.js';
import { comparativeKey, keySettingsOf, type KeySettings } from '../../judge/key.js';
import type { Router } from '../../judge/types.js';
import { COMPARATIVE_PROMPT_VERSION } from '../../roles/index.js';
import { cancelledJudgment, isCancelled } from '../controls/cancel.js';
import {
  admitWhole,
  callObserver,
  type Admission,
  type Refusal,
  type Ticket,
  type WorkShape,
} from '../admission/admission.js';
import type { Metrics } from '../observe/metrics.js';
import type { Lane } from '../admission/priority.js';
import { cappedLane, type TenantWork } from '../admission/fair-shares.js';
import { scopedKey, withSpend } from './tenant-work.js';
import { createFlightDeadlines, type FlightDeadline } from './flight-deadlines.js';
import { createRequestScope, DeadlineReached } from './request-scope.js';
import { toComparisonTranscriptRecord, type TranscriptSink } from '../observe/transcripts.js';

type Stored =
  { id: string; kind: 'pair'; judgment: PairJudgment } | { id: string; kind: 'pick'; judgment: PickJudgment };

/** One played comparison as a route sees it (in the request's own candidate order). */
export interface ComparedPair extends PairResult {
  comparisonId: string | null;
  judgment: PairJudgment;
  /** This request did not compute it: an LRU hit, or a flight shared with another pair or request. */
  cached: boolean;
}

export interface PickedBest {
  pickId: string | null;
  judgment: PickJudgment;
  cached: boolean;
  /** Per candidate: why it is not an idea (never shown to the pick), or undefined. */
  rejections: Array<RejectionReason | undefined>;
}

/** One group to rank: its candidates, what they are judged on, the schedule and the judges per order. */
export interface TournamentGroup {
  candidates: readonly string[];
  shared: Omit<PairInput, 'a' | 'b'>;
  schedule: Schedule;
  judges: number;
}

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

/** Where a unit's calls run: its lane, its tenant's flow, and the tenant (spend); a ticket is one. */
type Seat = Pick<Ticket, 'lane' | 'flow' | 'work'>;

/** Candidates as their one preparation left them (src/judge/candidate.ts). */
export interface PreparedGroup<T extends { question: string; groundTruth: string | null }> {
  /** The shared texts, normalised. */
  shared: T;
  /** Each candidate's prepared text (a rejected one as sent: preparing it again rejects it again). */
  candidates: string[];
  /** Per candidate, in order: why it is not an idea, or undefined for one that is judged. */
  rejections: Array<RejectionReason | undefined>;
  /** Each prepared text's outcome, so that the comparisons of these candidates do not prepare them again. */
  known: ReadonlyMap<string, PreparedCandidate>;
}

/** One group's tournament: its played pairs and what its candidates' preparation decided. */
export interface Tournament {
  played: Array<PlayedPair<ComparedPair>>;
  rejections: Array<RejectionReason | undefined>;
}

export interface ComparisonService {
  /**
   * Runs each group's schedule (all groups concurrently, admitted together); every pair comes back, failed
   * ones with a null preference. Rejects only when the request cannot be admitted.
   */
  tournaments(groups: readonly TournamentGroup[], scope: RequestScope): Promise<Tournament[]>;
  /** One "pick the best" call over all candidates (coalesced and cached like a pair). */
  pick(input: PickInput, scope: RequestScope): Promise<PickedBest>;
  /**
   * The one preparation of a request's candidates (counted in `reward_rejected_inputs_total`); what
   * `tournaments` and `pick` do first, and what a request with nothing to compare does alone.
   */
  prepare<T extends { question: string; groundTruth: string | null }>(
    shared: T,
    candidates: readonly string[],
  ): PreparedGroup<T>;
  abortAll(): void;
}

export interface ComparisonServiceOptions {
  router: Router;
  metrics: Metrics;
  admission: Admission;
  cacheSize: number;
  candidateLimits: { minChars: number; maxChars: number };
  /** REASONING_FORMAT: where a candidate's reasoning trace ends (default `auto`). */
  reasoningFormat?: ReasoningFormat | undefined;
  transcripts?: TranscriptSink | undefined;
  onInternalError?: ((err: unknown) => void) | undefined;
  /** Called on every refusal (the app rate-limits the log line, shared with judgments). */
  onRefusal?: ((refusal: Refusal) => void) | undefined;
  /** A flight lost its last waiter and was aborted (the cancel registry counts the ones a cancel caused). */
  onAbandoned?: (() => void) | undefined;
}

/**
 * A comparison as admission sees it: both orders of every judge run concurrently (2 × judges calls, one on
 * the critical path); its measured cost is tracked per number of judges.
 */
const pairShape = (judges: number): WorkShape => ({
  hash: `comparison/${judges}`,
  llmCallsPerJudgment: 2 * judges,
  criticalPathCalls: 1,
});
const PICK_SHAPE: WorkShape = { hash: 'pick', llmCallsPerJudgment: 1, criticalPathCalls: 1 };

const isCacheable = (s: Stored): boolean =>
  s.judgment.status === 'ok' || s.judgment.status === 'rejected_input';

/** A comparison that never ran for this request: the deadline came first, the client left, shutdown, or a bug. */
function missingPair(signal: AbortSignal, err: unknown): { judgment: PairJudgment; internal: boolean } {
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

/** Per candidate, the outcome of its one preparation (pure: counting is the service's). */
function prepareGroup<T extends { question: string; groundTruth: string | null }>(
  shared: T,
  candidates: readonly string[],
  settings: KeySettings,
): PreparedGroup<T> {
  const normal = normalizeShared(shared);
  const known = new Map<string, PreparedCandidate>();
  const rejections: Array<RejectionReason | undefined> = [];
  const texts = candidates.map((c) => {
    const p = prepareCandidate(c, {
      reasoningFormat: settings.reasoningFormat,
      limits: settings.limits,
      question: normal.question,
    });
    rejections.push(p.rejection);
    known.set(p.candidate, p);
    return p.candidate;
  });
  return { shared: normal, candidates: texts, rejections, known };
}

/**
 * A group as it is played: its request, its candidates prepared, and the indices of its real ones (the
 * schedule is played among them: a rejected candidate is no idea to compare, `standings` decides its pairs).
 */
type PlayGroup = TournamentGroup & PreparedGroup<TournamentGroup['shared']> & { real: number[] };

/** A pair as it is keyed and played: canonical input, whether it was swapped, its key. */
interface KeyedPair {
  input: PairInput;
  swapped: boolean;
  key: string;
}

/** A schedule's pairing of the real candidates (0-based among them) as the group's own indices. */
const inGroup = (group: PlayGroup, p: Pairing): Pairing => ({
  i: group.real[p.i] ?? -1,
  j: group.real[p.j] ?? -1,
});

/**
 * Each pair's canonical input and key (within the tenant's cache scope, if any), hashed once: fixed schedules
 * key a pair when planning and playing.
 */
function pairKeys(
  group: PlayGroup,
  router: Router,
  settings: KeySettings,
  cacheScope: string | undefined,
): (p: Pairing) => KeyedPair {
  const g = group.candidates.length;
  const memo = new Map<number, KeyedPair>();
  return (p) => {
    const at = p.i * g + p.j;
    let k = memo.get(at);
    if (k === undefined) {
      const c = canonicalPair({
        ...group.shared,
        a: group.candidates[p.i] ?? '',
        b: group.candidates[p.j] ?? '',
      });
      const unit = { kind: 'pair' as const, input: c.input, judges: group.judges };
      k = { ...c, key: scopedKey(comparativeKey(router, unit, settings), cacheScope) };
      memo.set(at, k);
    }
    return k;
  };
}

/**
 * What a request's tournaments would start, for admission: fixed schedules, exactly their new comparisons;
 * Swiss, its most pairs (each among the group's real candidates).
 */
function newComparisons(
  groups: readonly PlayGroup[],
  keyed: ReadonlyArray<(p: Pairing) => KeyedPair>,
  isKnown: (key: string) => boolean,
): { shapes: WorkShape[]; fanOut: number } {
  const shapes: WorkShape[] = [];
  let fanOut = 0;
  const keys = new Set<string>();
  groups.forEach((group, k) => {
    const g = group.real.length;
    fanOut += plannedPairs(group.schedule, g);
    if (group.schedule === 'swiss') {
      for (let n = 0; n < plannedPairs('swiss', g); n++) shapes.push(pairShape(group.judges));
      return;
    }
    for (const p of group.schedule === 'all_pairs' ? allPairs(g) : circularPairs(g)) {
      const pair = keyed[k]?.(inGroup(group, p));
      if (pair === undefined || isKnown(pair.key) || keys.has(pair.key)) continue;
      keys.add(pair.key);
      shapes.push(pairShape(group.judges));
    }
  });
  return { shapes, fanOut };
}

/** A pair's result as the request sees it, in its own candidate order. */
function viewOf(stored: { id: string | null; judgment: PairJudgment }, swapped: boolean, cached: boolean) {
  const judgment = swapped ? mirrorPair(stored.judgment) : stored.judgment;
  return {
    comparisonId: stored.id,
    judgment,
    cached,
    preference: judgment.preference,
    positionBias: judgment.positionBias,
    judged: judgment.status === 'ok',
  };
}

export function createComparisonService(options: ComparisonServiceOptions): ComparisonService {
  const { router, metrics, admission, transcripts } = options;
  const cache = new JudgmentCache<Stored>({
    maxEntries: options.cacheSize,
    isCacheable,
    onAbandon: options.onAbandoned,
  });
  const observer = callObserver(metrics, admission);
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
  const admit = (shapes: readonly WorkShape[], request: RequestScope): void => {
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

  /**
   * The flight of `key` for a request with deadline `at`: started here (`own`) under `at`, or joined, which
   * moves its deadline to `at` when that is later.
   */
  const fly = (
    key: string,
    own: boolean,
    at: number,
    signal: AbortSignal,
    compute: (flightSignal: AbortSignal, deadline: FlightDeadline) => Promise<Stored>,
  ): Promise<Stored> | undefined => {
    (own ? lookups.miss : lookups.coalesced).inc();
    if (own) return cache.run(key, (s) => deadlines.run(key, at, (d) => compute(s, d)), signal);
    deadlines.extend(key, at);
    return cache.join(key, signal);
  };

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

  const computePair = (
    input: PairInput,
    judges: number,
    signal: AbortSignal,
    deadline: FlightDeadline,
    request: RequestScope,
    known: ReadonlyMap<string, PreparedCandidate>,
  ): Promise<Stored> => {
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

  const prepare: ComparisonService['prepare'] = (shared, candidates) => {
    const prepared = prepareGroup(shared, candidates, settings);
    for (const r of prepared.rejections) if (r !== undefined) metrics.rejectedInputs.labels(r).inc();
    return prepared;
  };

  const tournaments: ComparisonService['tournaments'] = async (rawGroups, request) => {
    const groups = rawGroups.map((g): PlayGroup => {
      const prepared = prepare(g.shared, g.candidates);
      const real = prepared.rejections.flatMap((r, k) => (r === undefined ? [k] : []));
      return { ...g, ...prepared, real };
    });
    const played = await playTournaments(groups, request);
    return groups.map((g, k) => ({ played: played[k] ?? [], rejections: g.rejections }));
  };

  const playTournaments = async (
    groups: readonly PlayGroup[],
    request: RequestScope,
  ): Promise<Array<Array<PlayedPair<ComparedPair>>>> => {
    const keyed = groups.map((group) => pairKeys(group, router, settings, request.tenant?.cacheScope));
    const work = newComparisons(groups, keyed, (key) => cache.get(key) !== undefined || cache.has(key));
    admit(work.shapes, request);
    const scope = createRequestScope({
      deadline: request.deadline,
      signal: request.signal,
      fanOut: work.fanOut,
      cancel: request.cancel,
    });
    const startedAt = Date.now();
    const play = async (group: PlayGroup, pair: KeyedPair): Promise<ComparedPair> => {
      const { input, swapped, key } = pair;
      const hit = cache.get(key);
      if (hit !== undefined && hit.kind === 'pair') {
        lookups.hit.inc();
        return viewOf(hit, swapped, true);
      }
      const own = !cache.has(key);
      const flight = fly(key, own, request.deadline, scope.signal, (signal, deadline) =>
        computePair(input, group.judges, signal, deadline, request, group.known),
      );
      try {
        if (flight === undefined) throw new Error('no comparison flight to join');
        const stored = await flight;
        if (stored.kind !== 'pair') throw new Error('comparison key resolved to another kind of unit');
        return viewOf(stored, swapped, !own);
      } catch (err) {
        const missing = missingPair(scope.signal, err);
        if (missing.internal) options.onInternalError?.(err);
        return viewOf(
          { id: null, judgment: { ...missing.judgment, latencyMs: Date.now() - startedAt } },
          swapped,
          false,
        );
      }
    };
    try {
      return await Promise.all(
        groups.map((group, k) => {
          const pairInput = keyed[k];
          if (pairInput === undefined) throw new Error('group without keys');
          return runTournament<ComparedPair>(group.real.length, group.schedule, (p) =>
            play(group, pairInput(inGroup(group, p))),
          ).then((played) => played.map((p) => ({ ...p, ...inGroup(group, p) })));
        }),
      );
    } finally {
      scope.end();
    }
  };

  // Fewer than two real candidates: decided without a call (src/judge/compare.ts), no run slot.
  const computePick = (
    input: PickInput,
    decided: boolean,
    signal: AbortSignal,
    deadline: FlightDeadline,
    request: RequestScope,
    known: ReadonlyMap<string, PreparedCandidate>,
  ): Promise<Stored> => {
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

  const pick: ComparisonService['pick'] = async (rawInput, scopeIn) => {
    const texts = prepare(rawInput, rawInput.candidates);
    const { rejections } = texts;
    const input: PickInput = { ...texts.shared, candidates: texts.candidates };
    const key = scopedKey(
      comparativeKey(router, { kind: 'pick', input }, settings),
      scopeIn.tenant?.cacheScope,
    );
    const hit = cache.get(key);
    if (hit !== undefined && hit.kind === 'pick') {
      lookups.hit.inc();
      return { pickId: hit.id, judgment: hit.judgment, cached: true, rejections };
    }
    const own = !cache.has(key);
    const decided = rejections.filter((r) => r === undefined).length < 2;
    if (own && !decided) admit([PICK_SHAPE], scopeIn);
    const scope = createRequestScope({
      deadline: scopeIn.deadline,
      signal: scopeIn.signal,
      fanOut: 1,
      cancel: scopeIn.cancel,
    });
    const started = Date.now();
    try {
      const flight = fly(key, own, scopeIn.deadline, scope.signal, (signal, deadline) =>
        computePick(input, decided, signal, deadline, scopeIn, texts.known),
      );
      if (flight === undefined) throw new Error('no pick flight to join');
      const stored = await flight;
      if (stored.kind !== 'pick') throw new Error('pick key resolved to another kind of unit');
      return { pickId: stored.id, judgment: stored.judgment, cached: !own, rejections };
    } catch (err) {
      const missing = missingPair(scope.signal, err);
      if (missing.internal) options.onInternalError?.(err);
      const j = missing.judgment;
      return {
        pickId: null,
        cached: false,
        rejections,
        judgment: {
          status: j.status,
          best: null,
          confidence: null,
          reasoning: null,
          reason: j.reason,
          error: j.error,
          usage: j.usage,
          latencyMs: Date.now() - started,
          promptVersion: j.promptVersion,
        },
      };
    } finally {
      scope.end();
    }
  };

  return {
    tournaments,
    pick,
    prepare,
    abortAll: () => cache.abortAll(new RewardError('RW_SHUTTING_DOWN', 'server shutting down')),
  };
}
