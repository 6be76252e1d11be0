/**
 * The OpenAI-compatible chat-completions backend: the only code that calls an LLM over HTTP. This file
 * wires its parts; each part is its own module:
 * - openai-call.ts: one call across its attempts (retries, budget, pick, stagger, slot, RPM/TPM buckets);
 * - openai-attempt.ts: one attempt (HTTP exchange, request body and engine priority, timer and abort);
 * - format-negotiation.ts: the attempt's response format (json_schema / json_object probes, re-probes);
 * - openai-replica.ts: one replica (pool, in-flight limit and control, breaker) and the open-circuit wait;
 * - openai-errors.ts: failures (AttemptError, retry classification, RewardError mapping, replica outcome);
 * - openai-wire.ts: the wire format.
 *
 * Transport: undici `Pool.request` (keep-alive pool sized to `max_inflight`) with the openai SDK's wire
 * types. Measured with bench/transport.ts (2 vCPU, Node 20, 64 concurrent calls against the fake), the SDK
 * path (global fetch, or undici fetch + Agent) costs ~0.6–0.9 ms of client CPU per call against ~0.1–0.2 ms
 * for raw undici; this server makes thousands of judge calls per second, so the hot path stays on undici.
 * Retries, rate limits and the deadline are ours (`retry.ts`, `limiter.ts`); the SDK's are not used.
 */
import { replicaUrls, type BackendSettings } from '../../settings/routing-file.js';
import { BACKEND_DEFAULTS } from '../../settings/defaults.js';
import { createRateBuckets } from '../limiter.js';
import { createReplicaPicker, type BreakerOptions } from '../replicas.js';
import { createRetryBudget, DEFAULT_RETRY_POLICY, type RetryPolicy, type Sleep } from '../retry.js';
import type { BucketStore } from '../../state/types.js';
import { createPrefixStagger } from '../stagger.js';
import type { Backend } from '../types.js';
import { completeCall, type BackendParts } from './openai-call.js';
import { allSaturated, closeReplica, createReplica, pingReplica, snapshotOf } from './openai-replica.js';
import { createBackendDialect, type BackendDialect, type RequestDialectSwitch } from './request-dialect.js';
import { createReplicaFormat, type ResponseFormatSwitch } from './response-format.js';

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
  /**
   * Told once per backend, at the first reply whose reasoning trace came inline in the content: the engine
   * runs without a reasoning parser (see INLINE_TRACE_ADVICE).
   */
  onInlineReasoning?: ((event: InlineReasoning) => void) | undefined;
  /**
   * Told once per switch of the backend's request dialect (max_tokens → max_completion_tokens, sampling
   * values dropped) on a 400 that names the field (request-dialect.ts), with the evidence.
   */
  onRequestDialectSwitch?: ((event: RequestDialectSwitch) => void) | undefined;
}

/** The first reply of a backend with its trace inline in the content. */
export interface InlineReasoning {
  backend: string;
  model: string;
  replica: string | undefined;
}

/** What the run-time warning about inline traces says (docs/backends.md, "Reasoning judges"). */
export const INLINE_TRACE_ADVICE =
  'judge reasoning traces arrive inline in the content: the engine runs without a reasoning parser. ' +
  'Start vLLM or SGLang with --reasoning-parser (openai_gptoss | qwen3 | deepseek_r1 | …; SGLang: gpt-oss, ' +
  'qwen3, deepseek-r1), llama.cpp with --reasoning-format deepseek: without one the JSON-schema grammar ' +
  'applies from the first token, so such a model cannot think at all';

/** Models whose dialect one backend remembers (node models come from graphs, some client-chosen). */
const MAX_DIALECT_MODELS = 64;

/** The longest open circuit a call waits for: the breaker's first open period (replicas.ts' default). */
const MAX_CIRCUIT_WAIT_MS = 5_000;

/**
 * RPM / TPM: the provider's limits on the whole backend, not per replica. In-process, or shared through
 * Redis by every worker and replica configured with this backend (the same name and endpoints).
 */
function backendBuckets(
  name: string,
  urls: readonly string[],
  settings: BackendSettings,
  options: OpenAICompatibleBackendOptions,
): ReturnType<typeof createRateBuckets> {
  return createRateBuckets({
    rpm: settings.rpm,
    tpm: settings.tpm,
    sleep: options.sleep,
    now: options.now,
    buckets: options.buckets,
    bucketName: `${name}@${urls.join(',')}`,
  });
}

