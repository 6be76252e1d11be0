/**
 * What the two callers of a backend (the graph executor `run.ts` and the comparative `ask.ts`) do alike
 * around one call: the failure an error stands for, the observer event of a call that threw or replied,
 * and the sum of backend-reported counts; and the deadline-and-abort scope a judgment (`run.ts`) or a
 * comparative unit (`compare.ts`) runs its calls in.
 */
import { RewardError, type ErrorCode } from '../errors.js';
import type { CallEvent, JudgeObserver, LlmReply, Route } from './types.js';

/** The code and message an error stands for: a RewardError's own, anything else RW_INTERNAL. */

/**
 * Backend-slot priority of an urgent call (the serving priority lane): above any normal call's priority
 * (progress × 2^40 − age, progress < 256), below 2^53 so that the sum stays exact.
 */
export const URGENT_PRIORITY = 2 ** 48;

/**
 * Whether a backend-slot priority is urgent (the priority lane of fair-queue.ts): an urgent call's is
 * URGENT_PRIORITY + progress × 2^40 − age (age < 2^40 ms), a normal one's at most 255 × 2^40 − age.
 */
export const isUrgent = (priority: number): boolean => priority >= URGENT_PRIORITY - 2 ** 40;

export function toFailure(err: unknown): { code: ErrorCode; message: string } {
  if (err instanceof RewardError) return { code: err.code, message: err.message };
  return { code: 'RW_INTERNAL', message: err instanceof Error ? err.message : String(err) };
}

/** Reports a call that threw (no reply, so no tokens and cached tokens unknown) to the observer. */
export function observeFailedCall(
  observer: JudgeObserver | undefined,
  role: string,
  route: Route,
  code: ErrorCode,
  latencyMs: number,
): void {
  observer?.onCall?.({
    role,
    model: route.model,
    backend: route.backend.name,
    outcome: code,
    latencyMs,
    promptTokens: 0,
    completionTokens: 0,
    cachedPromptTokens: null,
  });
}

/** Reports a call that got a reply (parsed or not: `outcome` says) to the observer. */
export function observeReply(
  observer: JudgeObserver | undefined,
  role: string,
  route: Route,
  outcome: CallEvent['outcome'],
  reply: LlmReply,
): void {
  observer?.onCall?.({
    role,
    model: route.model,
    backend: route.backend.name,
    outcome,
    latencyMs: reply.latencyMs,
    promptTokens: reply.promptTokens,
    completionTokens: reply.completionTokens,
    cachedPromptTokens: reply.cachedPromptTokens ?? null,
    reasoningTokens: reply.reasoningTokens ?? 0,
  });
}

/** A sum of backend-reported counts that is unknown (null) as soon as one term is. */
export const addKnown = (sum: number | null, value: number | null): number | null =>
  sum === null || value === null ? null : sum + value;

/** A call that timed out within this of its deadline was cut by the deadline, not by its own timeout. */
const DEADLINE_CUT_MARGIN_MS = 50;

/**
 * True when a call failed only because the deadline it was given has passed, and that deadline has moved
 * later since (a request joined the judgment or comparison): the caller asks again under the new one (not a
 * re-ask: the reply never came). `deadline` is read now.
 */
export function cutByMovedDeadline(
  code: ErrorCode,
  signal: AbortSignal,
  callDeadline: number,
  deadline: number,
): boolean {
  const now = Date.now();
  return (
    code === 'RW_JUDGE_TIMEOUT' &&
    !signal.aborted &&
    now >= callDeadline - DEADLINE_CUT_MARGIN_MS &&
    deadline > callDeadline &&
    deadline > now
  );
}

/**
 * The scope of one judgment or comparative unit: a signal that aborts with the caller's signal, or at the
 * deadline with RW_JUDGE_TIMEOUT (`deadline` is read again when the timer fires: a getter that moved it later
 * re-arms the timer), and `end()`, which aborts whatever is still running with RW_CALL_CANCELLED (`ended` is
 * its message) and unhooks the caller's signal. `timedOut()`: the deadline timer aborted the scope.
 */
export function deadlineScope(
  options: { readonly deadline: number; readonly signal?: AbortSignal | undefined },
  ended: string,
): { signal: AbortSignal; timedOut: () => boolean; end: () => void } {
  const controller = new AbortController();
  let timedOut = false;
  const onAbort = (): void => controller.abort(options.signal?.reason);
  if (options.signal?.aborted === true) controller.abort(options.signal.reason);
  else options.signal?.addEventListener('abort', onAbort, { once: true });
  let timer: NodeJS.Timeout;
  const onDeadline = (): void => {
    const left = options.deadline - Date.now();
    if (left > 0) {
      timer = setTimeout(onDeadline, left);
      return;
    }
    timedOut = true;
    controller.abort(new RewardError('RW_JUDGE_TIMEOUT', 'request deadline reached'));
  };
  timer = setTimeout(onDeadline, Math.max(0, options.deadline - Date.now()));
  return {
    signal: controller.signal,
    timedOut: () => timedOut,
    end: () => {
      clearTimeout(timer);
      if (!controller.signal.aborted) controller.abort(new RewardError('RW_CALL_CANCELLED', ended));
      options.signal?.removeEventListener('abort', onAbort);
    },
  };
}
