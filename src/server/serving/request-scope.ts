/**
 * The abort scope of one request in the serving services (judgments and comparisons): it aborts just past
 * the request's deadline or when the client goes away, and lets go of both when the request ends.
 */
import { setMaxListeners } from 'node:events';

/** How long after the deadline a request stops waiting for work that has not answered. */
export const DEADLINE_SLACK_MS = 50;

/** The abort reason of a request whose deadline passed (tell it from a client abort or a shutdown). */
export class DeadlineReached extends Error {
  constructor() {
    super('request deadline reached');
    this.name = 'DeadlineReached';
  }
}

export interface RequestScope {
  signal: AbortSignal;
  /** Clears the timers and the client listener; call once the request has its answers. */
  end(): void;
}

export interface RequestScopeOptions {
  /** Absolute deadline, epoch ms. */
  deadline: number;
  /** Aborts when the client goes away. */
  signal?: AbortSignal | undefined;
  /** Waiters on the scope's signal; past 10 Node would warn about a leak that is none. */
  fanOut: number;
  /** How long to hold the work after the client left (a retry may join it); 0 or absent = abort at once. */
  holdMs?: (() => number) | undefined;
  /** Aborts when POST /v1/cancel selects the request: let go at once, never held. */
  cancel?: AbortSignal | undefined;
}

export function createRequestScope(options: RequestScopeOptions): RequestScope {
  const { deadline, signal: outer, holdMs } = options;
  const controller = new AbortController();
  if (options.fanOut >= 10) setMaxListeners(0, controller.signal);
  let hold: NodeJS.Timeout | undefined;
  const onOuterAbort = (): void => {
    const ms = holdMs?.() ?? 0;
    if (ms <= 0) controller.abort(outer?.reason);
    else hold = setTimeout(() => controller.abort(outer?.reason), ms);
  };
  if (outer?.aborted === true) onOuterAbort();
  else outer?.addEventListener('abort', onOuterAbort, { once: true });
  const cancel = options.cancel;
  const onCancel = (): void => controller.abort(cancel?.reason);
  if (cancel?.aborted === true) onCancel();
  else cancel?.addEventListener('abort', onCancel, { once: true });
  // Just past the deadline, so the engine's own timeout (with its partial transcript) normally answers
  // first; this catches work still waiting for a run slot.
  const timer = setTimeout(
    () => controller.abort(new DeadlineReached()),
    Math.max(0, deadline - Date.now()) + DEADLINE_SLACK_MS,
  );
  return {
    signal: controller.signal,
    end: () => {
      clearTimeout(timer);
      clearTimeout(hold);
      outer?.removeEventListener('abort', onOuterAbort);
      cancel?.removeEventListener('abort', onCancel);
    },
  };
}
