/**
 * The OpenAI-compatible chat-completions backend's transport: the only code that calls an LLM over HTTP
 * (undici pool, per-attempt timer, retries, rate limits, error mapping). The wire format is openai-wire.ts.
 *
 * Transport: undici `Pool.request` (keep-alive pool sized to `max_inflight`) with the openai SDK's wire
 * types. Measured with bench/transport.ts (2 vCPU, Node 20, 64 concurrent calls against the fake), the SDK
 * path (global fetch, or undici fetch + Agent) costs ~0.6–0.9 ms of client CPU per call against ~0.1–0.2 ms
 * for raw undici; this server makes thousands of judge calls per second, so the hot path stays on undici.
 * Retries, rate limits and the deadline are ours (`retry.ts`, `limiter.ts`); the SDK's are not used.
 */
import { setMaxListeners } from 'node:events';
import { Pool } from 'undici';

import { RewardError, type ErrorCode } from '../../errors.js';
import {
  inflightControlOf,
  replicaUrls,
  type BackendSettings,
  type InflightControl as InflightControlSetting,
  type EnginePriority,
  type ResponseFormat,
} from '../../settings/routing-file.js';
import { createEngineScraper, engineMetricsUrl, type EngineScraper } from '../engine-metrics.js';
import { createInflightControl, type InflightControl } from '../inflight-control.js';
import { createLimiter, createRateBuckets, estimateTokens, type Limiter } from '../limiter.js';
import { acquireLoopLag } from '../loop-lag.js';
import {
  createBreaker,
  createReplicaPicker,
  routingKey,
  type AttemptVerdict,
  type Breaker,
  type BreakerOptions,
} from '../replicas.js';
import { BACKEND_DEFAULTS } from '../../settings/defaults.js';
import {
  abortableSleep,
  abortError,
  createRetryBudget,
  DEFAULT_RETRY_POLICY,
  parseRetryAfterMs,
  RetryError,
  withRetry,
  type RetryDecision,
  type RetryPolicy,
  type Sleep,
} from '../retry.js';
import type { BucketStore } from '../../state/types.js';
import { createPrefixStagger, type StaggerTurn } from '../stagger.js';
import type { Backend, CallOptions, LlmReply, LlmRequest, ReplicaOutcome } from '../types.js';
import {
  errorSignature,
  isContextOverflow,
  readCompletion,
  readWireError,
  schemaRefusal,
  toChatParams,
  type Completion,
  type WireError,
} from './openai-wire.js';
import { createReplicaFormat, type ReplicaFormat, type ResponseFormatSwitch } from './response-format.js';

export interface OpenAICompatibleBackendOptions {
  /** Name in logs and error messages (the routing file's backend key). Default `openai-compatible`. */
  name?: string | undefined;
  /** Backoff shape; `maxRetries` always comes from the settings. */
  backoff?: Partial<Pick<RetryPolicy, 'baseDelayMs' | 'maxDelayMs'>> | undefined;
  /** Injected for tests. */
  random?: (() => number) | undefined;
  sleep?: Sleep | undefined;
  /** Circuit-breaker thresholds (tests shorten the open period). */
  breaker?: BreakerOptions | undefined;
  /** Clock of the retry budget's window (epoch ms). */
  now?: (() => number) | undefined;
  /**
   * Told once per switch of one replica's response format (json_schema → json_object on evidence that the
   * schema is refused; json_object → json_schema when a later re-probe is accepted), with the evidence.
   */
  onResponseFormatSwitch?: ((event: ResponseFormatSwitch) => void) | undefined;
  /** Where RPM/TPM levels live (shared through Redis with REDIS_URL); default in-process. */
  buckets?: BucketStore | undefined;
}

const PING_TIMEOUT_MS = 5_000;
const MAX_RESPONSE_BYTES = 16 * 1024 * 1024;
/** Distinct errors remembered as "not about the schema" (each would otherwise cost a probe per call). */
const MAX_PROBE_MEMO = 64;
/** While every circuit is open: how often a half-open replica with a probe in flight is looked at, ms. */
const CIRCUIT_POLL_MS = 100;
const MIN_CIRCUIT_WAIT_MS = 5;
/** The longest open circuit a call waits for: the breaker's first open period (replicas.ts' default). */
const MAX_CIRCUIT_WAIT_MS = 5_000;

type FailureKind = 'timeout' | 'connection' | 'status' | 'unparsable';

