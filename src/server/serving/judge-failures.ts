/**
 * What a request's item gets when no judgment answers it (judge-service.ts): `cancelled`, or a synthetic
 * failure — the deadline came first, there was no room for it, or something broke (an internal error is
 * reported).
 */
import { RewardError } from '../../errors.js';
import type { CompiledGraph } from '../../judge/graph.js';
import { failedJudgment } from '../../judge/judgment.js';
import type { Judgment } from '../../judge/types.js';
import { cancelledJudgment, isCancelled } from '../controls/cancel.js';
import { DeadlineReached } from './request-scope.js';
import type { Service, JudgeItem, JudgedItem } from './judge-types.js';

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
export function syntheticFailure(
  graph: CompiledGraph,
  status: SyntheticStatus,
  code: SyntheticCode,
  message: string,
  latencyMs: number,
): Judgment {
  return failedJudgment(graph, { status, code, message, ...SYNTHETIC_REASONS[status] }, { latencyMs });
}

/** The request's unanswered items as `cancelled` (cancelled before any of its judgments started). */
export function cancelledRest(
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

/** Every slot is filled by construction; a hole would be a bug, answered as an internal failure. */
export function complete(items: readonly JudgeItem[], results: Array<JudgedItem | undefined>): JudgedItem[] {
  return items.map(
    (item, i) =>
      results[i] ?? {
        judgmentId: null,
        judgment: syntheticFailure(item.graph.graph, 'judge_error', 'RW_INTERNAL', 'internal error', 0),
        cached: false,
      },
  );
}

/** A flight that failed for the request: `cancelled`, or a synthetic failure (an internal one is reported). */
export function failedItem(
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
