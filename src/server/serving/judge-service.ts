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
 *
 * Here: a request's pass from lookup to answer, and the service built. Its parts: the shapes and shared
 * state (`judge-types.ts`), the lookup (`judge-lookup.ts`), the admission of a request whole
 * (`judge-admission.ts`), its flights (`judge-flights.ts`) and the answers no judgment gave
 * (`judge-failures.ts`).
 */
import { RewardError } from '../../errors.js';
import { JudgmentCache } from '../../judge/cache.js';
import { prepareInput } from '../../judge/candidate.js';
import { keySettingsOf } from '../../judge/key.js';
import { callObserver, overloadError, type Refusal } from '../admission/admission.js';
import type { HoldPlace } from '../admission/hold.js';
import { createIdempotencyRecords } from './idempotency.js';
import { isCancelled } from '../controls/cancel.js';
import { createFlightPayers } from './flight-payers.js';
import { createFlightDeadlines } from './flight-deadlines.js';
import { createRequestScope } from './request-scope.js';
import { createSharedFlights } from './shared-flights.js';
import type { SharedLookup } from './shared-judgments.js';
import type {
  JudgeService,
  JudgeServiceOptions,
  Service,
  JudgedItem,
  JudgeRequest,
  StoredJudgment,
  LookupCounter,
} from './judge-types.js';
import { admitRequest, judgeHolding, newWork, type Once } from './judge-admission.js';
import { cancelledRest, complete } from './judge-failures.js';
import { startFlights } from './judge-flights.js';
import { countLookups, isCacheable, recall, remember, sortItems, type Looked } from './judge-lookup.js';

const DEFAULT_IDEMPOTENCY = { windowMs: 600_000, lingerMs: 30_000, maxEntries: 65_536, maxItems: 10_000 };

/**
 * What the shared tier (Redis) stores: judged outcomes only. A rejected input costs no call to decide again,
 * and deciding it here always applies this replica's own preparation rules (a rolling deploy's replicas may
 * differ); its key carries those settings too (src/judge/key.ts).
 */
const isSharedCacheable = (stored: StoredJudgment): boolean => stored.judgment.status === 'ok';

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