/** One failed HTTP attempt, before retry policy and mapping to a RewardError. */
class AttemptError extends Error {
  readonly kind: FailureKind;
  readonly status: number | undefined;
  readonly retryAfterMs: number | undefined;
  /** The error body's fields (status failures only). */
  readonly wire: WireError | undefined;
  /** A 500 identical to the call's previous attempt's (status, type, code, message): deterministic. */
  readonly repeated: boolean;
  constructor(
    kind: FailureKind,
    message: string,
    extra: {
      status?: number;
      retryAfterMs?: number | undefined;
      wire?: WireError | undefined;
      repeated?: boolean;
      cause?: unknown;
    } = {},
  ) {
    super(message, { cause: extra.cause });
    this.name = 'AttemptError';
    this.kind = kind;
    this.status = extra.status;
    this.retryAfterMs = extra.retryAfterMs;
    this.wire = extra.wire;
    this.repeated = extra.repeated ?? false;
  }
}

const isOk = (status: number): boolean => status >= 200 && status < 300;

/** What one call carries across its attempts. */
interface CallState {
  /** The signature of the previous failed attempt's error (a repeated 500 is deterministic). */
  signature: string | undefined;
  /** When the current attempt's first response headers arrived (epoch ms). */
  headersAt: number | undefined;
  /** The engine's request priority this call is sent with (`engine_priority`); undefined = none. */
  enginePriority: number | undefined;
}

/** A high-priority call's engine priority: vLLM schedules lower values first, SGLang higher ones. */
function enginePriorityValue(setting: EnginePriority): number | undefined {
  switch (setting) {
    case 'off':
      return undefined;
    case 'vllm':
      return -1;
    case 'sglang':
      return 1;
  }
}

/** vLLM's 400 for a request priority without `--scheduling-policy priority`. */
const refusesPriority = (reply: { status: number; text: string }): boolean =>
  reply.status === 400 && /priority scheduling is not enabled/i.test(reply.text);

