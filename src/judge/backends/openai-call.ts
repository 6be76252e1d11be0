/**
 * One call of the OpenAI-compatible backend, across its attempts: retries within the policy, the deadline
 * and the retry budget (completeCall), and each attempt's way to a replica — the pick (or the pin), the
 * prefix stagger, the replica's in-flight slot, the backend's RPM/TPM buckets — and its settling on the
 * replica (attemptOnReplica).
 */
import { setMaxListeners } from 'node:events';

import type { BackendSettings } from '../../settings/routing-file.js';
import type { Flow } from '../fair-queue.js';
import { estimateTokens, type RateBuckets, type Release } from '../limiter.js';
import { inputKey, routingKey } from '../replicas.js';
import {
  abortError,
  RetryError,
  withRetry,
  type RetryBudget,
  type RetryPolicy,
  type Sleep,
} from '../retry.js';
import type { PrefixStagger, StaggerTurn } from '../stagger.js';
import type { CallOptions, LlmReply, LlmRequest, ReplicaOutcome } from '../types.js';
import { attemptOnce, enginePriorityValue, type AttemptContext, type CallState } from './openai-attempt.js';
import { AttemptError, classify, replicaOutcome, toRewardError, verdictOf } from './openai-errors.js';
import { waitForReplica, type CircuitWait } from './openai-replica.js';
import type { Completion } from './openai-wire.js';

/** What every call of one backend shares; built once by createOpenAICompatibleBackend. */
export interface BackendParts extends CircuitWait {
  settings: BackendSettings;
  stagger: PrefixStagger;
  /** The provider's RPM / TPM limits on the whole backend; undefined when neither is set. */
  buckets: RateBuckets | undefined;
  budget: RetryBudget;
  policy: RetryPolicy;
  /** Injected for tests (withRetry's defaults otherwise). */
  random?: (() => number) | undefined;
  sleep?: Sleep | undefined;
  attempt: AttemptContext;
  /** Told when a call's first attempt waited for its prefix's leader. */
  onStaggered: () => void;
}

/** What one call carries across its attempts, besides the CallState its attempts read. */
interface Call {
  request: LlmRequest;
  signal: AbortSignal;
  deadline: number;
  priority: number | undefined;
  /** The tenant's fair-queue flow for the replica's in-flight slots (CallOptions.flow). */
  flow: Flow | undefined;
  /** Estimated tokens (prompt + max completion), for the limiter and the TPM bucket. */
  tokens: number;
  key: string;
  /** The input judged (inputKey): its replica's breaker counts one failure per input (issue 38 item 9). */
  input: string;
  /** The pinned replica's index, or -1 (see CallOptions.pin); its label as asked. */
  pinned: number;
  pinnedLabel: string | undefined;
  /** The first attempt's place in its prefix's stagger (retries go at once). */
  turn: StaggerTurn | undefined;
  /** The replica whose last attempt failed is avoided by the retry. */
  avoid: number | undefined;
  /** Whether this call has already waited for an open circuit (it does so at most once). */
  circuit: { waited: boolean };
  /** The label of the replica the last attempt went to. */
  servedBy: string | undefined;
  previous: CallState;
}

/**
 * One call: waits for a slot and rate-limit capacity, sends one chat-completions request per attempt,
 * retries what `classify` allows with full-jitter backoff honouring Retry-After, never attempting or
 * sleeping past `deadline`, and each retry only with the backend's retry budget's consent (told to
 * `observer.onRetry`). Rejects with the RewardError toRewardError makes of the failure.
 */
