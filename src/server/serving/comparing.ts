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
import { RewardError } from '../../errors.js';
import { prepareCandidate, type PreparedCandidate } from '../../judge/candidate.js';
import {
  canonicalPair,
  mirrorPair,
  normalizeShared,
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
import { comparativeKey, type KeySettings } from '../../judge/key.js';
import type { Router } from '../../judge/types.js';
import type { WorkShape } from '../admission/admission.js';
import { scopedKey } from './tenant-work.js';
import { createRequestScope } from './request-scope.js';
import {
  createComparisonUnits,
  missingPair,
  pairShape,
  PICK_SHAPE,
  type ComparisonServiceOptions,
  type ComparisonUnits,
  type RequestScope,
} from './comparison-units.js';

export type { ComparisonServiceOptions, RequestScope } from './comparison-units.js';

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

/** One pair of a group for a request: from the LRU, a flight joined or started, or missing (`missingPair`). */
async function playPair(
  units: ComparisonUnits,
  group: PlayGroup,
  pair: KeyedPair,
  request: RequestScope,
  signal: AbortSignal,
  startedAt: number,
): Promise<ComparedPair> {
  const { cache, lookups } = units;
  const { input, swapped, key } = pair;
  const hit = cache.get(key);
  if (hit !== undefined && hit.kind === 'pair') {
    lookups.hit.inc();
    return viewOf(hit, swapped, true);
  }
  const own = !cache.has(key);
  const flight = units.fly(key, own, request.deadline, signal, (flightSignal, deadline) =>
    units.computePair(input, group.judges, flightSignal, deadline, request, group.known),
  );
  try {
    if (flight === undefined) throw new Error('no comparison flight to join');
    const stored = await flight;
    if (stored.kind !== 'pair') throw new Error('comparison key resolved to another kind of unit');
    return viewOf(stored, swapped, !own);
  } catch (err) {
    const missing = missingPair(signal, err);
    if (missing.internal) units.onInternalError?.(err);
    return viewOf(
      { id: null, judgment: { ...missing.judgment, latencyMs: Date.now() - startedAt } },
      swapped,
      false,
    );
  }
}

/** Admits a request's groups whole, then plays each group's schedule among its real candidates. */
async function playTournaments(
  units: ComparisonUnits,
  groups: readonly PlayGroup[],
  request: RequestScope,
): Promise<Array<Array<PlayedPair<ComparedPair>>>> {
  const { cache } = units;
  const keyed = groups.map((group) =>
    pairKeys(group, units.router, units.settings, request.tenant?.cacheScope),
  );
  const work = newComparisons(groups, keyed, (key) => cache.get(key) !== undefined || cache.has(key));
  units.admit(work.shapes, request);
  const scope = createRequestScope({
    deadline: request.deadline,
    signal: request.signal,
    fanOut: work.fanOut,
    cancel: request.cancel,
  });
  const startedAt = Date.now();
  try {
    return await Promise.all(
      groups.map((group, k) => {
        const pairInput = keyed[k];
        if (pairInput === undefined) throw new Error('group without keys');
        return runTournament<ComparedPair>(group.real.length, group.schedule, (p) =>
          playPair(units, group, pairInput(inGroup(group, p)), request, scope.signal, startedAt),
        ).then((played) => played.map((p) => ({ ...p, ...inGroup(group, p) })));
      }),
    );
  } finally {
    scope.end();
  }
}

/** A pick that never ran for this request, as `missingPair` decides it. */
function missingPick(missing: PairJudgment, latencyMs: number): PickJudgment {
  return {
    status: missing.status,
    best: null,
    confidence: null,
    reasoning: null,
    reason: missing.reason,
    error: missing.error,
    usage: missing.usage,
    latencyMs,
    promptVersion: missing.promptVersion,
  };
}

/** One pick over a request's candidates, prepared once: from the LRU, a flight joined, or one admitted and started. */
async function pickOne(
  units: ComparisonUnits,
  prepare: ComparisonService['prepare'],
  rawInput: PickInput,
  scopeIn: RequestScope,
): Promise<PickedBest> {
  const { cache, lookups } = units;
  const texts = prepare(rawInput, rawInput.candidates);
  const { rejections } = texts;
  const input: PickInput = { ...texts.shared, candidates: texts.candidates };
  const key = scopedKey(
    comparativeKey(units.router, { kind: 'pick', input }, units.settings),
    scopeIn.tenant?.cacheScope,
  );
  const hit = cache.get(key);
  if (hit !== undefined && hit.kind === 'pick') {
    lookups.hit.inc();
    return { pickId: hit.id, judgment: hit.judgment, cached: true, rejections };
  }
  const own = !cache.has(key);
  const decided = rejections.filter((r) => r === undefined).length < 2;
  if (own && !decided) units.admit([PICK_SHAPE], scopeIn);
  const scope = createRequestScope({
    deadline: scopeIn.deadline,
    signal: scopeIn.signal,
    fanOut: 1,
    cancel: scopeIn.cancel,
  });
  const started = Date.now();
  try {
    const flight = units.fly(key, own, scopeIn.deadline, scope.signal, (signal, deadline) =>
      units.computePick(input, decided, signal, deadline, scopeIn, texts.known),
    );
    if (flight === undefined) throw new Error('no pick flight to join');
    const stored = await flight;
    if (stored.kind !== 'pick') throw new Error('pick key resolved to another kind of unit');
    return { pickId: stored.id, judgment: stored.judgment, cached: !own, rejections };
  } catch (err) {
    const missing = missingPair(scope.signal, err);
    if (missing.internal) units.onInternalError?.(err);
    return {
      pickId: null,
      cached: false,
      rejections,
      judgment: missingPick(missing.judgment, Date.now() - started),
    };
  } finally {
    scope.end();
  }
}

/**
 * The comparison service: its own LRU + single-flight (CACHE_SIZE entries), admission shared with
 * judgments (`options.admission`), metrics and transcripts; `abortAll` answers every flight
 * RW_SHUTTING_DOWN.
 */
export function createComparisonService(options: ComparisonServiceOptions): ComparisonService {
  const { metrics } = options;
  const units = createComparisonUnits(options);

  const prepare: ComparisonService['prepare'] = (shared, candidates) => {
    const prepared = prepareGroup(shared, candidates, units.settings);
    for (const r of prepared.rejections) if (r !== undefined) metrics.rejectedInputs.labels(r).inc();
    return prepared;
  };

  const tournaments: ComparisonService['tournaments'] = async (rawGroups, request) => {
    const groups = rawGroups.map((g): PlayGroup => {
      const prepared = prepare(g.shared, g.candidates);
      const real = prepared.rejections.flatMap((r, k) => (r === undefined ? [k] : []));
      return { ...g, ...prepared, real };
    });
    const played = await playTournaments(units, groups, request);
    return groups.map((g, k) => ({ played: played[k] ?? [], rejections: g.rejections }));
  };

  return {
    tournaments,
    pick: (rawInput, scope) => pickOne(units, prepare, rawInput, scope),
    prepare,
    abortAll: () => units.cache.abortAll(new RewardError('RW_SHUTTING_DOWN', 'server shutting down')),
  };
}