/** The request body of one chat-completions exchange. */
function chatBody(request: LlmRequest, format: ResponseFormat, priority: number | undefined): string {
  const params = toChatParams(request, format);
  return JSON.stringify(priority === undefined ? params : { ...params, priority });
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** `retry-after-ms` (OpenAI's extension) when present and valid, else `Retry-After`. */
function retryAfterFrom(headers: Record<string, string | string[] | undefined>): number | undefined {
  const ms = headerValue(headers['retry-after-ms']);
  if (ms !== undefined && /^\d+(\.\d+)?$/.test(ms.trim())) return Number(ms);
  return parseRetryAfterMs(headerValue(headers['retry-after']));
}

/** 408, 429 and 5xx are worth another attempt; other statuses are the request's fault. */
const isRetryableStatus = (status: number): boolean => status === 408 || status === 429 || status >= 500;

/**
 * Timeouts, connection errors, 408, 429 and 5xx are retried, except a context overflow (never: the same
 * prompt cannot fit) and a deterministic 500 — one whose status, error type, code and message repeat those
 * of the call's previous attempt (`repeated`) — which is therefore retried at most once.
 */
function classify(error: unknown): RetryDecision {
  if (!(error instanceof AttemptError)) return { retry: false };
  switch (error.kind) {
    case 'timeout':
    case 'connection':
      return { retry: true };
    case 'status': {
      const status = error.status ?? 0;
      if (error.wire !== undefined && isContextOverflow(status, error.wire)) return { retry: false };
      return { retry: !error.repeated && isRetryableStatus(status), retryAfterMs: error.retryAfterMs };
    }
    case 'unparsable':
      return { retry: false };
  }
}

function connectionCode(error: unknown): string {
  let current: unknown = error;
  for (let depth = 0; depth < 4 && current instanceof Error; depth++) {
    const code: unknown = 'code' in current ? current.code : undefined;
    if (typeof code === 'string') return code;
    current = current.cause;
  }
  return error instanceof Error ? error.message : String(error);
}

const UNDICI_TIMEOUTS = new Set([
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/**
 * An OpenAI-compatible backend. `complete` waits for a slot and rate-limit capacity, sends one
 * chat-completions request per attempt (per-attempt timeout = min(timeout_ms, deadline − now)), retries
 * 408/429/5xx/connection errors/timeouts with full-jitter backoff honouring Retry-After, and never
 * attempts or sleeps past `deadline`. Rejects with a RewardError: RW_JUDGE_TIMEOUT (timeouts, the deadline),
 * RW_CLIENT_ABORTED (the caller's abort — unless the abort reason is itself a RewardError, which is rethrown), RW_JUDGE_UNAVAILABLE
 * (statuses, connection errors; the status is in the message and `details`), RW_JUDGE_CONTEXT_OVERFLOW
 * (the prompt does not fit; not retried), RW_JUDGE_UNPARSABLE (no content). A deterministic 500 (same
 * error twice, no Retry-After) is not retried again, and retries stay within the backend's retry budget. A
 * replica that refuses the schema itself (see attemptOnce) is switched to `json_object`, with the schema
 * appended to the system prompt, until a re-probe after `schema_reprobe_ms` is accepted.
 */
export function createOpenAICompatibleBackend(
  settings: BackendSettings,
  options: OpenAICompatibleBackendOptions = {},
): Backend {
  // A first open period shortened by the options (tests) shortens the longest wait with it; never longer.
  const maxCircuitWaitMs = Math.min(MAX_CIRCUIT_WAIT_MS, options.breaker?.openMs ?? MAX_CIRCUIT_WAIT_MS);
  const name = options.name ?? 'openai-compatible';
  const urls = replicaUrls(settings);
  if (urls.length === 0) throw new Error(`backend ${name}: no base_url`);
  const replicas = urls.map((url, index) =>
    createReplica(url, index, urls, settings, options.breaker, (label) =>
      createReplicaFormat({
        backend: name,
        replica: label,
        configured: settings.response_format,
        reprobeMs: settings.schema_reprobe_ms,
        now: options.now,
        onSwitch: options.onResponseFormatSwitch,
      }),
    ),
  );
  // RPM / TPM are the provider's limits on the whole backend, not per replica.
  const buckets = createRateBuckets({
    rpm: settings.rpm,
    tpm: settings.tpm,
    sleep: options.sleep,
    // In-process, or shared through Redis by every worker and replica configured with this backend
    // (the same name and endpoints).
    buckets: options.buckets,
    bucketName: `${name}@${urls.join(',')}`,
  });
  const picker = createReplicaPicker(
    replicas.map((r) => r.url),
    replicas,
    { policy: settings.replica_policy },
  );
  const stagger = createPrefixStagger(settings.prefix_stagger_ms);
  let staggered = 0;
  const headers = {
    'content-type': 'application/json',
    accept: 'application/json',
    authorization: `Bearer ${settings.api_key}`,
  };
  const policy: RetryPolicy = {
    ...DEFAULT_RETRY_POLICY,
    ...options.backoff,
    maxRetries: settings.max_retries,
  };
  /** Errors whose json_object probe failed too (not about the schema): not probed again. Bounded. */
  const probeFailed = new Set<string>();
  /** Context per request: configured, else learned from an overflow error that named it. */
  let contextTokens = settings.context_tokens;
  const budget = createRetryBudget({
    ratio: settings.retry_budget,
    // A call's deposit must outlive its attempt: a hang is retried timeout_ms after the call was counted,
    // and with a 10 s window a burst of calls that hung together found their deposits gone (issue 23).
    windowMs: Math.max(BACKEND_DEFAULTS.retryBudgetWindowMs, 2 * settings.timeout_ms),
    minPerWindow: BACKEND_DEFAULTS.retryBudgetMin,
    now: options.now,
  });

  /**
   * One HTTP exchange under an attempt signal. The first exchange of an attempt stamps `call.headersAt`
   * when its response headers arrive: the engine's time, before our reading and parsing of the body.
   */
  const post = async (
    replica: Replica,
    body: string,
    signal: AbortSignal,
    key: string,
    call: CallState,
  ): Promise<{ status: number; text: string; retryAfterMs: number | undefined }> => {
    const res = await replica.pool.request({
      method: 'POST',
      path: replica.chatPath,
      headers: { ...headers, [settings.routing_key_header]: key },
      body,
      signal,
    });
    call.headersAt ??= Date.now();
    const text = await res.body.text();
    const retryAfterMs = isRetryableStatus(res.statusCode) ? retryAfterFrom(res.headers) : undefined;
    return { status: res.statusCode, text, retryAfterMs };
  };

  /** The error a non-200 answer becomes (status, wire fields, whether it repeats the previous 500). */
  const statusError = (
    reply: { status: number; text: string; retryAfterMs: number | undefined },
    previous: CallState,
  ): { failed: AttemptError; wire: WireError; signature: string } => {
    const wire = readWireError(reply.text);
    const signature = errorSignature(reply.status, wire);
    // A 500 with Retry-After says itself that it is transient: never taken for a deterministic one.
    const repeated500 =
      reply.status === 500 && reply.retryAfterMs === undefined && signature === previous.signature;
    previous.signature = signature;
    const failed = new AttemptError('status', `HTTP ${reply.status}: ${wire.message}`, {
      status: reply.status,
      retryAfterMs: reply.retryAfterMs,
      wire,
      repeated: repeated500,
    });
    return { failed, wire, signature };
  };

  /**
   * One attempt, in the replica's current response format (see response-format.ts). A `json_schema` request
   * refused in a way that may be about the schema (schemaRefusal) is sent once as `json_object` within the
   * same attempt; the replica switches to `json_object` only on evidence that the schema itself is refused:
   * a refusal that names the schema (4xx) and a successful probe, or a suspect refusal that a second
   * `json_schema` request, sent after the successful probe, repeats word for word. A 5xx, 429 or timeout
   * alone never switches it. A re-probe (json_schema sent while the replica is on json_object) that is
   * accepted switches it back; one refused again is answered as `json_object` in the same attempt.
   * `previous` holds the signature of this call's previous failed attempt and the engine priority it carries.
   */
  const attemptOnce = async (
    replica: Replica,
    key: string,
    request: LlmRequest,
    deadline: number,
    outer: AbortSignal,
    previous: CallState,
  ): Promise<Completion> => {
    const timeoutMs = Math.min(settings.timeout_ms, deadline - Date.now());
    if (timeoutMs <= 0) throw new AttemptError('timeout', 'no time left before the deadline');
    const controller = new AbortController();
    let timedOut = false;
    const onAbort = (): void => controller.abort(outer.reason);
    outer.addEventListener('abort', onAbort, { once: true });
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, timeoutMs);
    const plan = replica.format.plan();
    let reprobeSettled = !plan.reprobe;
    const send = async (format: 'json_schema' | 'json_object') => {
      const priority = replica.priorityRefused ? undefined : previous.enginePriority;
      const reply = await post(
        replica,
        chatBody(request, format, priority),
        controller.signal,
        key,
        previous,
      );
      if (priority === undefined || !refusesPriority(reply)) return reply;
      // The engine does not schedule by priority (vLLM without --scheduling-policy priority): stop sending it.
      replica.priorityRefused = true;
      return post(replica, chatBody(request, format, undefined), controller.signal, key, previous);
    };
    try {
      let reply = await send(plan.format);
      if (plan.reprobe && isOk(reply.status)) {
        reprobeSettled = true;
        replica.format.reprobeAccepted();
      }
      if (!isOk(reply.status)) {
        const refused = reply;
        const first = statusError(refused, previous);
        const { wire, signature } = first;
        const refusal = plan.format === 'json_schema' ? schemaRefusal(reply.status, wire) : undefined;
        if (plan.reprobe) {
          reprobeSettled = true;
          if (refusal === undefined) {
            // Not about the schema (a 5xx, 429…): the next request re-probes.
            replica.format.reprobeInconclusive();
          } else {
            replica.format.reprobeRefused();
            reply = await send('json_object');
          }
        } else if (refusal !== undefined && !probeFailed.has(signature)) {
          const probe = await send('json_object');
          if (!isOk(probe.status)) {
            // json_object refused too (a 4xx): the error was not about the schema; not probed again. A
            // 5xx or 429 says nothing either way.
            if (probe.status < 500 && probe.status !== 429 && probeFailed.size < MAX_PROBE_MEMO) {
              probeFailed.add(signature);
            }
            reply = probe;
          } else if (refusal === 'named') {
            replica.format.refused(
              `json_schema refused with HTTP ${reply.status} naming the schema (${wire.message}); json_object accepted`,
              reply.status,
            );
            reply = probe;
          } else {
            // The server answers json_object: is json_schema refused again, the same way?
            const again = await send('json_schema');
            if (isOk(again.status)) {
              reply = again;
            } else {
              if (errorSignature(again.status, readWireError(again.text)) === signature) {
                replica.format.refused(
                  `json_schema refused twice with HTTP ${reply.status} (${wire.message}); json_object accepted in between`,
                  reply.status,
                );
              }
              reply = probe;
            }
          }
        }
        if (!isOk(reply.status)) {
          // The last answer decides (a probe's 5xx is retried even if the json_schema 4xx would not be).
          const last = reply === refused ? first : statusError(reply, previous);
          if (isContextOverflow(reply.status, last.wire) && last.wire.nCtx !== undefined) {
            contextTokens = last.wire.nCtx;
          }
          throw last.failed;
        }
      }
      const read = readCompletion(reply.text, request.model);
      if (!read.ok) throw new AttemptError('unparsable', read.message, { cause: read.cause });
      return read.completion;
    } catch (error) {
      if (error instanceof AttemptError) throw error;
      if (timedOut || UNDICI_TIMEOUTS.has(connectionCode(error))) {
        throw new AttemptError('timeout', `no answer within ${timeoutMs} ms`, { cause: error });
      }
      throw new AttemptError('connection', `connection failed (${connectionCode(error)})`, { cause: error });
    } finally {
      // A re-probe cut short (timeout, abort, connection) says nothing: the next request re-probes.
      if (!reprobeSettled) replica.format.reprobeInconclusive();
      clearTimeout(timer);
      outer.removeEventListener('abort', onAbort);
    }
  };

  /**
   * The replica for the next attempt. While every circuit is open, a call waits — once, without spending
   * an attempt — for the first replica to take calls again, if that is before the deadline and within the
   * breaker's first open period (a circuit open longer has failed its probes: the backend is down, and
   * calls fail at once as before). A burst of calls that hung together times out together and opens a lone
   * replica's circuit: their retries spent every attempt against it within a second and failed (issue 23).
   */
  const pickReplica = async (
    key: string,
    avoid: number | undefined,
    signal: AbortSignal,
    deadline: number,
    circuit: { waited: boolean },
  ): Promise<number> => {
    let slept = false;
    try {
      for (;;) {
        const index = picker.pick(key, avoid);
        if (index !== undefined) return index;
        let waitMs = Infinity;
        // A half-open replica whose probe is in flight is looked at again shortly.
        for (const r of replicas) waitMs = Math.min(waitMs, r.breaker.waitMs?.() ?? CIRCUIT_POLL_MS);
        waitMs = Math.max(MIN_CIRCUIT_WAIT_MS, waitMs);
        if (circuit.waited || waitMs > maxCircuitWaitMs || Date.now() + waitMs >= deadline) {
          throw new AttemptError('connection', `every replica of ${name} has an open circuit`);
        }
        slept = true;
        await abortableSleep(waitMs, signal);
      }
    } finally {
      if (slept) circuit.waited = true;
    }
  };

  const complete = async (
    request: LlmRequest,
    { signal, deadline, priority, flow, observer, pin, urgent }: CallOptions,
  ): Promise<LlmReply> => {
    const started = performance.now();
    // One judgment's signal is shared by all its concurrent calls: lift Node's 10-listener warning.
    // (Node 20's getMaxListeners throws on a signal once set to 0, so set unconditionally.)
    setMaxListeners(0, signal);
    const tokens = estimateTokens(request.messages, request.maxTokens);
    // A comparison judged without a ground truth keeps its group on one replica by its question.
    const key = routingKey(request.context.groundTruth ?? request.context.question);
    // The first attempt's place in its prefix's stagger (retries go at once).
    let turn: StaggerTurn | undefined;
    // The replica whose last attempt failed is avoided by the retry.
    let avoid: number | undefined;
    /** Whether this call has already waited for an open circuit (it does so at most once). */
    const circuit = { waited: false };
    // A canary or audit pinned to one replica: every attempt goes there (see CallOptions.pin).
    const pinnedLabel = pin?.get(name);
    const pinned = pinnedLabel === undefined ? -1 : replicas.findIndex((r) => r.label === pinnedLabel);
    let servedBy: string | undefined;
    try {
      if (signal.aborted) throw new RetryError('aborted', 0, signal.reason);
      budget.recordCall();
      const previous: CallState = {
        signature: undefined,
        headersAt: undefined,
        enginePriority: urgent === true ? enginePriorityValue(settings.engine_priority) : undefined,
      };
      const { value, attempts } = await withRetry(
        async () => {
          const index = pinned < 0 ? await pickReplica(key, avoid, signal, deadline, circuit) : pinned;
          const replica = replicas[index];
          if (replica === undefined) throw new Error(`backend ${name}: no replica ${index}`);
          if (pinned >= 0 && !replica.breaker.admit()) {
            throw new AttemptError(
              'connection',
              `pinned replica ${pinnedLabel ?? ''} of ${name} has an open circuit`,
            );
          }
          servedBy = replica.label;
          let release;
          try {
            if (turn === undefined) {
              // Parallel members of one role and ground truth share their prompt up to the candidate, and
              // only the replica that computed a prefix has it: the stagger is per replica. While it
              // waits, the call counts in the replica's load, so the picker sees it.
              replica.pending += 1;
              try {
                turn = await stagger.enter(`${index}\0${request.model}\0${request.role}\0${key}`, {
                  signal,
                  deadline,
                });
              } finally {
                replica.pending -= 1;
              }
              if (turn.waitedMs > 0) staggered += 1;
            }
            release = await replica.limiter.acquire(tokens, { signal, deadline, priority, flow });
          } catch (error) {
            replica.breaker.settle('neutral');
            throw error;
          }
          let outcome: ReplicaOutcome = 'aborted';
          let sentAt = Date.now();
          try {
            if (buckets !== undefined) {
              if (signal.aborted) throw abortError(signal);
              await buckets.take(tokens, { signal, deadline });
            }
            sentAt = Date.now();
            previous.headersAt = undefined;
            turn?.sent(sentAt);
            const completion = await attemptOnce(replica, key, request, deadline, signal, previous);
            outcome = 'ok';
            return completion;
          } catch (error) {
            outcome = replicaOutcome(error, signal, deadline - sentAt < settings.timeout_ms);
            if (verdictOf(outcome) === 'failure') avoid = index;
            throw error;
          } finally {
            turn?.done();
            replica.settle(outcome, sentAt, previous.headersAt, request.role);
            release();
          }
        },
        {
          policy,
          deadline,
          signal,
          classify,
          random: options.random,
          sleep: options.sleep,
          allowRetry: () => {
            const allowed = budget.tryRetry();
            observer?.onRetry?.({ backend: name, allowed });
            return allowed;
          },
        },
      );
      const reply: LlmReply = {
        text: value.text,
        model: value.model,
        promptTokens: value.promptTokens,
        completionTokens: value.completionTokens,
        cachedPromptTokens: value.cachedPromptTokens,
        latencyMs: performance.now() - started,
        attempts,
        finishReason: value.finishReason,
        replica: replicas.length > 1 ? servedBy : undefined,
      };
      return reply;
    } catch (error) {
      throw toRewardError(error, signal, name, policy.maxRetries);
    } finally {
      turn?.done();
    }
  };

  const pingReplica = async (replica: Replica, signal: AbortSignal): Promise<boolean> => {
    const controller = new AbortController();
    const onAbort = (): void => controller.abort(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    const timer = setTimeout(() => controller.abort(), Math.min(settings.timeout_ms, PING_TIMEOUT_MS));
    try {
      const res = await replica.pool.request({
        method: 'GET',
        path: replica.modelsPath,
        headers,
        signal: controller.signal,
      });
      await res.body.dump();
      return res.statusCode >= 200 && res.statusCode < 300;
    } catch {
      return false;
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
    }
  };

  return {
    name,
    complete,
    /** Reachable when any replica answers `GET /models`. */
    async ping(signal) {
      const answers = await Promise.all(replicas.map((r) => pingReplica(r, signal)));
      return answers.includes(true);
    },
    /** Every replica with a closed (or probing) circuit is at its limit with calls queued. */
    isSaturated: () => {
      // Quarantined replicas take no real work, unless no other one is available (as in the picker).
      const available = replicas.filter((r) => r.breaker.available());
      const serving = available.filter((r) => !r.quarantined);
      const usable = serving.length > 0 ? serving : available;
      return (
        usable.length === 0 ||
        usable.every((r) => r.limiter.inflight >= r.limiter.limit && r.limiter.waiting > 0)
      );
    },
    replicas: () =>
      replicas.map((r) => ({
        backend: name,
        replica: r.label,
        state: r.breaker.state,
        inflight: r.limiter.inflight,
        waiting: r.limiter.waiting,
        limit: r.limiter.limit,
        maxInflight: r.limiter.maxInflight,
        attempts: new Map(r.attempts),
        circuitOpens: r.breaker.opens,
        responseFormat: r.format.mode,
        responseFormatSwitches: new Map(r.format.switches),
        quarantined: r.quarantined,
        inflightControl: r.mode,
        control: r.control?.snapshot(),
      })),
    setQuarantined(label, quarantined) {
      for (const r of replicas) if (r.label === label) r.quarantined = quarantined;
    },
    staggeredCalls: () => staggered,
    contextTokens: () => contextTokens,
    async close() {
      // Calls still in flight at close time would hold `close()` open; they are cut instead.
      await Promise.all(
        replicas.map(async (r) => {
          await r.close();
          await (r.limiter.inflight === 0 ? r.pool.close() : r.pool.destroy());
        }),
      );
    },
  };
}

/**
 * The RewardError a failed call becomes: its abort reason, or the last attempt's failure mapped to a code
 * (RW_JUDGE_TIMEOUT, RW_JUDGE_UNPARSABLE, RW_JUDGE_CONTEXT_OVERFLOW, RW_JUDGE_UNAVAILABLE) with why no
 * further attempt was made. `maxRetries` is the backend's, for the message.
 */
function toRewardError(error: unknown, signal: AbortSignal, name: string, maxRetries: number): RewardError {
  if (!(error instanceof RetryError)) {
    return error instanceof RewardError
      ? error
      : new RewardError('RW_JUDGE_UNAVAILABLE', `judge backend ${name} failed`, { cause: error });
  }
  const { reason, attempts, lastError } = error;
  if (reason === 'aborted') {
    const why: unknown = signal.reason;
    if (why instanceof RewardError) return why;
    return new RewardError(
      'RW_CLIENT_ABORTED',
      `judge call to ${name} aborted after ${attempts} attempt(s)`,
      {
        cause: why,
        details: { backend: name, attempts },
      },
    );
  }
  if (lastError instanceof RewardError) return lastError;
  const gaveUp =
    reason === 'deadline'
      ? ', giving up: the next retry would pass the deadline'
      : reason === 'budget'
        ? ', not retried: retry budget exhausted'
        : lastError instanceof AttemptError && lastError.repeated
          ? ', not retried again: the same error repeated'
          : '';
  if (!(lastError instanceof AttemptError)) {
    return new RewardError('RW_JUDGE_UNAVAILABLE', `judge backend ${name} failed${gaveUp}`, {
      cause: lastError,
    });
  }
  const overflow = lastError.wire !== undefined && isContextOverflow(lastError.status ?? 0, lastError.wire);
  const code: ErrorCode =
    lastError.kind === 'timeout'
      ? 'RW_JUDGE_TIMEOUT'
      : lastError.kind === 'unparsable'
        ? 'RW_JUDGE_UNPARSABLE'
        : overflow
          ? 'RW_JUDGE_CONTEXT_OVERFLOW'
          : 'RW_JUDGE_UNAVAILABLE';
  return new RewardError(
    code,
    `judge backend ${name}: ${lastError.message} (attempt ${attempts}/${maxRetries + 1}${gaveUp})`,
    {
      cause: lastError,
      details: {
        backend: name,
        attempts,
        ...(lastError.status === undefined ? {} : { status: lastError.status }),
        ...(lastError.wire?.type === undefined ? {} : { type: lastError.wire.type }),
        ...(lastError.wire?.nCtx === undefined ? {} : { n_ctx: lastError.wire.nCtx }),
        ...(lastError.wire?.nPromptTokens === undefined
          ? {}
          : { n_prompt_tokens: lastError.wire.nPromptTokens }),
        ...(reason === 'budget' ? { retry_budget: 'exhausted' } : {}),
      },
    },
  );
}

/** One replica: its connection pool, in-flight limit and its control, circuit breaker and attempt counts. */
interface Replica {
  url: string;
  /** Metric label: host[:port], plus the path when two replicas share a host. */
  label: string;
  pool: Pool;
  chatPath: string;
  modelsPath: string;
  limiter: Limiter;
  /** How the limit is set: `engine` (control steers it), `fixed`, `aimd`. */
  mode: InflightControlSetting;
  /** The engine-aware control of the limit (mode `engine`). */
  control: InflightControl | undefined;
  breaker: Breaker;
  /** Calls routed here and waiting for a sibling's prefill (part of the picker's load). */
  pending: number;
  /** Out of real work (canary quarantine); still receives pinned calls. */
  quarantined: boolean;
  attempts: Map<ReplicaOutcome, number>;
  /** The response format this replica is sent (json_schema, or json_object after a refusal). */
  format: ReplicaFormat;
  /** It refused a request priority (`engine_priority` set, vLLM without priority scheduling): none is sent. */
  priorityRefused: boolean;
  /**
   * Records one attempt's end: counts, breaker, the limit's control. Call before releasing its slot.
   * `headersAt`: when its response headers arrived; `kind`: its role (latencies compare within a kind).
   */
  settle(outcome: ReplicaOutcome, sentAt: number, headersAt?: number, kind?: string): void;
  /** Stops the engine-metrics scraper. */
  close(): Promise<void>;
}

/** The replica's engine-metrics scraper, per `engine_metrics`; undefined when `off`. */
function scraperFor(url: string, index: number, settings: BackendSettings): EngineScraper | undefined {
  const setting = settings.engine_metrics;
  if (setting === 'off') return undefined;
  const metricsUrl = setting === 'auto' ? engineMetricsUrl(url) : setting[index];
  if (metricsUrl === undefined) return undefined;
  return createEngineScraper({
    url: metricsUrl,
    intervalMs: settings.engine_metrics_interval_ms,
    apiKey: settings.api_key,
  });
}

function createReplica(
  url: string,
  index: number,
  all: readonly string[],
  settings: BackendSettings,
  breakerOptions: BreakerOptions | undefined,
  createFormat: (label: string) => ReplicaFormat,
): Replica {
  const base = new URL(url);
  const basePath = base.pathname.replace(/\/+$/, '');
  const sharedHost = all.some((other, i) => i !== index && new URL(other).host === base.host);
  const mode = inflightControlOf(settings);
  const scraper = mode === 'engine' ? scraperFor(url, index, settings) : undefined;
  const lag = mode === 'engine' ? acquireLoopLag() : undefined;
  const control =
    lag === undefined
      ? undefined
      : createInflightControl({
          ceiling: settings.max_inflight,
          scraper,
          lagMs: (from, to) => lag.maxLagMs(from, to),
        });
  const limiter = createLimiter({
    maxInflight: settings.max_inflight,
    adaptive: mode === 'aimd' ? {} : false,
    control,
  });
  const breaker = createBreaker(breakerOptions);
  const attempts = new Map<ReplicaOutcome, number>();
  const label = sharedHost ? `${base.host}${basePath}` : base.host;
  return {
    url,
    label,
    pool: new Pool(base.origin, {
      connections: settings.max_inflight,
      // Our per-attempt timer is the real limit; these only back it up.
      headersTimeout: settings.timeout_ms + 5_000,
      bodyTimeout: settings.timeout_ms + 5_000,
      // A chat completion is kilobytes; a runaway body must not exhaust memory.
      maxResponseSize: MAX_RESPONSE_BYTES,
    }),
    chatPath: `${basePath}/chat/completions${base.search}`,
    modelsPath: `${basePath}/models${base.search}`,
    limiter,
    mode,
    control,
    breaker,
    pending: 0,
    quarantined: false,
    attempts,
    format: createFormat(label),
    priorityRefused: false,
    settle(outcome, sentAt, headersAt, kind) {
      attempts.set(outcome, (attempts.get(outcome) ?? 0) + 1);
      breaker.settle(verdictOf(outcome));
      const latencyMs = Date.now() - sentAt;
      const served = outcome === 'ok' || outcome === 'unparsable';
      const overloaded = outcome === 'timeout' || outcome === 'http_429' || outcome === 'http_503';
      if (served || overloaded || control !== undefined) {
        limiter.observe({
          sentAt,
          latencyMs,
          overloaded,
          headersAt,
          result: served ? 'ok' : outcome === 'timeout' ? 'timeout' : 'other',
          kind,
        });
      }
    },
    async close() {
      lag?.release();
      await scraper?.close();
    },
  };
}

/** How an attempt ended, for the replica's counters, breaker and adaptive limit. */
function replicaOutcome(error: unknown, signal: AbortSignal, clippedByDeadline: boolean): ReplicaOutcome {
  if (signal.aborted) return 'aborted';
  if (!(error instanceof AttemptError)) return 'aborted';
  switch (error.kind) {
    case 'timeout':
      // A timer cut short by the judgment's deadline says nothing about the replica.
      return clippedByDeadline ? 'deadline' : 'timeout';
    case 'connection':
      return 'connection';
    case 'unparsable':
      return 'unparsable';
    case 'status': {
      const status = error.status ?? 0;
      if (status === 429) return 'http_429';
      if (status === 503) return 'http_503';
      if (status >= 500) return 'http_5xx';
      return 'http_4xx';
    }
  }
}

/** Timeouts, connection errors and 5xx are the replica's ill health; a 429, a 4xx or an abort is not. */
function verdictOf(outcome: ReplicaOutcome): AttemptVerdict {
  switch (outcome) {
    case 'ok':
    case 'unparsable':
      return 'success';
    case 'timeout':
    case 'connection':
    case 'http_5xx':
    case 'http_503':
      return 'failure';
    case 'http_429':
    case 'http_4xx':
    case 'deadline':
    case 'aborted':
      return 'neutral';
  }
}
