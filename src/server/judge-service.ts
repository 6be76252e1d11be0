/**
 * The serving-side judging service: coalescing (LRU + single-flight), admission (bounded queue, whole
 * request or nothing), the per-request deadline, metrics and transcripts. Routes hand it items and get one
 * `JudgedItem` per item back, in order; it never rejects for a judge failure, only for overload.
 */
import { randomUUID } from 'node:crypto';
import { setMaxListeners } from 'node:events';

import { RewardError } from '../errors.js';
import { JudgmentCache } from '../judge/cache.js';
import type { CompiledGraph } from '../judge/graph.js';
import { failedJudgment } from '../judge/judgment.js';
import { judgmentKey } from '../judge/key.js';
import { runJudgment } from '../judge/run.js';
import type { Judgment, JudgeObserver, JudgmentInput, Router } from '../judge/types.js';
import type { Admission } from './admission.js';
import type { Metrics } from './metrics.js';
import { toTranscriptRecord, type TranscriptSink } from './transcripts.js';

/** A graph as a request chose it: the compiled graph and its metrics label (preset name or `custom`). */
export interface GraphChoice {
  graph: CompiledGraph;
  label: string;
}

export interface JudgeItem {
  graph: GraphChoice;
  input: JudgmentInput;
}

/** One item's answer. `judgmentId` is null when no judgment ran for it (deadline reached while waiting). */
export interface JudgedItem {
  judgmentId: string | null;
  judgment: Judgment;
  /** True when this request did not compute it: an LRU hit or a flight shared with another item/request. */
  cached: boolean;
}