/**
 * An OpenAI-compatible backend. `complete` waits for a slot and rate-limit capacity, sends one
 * chat-completions request per attempt (per-attempt timeout = min(timeout_ms, deadline − now)), retries
 * 408/429/5xx/connection errors/timeouts with full-jitter backoff honouring Retry-After, and never
 * attempts or sleeps past `deadline`. Rejects with a RewardError: RW_JUDGE_TIMEOUT (timeouts, the deadline),
 * RW_CLIENT_ABORTED (the caller's abort — unless the abort reason is itself a RewardError, which is rethrown), RW_JUDGE_UNAVAILABLE
 * (statuses, connection errors; the status is in the message and `details`), RW_JUDGE_CONTEXT_OVERFLOW
 * (the prompt does not fit; not retried), RW_JUDGE_UNPARSABLE (no content). A deterministic 500 (same
 * error twice, no Retry-After) is not retried again, and retries stay within the backend's retry budget. A
 * replica that refuses the schema itself (see negotiateFormat) is switched to `json_object`, with the schema
 * appended to the system prompt, until a re-probe after `schema_reprobe_ms` is accepted.
 * Throws at once when the settings name no base URL.
 */
export function createOpenAICompatibleBackend(
  settings: BackendSettings,
  options: OpenAICompatibleBackendOptions = {},
): Backend {
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
  const headers = {
    'content-type': 'application/json',
    accept: 'application/json',
    authorization: `Bearer ${settings.api_key}`,
  };
  let staggered = 0;
  const dialects = new Map<string, BackendDialect>();
  /** Context per request: configured, else learned from an overflow error that named it. */
  let contextTokens = settings.context_tokens;
  const parts: BackendParts = {
    name,
    settings,
    replicas,
    picker: createReplicaPicker(
      replicas.map((r) => r.url),
      replicas,
      { policy: settings.replica_policy },
    ),
    // A first open period shortened by the options (tests) shortens the longest wait with it; never longer.
    maxCircuitWaitMs: Math.min(MAX_CIRCUIT_WAIT_MS, options.breaker?.openMs ?? MAX_CIRCUIT_WAIT_MS),
    stagger: createPrefixStagger(settings.prefix_stagger_ms),
    buckets: backendBuckets(name, urls, settings, options),
    budget: createRetryBudget({
      ratio: settings.retry_budget,
      // A call's deposit must outlive its attempt: a hang is retried timeout_ms after the call was counted,
      // and with a 10 s window a burst of calls that hung together found their deposits gone (issue 23).
      windowMs: Math.max(BACKEND_DEFAULTS.retryBudgetWindowMs, 2 * settings.timeout_ms),
      minPerWindow: BACKEND_DEFAULTS.retryBudgetMin,
      now: options.now,
    }),
    policy: { ...DEFAULT_RETRY_POLICY, ...options.backoff, maxRetries: settings.max_retries },
    random: options.random,
    sleep: options.sleep,
    attempt: {
      settings,
      headers,
      /** Errors whose json_object probe failed too (not about the schema): not probed again. Bounded. */
      probeFailed: new Set<string>(),
      onContextTokens: (tokens) => {
        contextTokens = tokens;
      },
      // One dialect per model of the backend (a node may name its own model): learned separately.
      dialect: (model) => {
        let dialect = dialects.get(model);
        if (dialect === undefined) {
          dialect = createBackendDialect({ backend: name, model, onSwitch: options.onRequestDialectSwitch });
          if (dialects.size < MAX_DIALECT_MODELS) dialects.set(model, dialect);
        }
        return dialect;
      },
    },
    onStaggered: () => {
      staggered += 1;
    },
  };

  let inlineWarned = false;
  return {
    name,
    async complete(request, callOptions) {
      const reply = await completeCall(parts, request, callOptions);
      if (!inlineWarned && reply.reasoning?.source === 'inline') {
        inlineWarned = true;
        options.onInlineReasoning?.({ backend: name, model: request.model, replica: reply.replica });
      }
      return reply;
    },
    /** Reachable when any replica answers `GET /models`. */
    async ping(signal) {
      const answers = await Promise.all(
        replicas.map((r) => pingReplica(r, headers, settings.timeout_ms, signal)),
      );
      return answers.includes(true);
    },
    isSaturated: () => allSaturated(replicas),
    replicas: () => replicas.map((r) => snapshotOf(name, r)),
    setQuarantined(label, quarantined) {
      for (const r of replicas) if (r.label === label) r.quarantined = quarantined;
    },
    staggeredCalls: () => staggered,
    contextTokens: () => contextTokens,
    async close() {
      // Calls still in flight at close time would hold `close()` open; they are cut instead.
      await Promise.all(replicas.map(closeReplica));
    },
  };
}