export async function completeCall(
  b: BackendParts,
  request: LlmRequest,
  { signal, deadline, priority, flow, observer, pin, urgent }: CallOptions,
): Promise<LlmReply> {
  const started = performance.now();
  // One judgment's signal is shared by all its concurrent calls: lift Node's 10-listener warning.
  // (Node 20's getMaxListeners throws on a signal once set to 0, so set unconditionally.)
  setMaxListeners(0, signal);
  // A canary or audit pinned to one replica: every attempt goes there (see CallOptions.pin).
  const pinnedLabel = pin?.get(b.name);
  const call: Call = {
    request,
    signal,
    deadline,
    priority,
    flow,
    tokens: estimateTokens(request.messages, request.maxTokens),
    // A comparison judged without a ground truth keeps its group on one replica by its question.
    key: routingKey(request.context.groundTruth ?? request.context.question),
    input: inputKey(request),
    pinned: pinnedLabel === undefined ? -1 : b.replicas.findIndex((r) => r.label === pinnedLabel),
    pinnedLabel,
    turn: undefined,
    avoid: undefined,
    circuit: { waited: false },
    servedBy: undefined,
    previous: {
      signature: undefined,
      headersAt: undefined,
      enginePriority: urgent === true ? enginePriorityValue(b.settings.engine_priority) : undefined,
    },
  };
  try {
    if (signal.aborted) throw new RetryError('aborted', 0, signal.reason);
    b.budget.recordCall();
    const { value, attempts } = await withRetry(() => attemptOnReplica(b, call), {
      policy: b.policy,
      deadline,
      signal,
      classify,
      random: b.random,
      sleep: b.sleep,
      allowRetry: () => {
        const allowed = b.budget.tryRetry();
        observer?.onRetry?.({ backend: b.name, allowed });
        return allowed;
      },
    });
    const reply: LlmReply = {
      text: value.text,
      model: value.model,
      promptTokens: value.promptTokens,
      completionTokens: value.completionTokens,
      cachedPromptTokens: value.cachedPromptTokens,
      latencyMs: performance.now() - started,
      attempts,
      finishReason: value.finishReason,
      replica: b.replicas.length > 1 ? call.servedBy : undefined,
      reasoning: value.reasoning,
      reasoningTokens: value.reasoningTokens,
      reasoningTokensEstimated: value.reasoningTokensEstimated,
    };
    return reply;
  } catch (error) {
    throw toRewardError(error, signal, b.name, b.policy.maxRetries);
  } finally {
    call.turn?.done();
  }
}

/**
 * One attempt of `call`: its replica (the pinned one, whose open circuit fails the attempt, or the
 * picker's), its stagger turn (first attempt only), an in-flight slot, RPM/TPM capacity, then attemptOnce.
 * The replica settles every attempt that got a slot (outcome, latency, headers time); one that failed the
 * replica is avoided by the retry. Rejects with what failed: an AttemptError, or the limiter's, stagger's
 * or buckets' error (an abort, the deadline).
 */
async function attemptOnReplica(b: BackendParts, call: Call): Promise<Completion> {
  const { signal, deadline, request, previous } = call;
  const index =
    call.pinned < 0
      ? await waitForReplica(b, call.key, call.avoid, signal, deadline, call.circuit)
      : call.pinned;
  const replica = b.replicas[index];
  if (replica === undefined) throw new Error(`backend ${b.name}: no replica ${index}`);
  if (call.pinned >= 0 && !replica.breaker.admit()) {
    throw new AttemptError(
      'connection',
      `pinned replica ${call.pinnedLabel ?? ''} of ${b.name} has an open circuit`,
    );
  }
  call.servedBy = replica.label;
  let release: Release;
  try {
    if (call.turn === undefined) {
      // Parallel members of one role and ground truth share their prompt up to the candidate, and
      // only the replica that computed a prefix has it: the stagger is per replica. While it
      // waits, the call counts in the replica's load, so the picker sees it.
      replica.pending += 1;
      try {
        call.turn = await b.stagger.enter(`${index}\0${request.model}\0${request.role}\0${call.key}`, {
          signal,
          deadline,
        });
      } finally {
        replica.pending -= 1;
      }
      if (call.turn.waitedMs > 0) b.onStaggered();
    }
    release = await replica.limiter.acquire(call.tokens, {
      signal,
      deadline,
      priority: call.priority,
      flow: call.flow,
    });
  } catch (error) {
    replica.breaker.settle('neutral');
    throw error;
  }
  let outcome: ReplicaOutcome = 'aborted';
  let sentAt = Date.now();
  try {
    if (b.buckets !== undefined) {
      if (signal.aborted) throw abortError(signal);
      await b.buckets.take(call.tokens, { signal, deadline });
    }
    sentAt = Date.now();
    previous.headersAt = undefined;
    call.turn?.sent(sentAt);
    const completion = await attemptOnce(b.attempt, replica, call.key, request, deadline, signal, previous);
    outcome = 'ok';
    return completion;
  } catch (error) {
    outcome = replicaOutcome(error, signal, deadline - sentAt < b.settings.timeout_ms);
    if (verdictOf(outcome) === 'failure') call.avoid = index;
    throw error;
  } finally {
    call.turn?.done();
    replica.settle(outcome, sentAt, previous.headersAt, request.role, call.input);
    release();
  }
}