export interface JudgeRequest {
  items: readonly JudgeItem[];
  /** Absolute deadline, epoch ms; unfinished items come back `timeout`. */
  deadline: number;
  /** Aborts when the client goes away: the request lets go of its flights. */
  signal?: AbortSignal | undefined;
  requestId?: string | undefined;
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

export interface JudgeServiceOptions {
  router: Router;
  metrics: Metrics;
  admission: Admission;
  cacheSize: number;
  candidateLimits: { minChars: number; maxChars: number };
  transcripts?: TranscriptSink | undefined;
  onInternalError?: ((err: unknown) => void) | undefined;
}

/** How long after the deadline the request stops waiting for judgments that have not answered. */
const DEADLINE_SLACK_MS = 50;

class DeadlineReached extends Error {
  constructor() {
    super('request deadline reached');
    this.name = 'DeadlineReached';
  }
}

function isCacheable(stored: StoredJudgment): boolean {
  return stored.judgment.status === 'ok' || stored.judgment.status === 'rejected_input';
}

type SyntheticCode = 'RW_JUDGE_TIMEOUT' | 'RW_CLIENT_ABORTED' | 'RW_SHUTTING_DOWN' | 'RW_INTERNAL';

/** Why a request got no judgment for an item. Only the last case is a bug worth logging. */
function classify(
  err: unknown,
  request: AbortSignal,
): { status: 'timeout' | 'judge_error'; code: SyntheticCode; message: string; internal: boolean } {
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
  if (err instanceof RewardError && err.code === 'RW_SHUTTING_DOWN') {
    // The flight itself was aborted while waiting for a slot: shutdown past its grace period.
    return { status: 'judge_error', code: 'RW_SHUTTING_DOWN', message: err.message, internal: false };
  }
  return { status: 'judge_error', code: 'RW_INTERNAL', message: 'internal error', internal: true };
}

/** A judgment that never ran: the deadline came first, or something broke. */
function syntheticFailure(
  graph: CompiledGraph,
  status: 'timeout' | 'judge_error',
  code: SyntheticCode,
  message: string,
  latencyMs: number,
): Judgment {
  return failedJudgment(
    graph,
    {
      status,
      code,
      message,
      reason: status === 'timeout' ? 'deadline' : 'internal error',
      stopReason: status === 'timeout' ? 'deadline' : 'node_failed',
    },
    { latencyMs },
  );
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

export function createJudgeService(options: JudgeServiceOptions): JudgeService {
  const { router, metrics, admission, transcripts } = options;
  const cache = new JudgmentCache<StoredJudgment>({ maxEntries: options.cacheSize, isCacheable });
  const observer: JudgeObserver = {
    onCall: (event) => metrics.observeCall(event),
    onRetry: (event) => metrics.observeRetry(event),
  };
  const hit = metrics.cacheLookups.labels('hit');
  const coalesced = metrics.cacheLookups.labels('coalesced');
  const miss = metrics.cacheLookups.labels('miss');

  /** One flight: wait for a run slot, run, count, write the transcript, then hand the result out. */
  const compute = async (
    item: JudgeItem,
    signal: AbortSignal,
    deadline: number,
    requestId: string | undefined,
  ): Promise<StoredJudgment> => {
    const release = await admission.acquire(signal);
    let judgment: Judgment;
    try {
      judgment = await runJudgment(item.graph.graph, item.input, {
        router,
        deadline,
        signal,
        observer,
        limits: options.candidateLimits,
      });
    } finally {
      release();
    }
    admission.recordDuration(judgment.latencyMs);
    metrics.observeJudgment(item.graph.label, judgment);
    const stored: StoredJudgment = { id: randomUUID(), judgment };
    if (transcripts !== undefined)
      await transcripts.write(
        toTranscriptRecord(stored.id, judgment, item.input, item.graph.label, router.name, requestId),
      );
    return stored;
  };

  const judge = async (request: JudgeRequest): Promise<JudgedItem[]> => {
    const { items, deadline } = request;
    const startedAt = Date.now();
    const keys: string[] = [];
    const results: Array<JudgedItem | undefined> = [];
    /** Index of the item that starts each new flight. */
    const starters = new Map<string, number>();
    let hits = 0;
    for (const [i, item] of items.entries()) {
      const key = judgmentKey(item.graph.graph, item.input, router);
      keys.push(key);
      const cached = cache.get(key);
      if (cached !== undefined) {
        results[i] = { judgmentId: cached.id, judgment: cached.judgment, cached: true };
        hits += 1;
      } else if (!cache.has(key) && !starters.has(key)) {
        starters.set(key, i);
      }
    }
    // A request larger than the whole capacity could never be admitted: a retryable 503 would loop forever.
    const capacity = admission.maxConcurrent + admission.maxQueue;
    if (starters.size > capacity) {
      throw new RewardError(
        'RW_BAD_REQUEST',
        `request needs ${starters.size} new judgments but this server admits at most ${capacity} at once ` +
          '(MAX_CONCURRENT_JUDGMENTS + MAX_QUEUE): split it into smaller requests',
        { details: { new_judgments: starters.size, capacity } },
      );
    }
    // Whole request or nothing: decided before any judgment starts (nothing awaits in between).
    if (starters.size > 0 && !admission.canAdmit(starters.size)) {
      throw new RewardError(
        'RW_OVERLOADED',
        `server busy: ${starters.size} new judgments do not fit (running ${admission.running}, queued ${admission.waiting})`,
        { details: { retry_after_s: admission.retryAfterSeconds(starters.size) } },
      );
    }
    if (hits > 0) hit.inc(hits);
    if (starters.size > 0) miss.inc(starters.size);
    const joined = items.length - hits - starters.size;
    if (joined > 0) coalesced.inc(joined);
    if (hits === items.length) return complete(items, results);

    const controller = new AbortController();
    // One listener per waiting item (a group may hold a thousand); Node warns past 10.
    if (items.length >= 10) setMaxListeners(0, controller.signal);
    const outer = request.signal;
    const onOuterAbort = (): void => controller.abort(outer?.reason);
    if (outer?.aborted === true) controller.abort(outer.reason);
    else outer?.addEventListener('abort', onOuterAbort, { once: true });
    // Just past the deadline, so the engine's own timeout (with its partial transcript) normally answers
    // first; this catches judgments still waiting for a run slot.
    const timer = setTimeout(
      () => controller.abort(new DeadlineReached()),
      Math.max(0, deadline - Date.now()) + DEADLINE_SLACK_MS,
    );

    const waits: Promise<void>[] = [];
    for (const [i, item] of items.entries()) {
      if (results[i] !== undefined) continue;
      const key = keys[i] ?? '';
      const own = starters.get(key) === i;
      const flight = own
        ? cache.run(key, (signal) => compute(item, signal, deadline, request.requestId), controller.signal)
        : cache.join(key, controller.signal);
      const settle = (judged: JudgedItem): void => {
        results[i] = judged;
      };
      // No flight to join (e.g. the request was already aborted and let go of it): `complete` answers the
      // empty slot as a failure, never a reward.
      if (flight === undefined) continue;
      waits.push(
        flight.then(
          (stored) => settle({ judgmentId: stored.id, judgment: stored.judgment, cached: !own }),
          (err: unknown) => {
            const failure = classify(err, controller.signal);
            if (failure.internal) options.onInternalError?.(err);
            settle({
              judgmentId: null,
              judgment: syntheticFailure(
                item.graph.graph,
                failure.status,
                failure.code,
                failure.message,
                Date.now() - startedAt,
              ),
              cached: false,
            });
          },
        ),
      );
    }
    try {
      await Promise.all(waits);
    } finally {
      clearTimeout(timer);
      outer?.removeEventListener('abort', onOuterAbort);
    }
    return complete(items, results);
  };

  const judgeOne = async (item: JudgeItem, scope: Omit<JudgeRequest, 'items'>): Promise<JudgedItem> => {
    const [judged] = await judge({ ...scope, items: [item] });
    if (judged === undefined) throw new Error('judge service returned no item');
    return judged;
  };

  return {
    judge,
    judgeOne,
    cache,
    // A RewardError, so the judgments it cuts report RW_SHUTTING_DOWN rather than a caller's abort.
    abortAll: () => cache.abortAll(new RewardError('RW_SHUTTING_DOWN', 'server shutting down')),
  };
}
