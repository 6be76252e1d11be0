/**
 * The serving side of comparative judging (/v1/rank, /v1/best-of-n, the group adapters): the same coalescing
 * (LRU + single-flight, keyed per canonical pair), admission (run slots shared with judgments, whole request
 * or nothing), per-request deadline, client-disconnect release, metrics and transcripts as judgments get.
 * It never rejects for a judge failure (a failed comparison is a result with a null preference), only for
 * overload or a request too large to admit.
 */
import { randomUUID } from 'node:crypto';

import { RewardError } from '../../errors.js';
import { JudgmentCache } from '../../judge/cache.js';
import { prepareCandidate, type PreparedCandidate, type ReasoningFormat } from '../../judge/candidate.js';
import {
  canonicalPair,
  comparativeKey,
  comparePair,
  mirrorPair,
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
import type { TenantWork } from '../admission/fair-shares.js';
import { scopedKey, withSpend } from './tenant-work.js';
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

export interface ComparisonService {
  /**
   * Runs each group's schedule (all groups concurrently, admitted together); every pair comes back, failed
   * ones with a null preference. Rejects only when the request cannot be admitted.
   */
  tournaments(
    groups: readonly TournamentGroup[],
    scope: RequestScope,
  ): Promise<Array<Array<PlayedPair<ComparedPair>>>>;
  /** One "pick the best" call over all candidates (coalesced and cached like a pair). */
  pick(input: PickInput, scope: RequestScope): Promise<PickedBest>;
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

/** A group's shared texts and candidates as judged, with each prepared candidate's outcome by its text. */
interface PreparedTexts<T> {
  shared: T;
  candidates: string[];
  known: ReadonlyMap<string, PreparedCandidate>;
}

/**
 * What is judged (src/judge/candidate.ts), at the one door every ranking route's candidates come through:
 * texts normalised, each candidate's final answer extracted, before anything is keyed or compared. A
 * rejected candidate keeps its text (the comparison rejects it again, with the same reason, and it loses).
 */
function prepareRankTexts<T extends { question: string; groundTruth: string | null }>(
  options: Pick<ComparisonServiceOptions, 'reasoningFormat' | 'candidateLimits'>,
  metrics: Pick<Metrics, 'rejectedInputs'>,
  shared: T,
  candidates: readonly string[],
): PreparedTexts<T> {
  const normal = normalizeShared(shared);
  // Each prepared text's outcome, for the comparisons of these candidates (same question): they take it
  // instead of preparing every candidate again in each of its pairs.
  const known = new Map<string, PreparedCandidate>();
  return {
    shared: normal,
    candidates: candidates.map((c) => {
      const p = prepareCandidate(c, {
        reasoningFormat: options.reasoningFormat,
        limits: options.candidateLimits,
        question: normal.question,
      });
      if (p.rejection !== undefined) metrics.rejectedInputs.labels(p.rejection).inc();
      known.set(p.candidate, p);
      return p.candidate;
    }),
    known,
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

  /** Whole request or nothing, decided before any comparison starts (nothing awaits in between). */
  const admit = (shapes: readonly WorkShape[], scope: RequestScope): void =>
    admitWhole(
      admission,
      shapes,
      scope.deadline - Date.now(),
      'comparisons',
      'use a cheaper schedule or fewer candidates',
      { metrics, onRefusal: options.onRefusal },
      scope.priority,
      scope.tenant,
    );

  const computePair = (
    input: PairInput,
    judges: number,
    signal: AbortSignal,
    deadline: number,
    requestId: string | undefined,
    ticket: Ticket,
    known?: ReadonlyMap<string, PreparedCandidate>,
  ): Promise<Stored> =>
    admission.run(
      ticket,
      signal,
      () =>
        comparePair(input, {
          router,
          deadline,
          signal,
          observer: withSpend(observer, ticket.work),
          flow: ticket.flow,
          judges,
          limits: options.candidateLimits,
          reasoningFormat: options.reasoningFormat,
          urgent: ticket.lane === 'high',
          preparedText: known === undefined ? undefined : (text) => known.get(text),
        }),
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

  const prepareTexts = <T extends { question: string; groundTruth: string | null }>(
    shared: T,
    candidates: readonly string[],
  ): PreparedTexts<T> => prepareRankTexts(options, metrics, shared, candidates);

  const tournaments: ComparisonService['tournaments'] = (rawGroups, request) =>
    playTournaments(
      rawGroups.map((g) => ({ ...g, ...prepareTexts(g.shared, g.candidates) })),
      request,
    );

  const playTournaments = async (
    groups: ReadonlyArray<TournamentGroup & { known: ReadonlyMap<string, PreparedCandidate> }>,
    request: RequestScope,
  ): Promise<Array<Array<PlayedPair<ComparedPair>>>> => {
    // Each pair's canonical input and key, hashed once: fixed schedules key every pair when planning and
    // again when playing it.
    const keyed = groups.map((group) => {
      const g = group.candidates.length;
      const known = new Map<number, { input: PairInput; swapped: boolean; key: string }>();
      return (p: Pairing): { input: PairInput; swapped: boolean; key: string } => {
        const at = p.i * g + p.j;
        let k = known.get(at);
        if (k === undefined) {
          const c = canonicalPair({
            ...group.shared,
            a: group.candidates[p.i] ?? '',
            b: group.candidates[p.j] ?? '',
          });
          const key = comparativeKey(router, { kind: 'pair', input: c.input, judges: group.judges });
          k = { ...c, key: scopedKey(key, request.tenant?.cacheScope) };
          known.set(at, k);
        }
        return k;
      };
    });
    // Fixed schedules: exactly the comparisons this request would start; Swiss: its most pairs.
    const shapes: WorkShape[] = [];
    let fanOut = 0;
    const keys = new Set<string>();
    groups.forEach((group, k) => {
      const g = group.candidates.length;
      fanOut += plannedPairs(group.schedule, g);
      if (group.schedule === 'swiss') {
        for (let n = 0; n < plannedPairs('swiss', g); n++) shapes.push(pairShape(group.judges));
        return;
      }
      for (const p of group.schedule === 'all_pairs' ? allPairs(g) : circularPairs(g)) {
        const key = keyed[k]?.(p).key ?? '';
        if (cache.get(key) === undefined && !cache.has(key) && !keys.has(key)) {
          keys.add(key);
          shapes.push(pairShape(group.judges));
        }
      }
    });
    admit(shapes, request);
    const scope = createRequestScope({
      deadline: request.deadline,
      signal: request.signal,
      fanOut,
      cancel: request.cancel,
    });
    const startedAt = Date.now();
    const play = async (
      group: (typeof groups)[number],
      pairInput: NonNullable<(typeof keyed)[number]>,
      p: Pairing,
    ): Promise<ComparedPair> => {
      const { input, swapped, key } = pairInput(p);
      const view = (stored: { id: string | null; judgment: PairJudgment }, cached: boolean): ComparedPair => {
        const judgment = swapped ? mirrorPair(stored.judgment) : stored.judgment;
        return {
          comparisonId: stored.id,
          judgment,
          cached,
          preference: judgment.preference,
          positionBias: judgment.positionBias,
          judged: judgment.status === 'ok',
        };
      };
      const hit = cache.get(key);
      if (hit !== undefined && hit.kind === 'pair') {
        lookups.hit.inc();
        return view(hit, true);
      }
      const own = !cache.has(key);
      const flight = own
        ? cache.run(
            key,
            (signal) =>
              computePair(
                input,
                group.judges,
                signal,
                request.deadline,
                request.requestId,
                admission.admit(pairShape(group.judges), request.priority, request.tenant),
                group.known,
              ),
            scope.signal,
          )
        : cache.join(key, scope.signal);
      (own ? lookups.miss : lookups.coalesced).inc();
      try {
        if (flight === undefined) throw new Error('no comparison flight to join');
        const stored = await flight;
        if (stored.kind !== 'pair') throw new Error('comparison key resolved to another kind of unit');
        return view(stored, !own);
      } catch (err) {
        const missing = missingPair(scope.signal, err);
        if (missing.internal) options.onInternalError?.(err);
        return view(
          { id: null, judgment: { ...missing.judgment, latencyMs: Date.now() - startedAt } },
          false,
        );
      }
    };
    try {
      return await Promise.all(
        groups.map((group, k) => {
          const pairInput = keyed[k];
          if (pairInput === undefined) throw new Error('group without keys');
          return runTournament<ComparedPair>(group.candidates.length, group.schedule, (p) =>
            play(group, pairInput, p),
          );
        }),
      );
    } finally {
      scope.end();
    }
  };

  const pick: ComparisonService['pick'] = async (rawInput, scopeIn) => {
    const texts = prepareTexts(rawInput, rawInput.candidates);
    const input: PickInput = { ...texts.shared, candidates: texts.candidates };
    const key = scopedKey(comparativeKey(router, { kind: 'pick', input }), scopeIn.tenant?.cacheScope);
    const hit = cache.get(key);
    if (hit !== undefined && hit.kind === 'pick') {
      lookups.hit.inc();
      return { pickId: hit.id, judgment: hit.judgment, cached: true };
    }
    const own = !cache.has(key);
    if (own) admit([PICK_SHAPE], scopeIn);
    const scope = createRequestScope({
      deadline: scopeIn.deadline,
      signal: scopeIn.signal,
      fanOut: 1,
      cancel: scopeIn.cancel,
    });
    const started = Date.now();
    try {
      const flight = own
        ? cache.run(
            key,
            (signal) =>
              admission.run(
                admission.admit(PICK_SHAPE, scopeIn.priority, scopeIn.tenant),
                signal,
                () =>
                  pickBest(input, {
                    router,
                    deadline: scopeIn.deadline,
                    signal,
                    observer: withSpend(observer, scopeIn.tenant),
                    flow: scopeIn.tenant?.flow,
                    limits: options.candidateLimits,
                    reasoningFormat: options.reasoningFormat,
                    urgent: scopeIn.priority === 'high' && scopeIn.tenant?.maxPriority !== 'normal',
                    preparedText: (text) => texts.known.get(text),
                  }),
                (judgment): Stored => ({ id: randomUUID(), kind: 'pick', judgment }),
              ),
            scope.signal,
          )
        : cache.join(key, scope.signal);
      (own ? lookups.miss : lookups.coalesced).inc();
      if (flight === undefined) throw new Error('no pick flight to join');
      const stored = await flight;
      if (stored.kind !== 'pick') throw new Error('pick key resolved to another kind of unit');
      return { pickId: stored.id, judgment: stored.judgment, cached: !own };
    } catch (err) {
      const missing = missingPair(scope.signal, err);
      if (missing.internal) options.onInternalError?.(err);
      const j = missing.judgment;
      return {
        pickId: null,
        cached: false,
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
    abortAll: () => cache.abortAll(new RewardError('RW_SHUTTING_DOWN', 'server shutting down')),
  };
}
