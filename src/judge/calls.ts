/**
 * What the two callers of a backend (the graph executor `run.ts` and the comparative `ask.ts`) do alike
 * around one call: the failure an error stands for, the observer event of a call that threw or replied,
 * and the sum of backend-reported counts.
 */
import { RewardError, type ErrorCode } from '../errors.js';
import type { CallEvent, JudgeObserver, LlmReply, Route } from './types.js';

/** The code and message an error stands for: a RewardError's own, anything else RW_INTERNAL. */
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
  });
}

/** A sum of backend-reported counts that is unknown (null) as soon as one term is. */
export const addKnown = (sum: number | null, value: number | null): number | null =>
  sum === null || value === null ? null : sum + value;
