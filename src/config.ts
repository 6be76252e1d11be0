/**
 * The only reader of `process.env`. `loadConfig` validates the environment once at start-up and returns a
 * frozen, typed value that is passed down; nothing else reads the environment.
 *
 * One zod schema per setting group, each with its variables' defaults and a transform to the group's part
 * of `Config`; `Config` is their combined output. A leaf: it imports only the leaf settings modules (the
 * shared defaults and the routing-file schema) and the text library's reasoning-format names, never the
 * engine or the server. docs/configuration.md
 * lists the same variables (tested).
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { z } from 'zod';

import { BACKEND_DEFAULTS, CANDIDATE_LIMIT_DEFAULTS } from './settings/defaults.js';
import {
  BackendSettings,
  EnginePriority,
  InflightControl,
  loadRoutingFile,
  ReasoningEffort,
  ReplicaPolicy,
  ResponseFormat,
  type RoutingFile,
} from './settings/routing-file.js';
import { parseCanaryDataset, type CanaryRow } from './settings/canary-dataset.js';
import { DEFAULT_TENANT, parseKeysFile, type TenantKey } from './settings/keys-file.js';
import { parseCanaryReference, type CanaryReference } from './settings/canary-reference.js';
import { REASONING_FORMATS, type MarkerPair } from './text/reasoning-formats.js';

/**
 * A decimal integer, written plainly: `' '`, `0x10`, `1e3`, `+5`, `1_000` or `12abc` are refused (coercion
 * would turn a blank into 0 and a hex value into a surprise).
 */
const int = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  z
    .string()
    .regex(/^-?[0-9]+$/, { error: 'must be a decimal integer (digits only, no spaces)' })
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));

/**
 * REASONING_MARKERS: `<open>,<close>` (several pairs separated by `;`), each marker non-empty and without
 * surrounding spaces; anything else is a start-up error.
 */
function markerPairs(value: string | undefined, ctx: z.RefinementCtx): MarkerPair[] | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  const pairs: MarkerPair[] = [];
  for (const part of value.split(';')) {
    const [open, close, ...rest] = part.split(',').map((m) => m.trim());
    if (open === undefined || close === undefined || open === '' || close === '' || rest.length > 0) {
      ctx.addIssue({ code: 'custom', message: `"${part}" is not <open>,<close> (two non-empty markers)` });
      return undefined;
    }
    pairs.push({ open, close });
  }
  return pairs;
}

/** A decimal number (`0`, `-1`, `0.5`, `.5`); blanks, hex, `Infinity` and exponents are refused. */
const decimal = () =>
  z
    .string()
    .regex(/^-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)$/, {
      error: 'must be a decimal number (e.g. 0, -1, 0.5; no spaces)',
    })
    .transform(Number)
    .pipe(z.number().finite());

/** Listening, auth and shutdown. */
const ServerEnv = z
  .object({
    PORT: int(0, 65_535).default(8080),
    HOST: z.string().min(1).default('127.0.0.1'),
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    REWARD_API_KEY: z.string().min(1).optional(),
    REWARD_KEYS: z.string().min(1).optional(),
    METRICS_PUBLIC: z.stringbool().default(false),
    BODY_LIMIT_BYTES: int(1024).default(8_388_608),
    SHUTDOWN_GRACE_MS: int(0).default(30_000),
    REQUEST_TIMEOUT_MS: int(0).default(30_000),
  })
  .transform((e, ctx) => ({
    port: e.PORT,
    host: e.HOST,
    logLevel: e.LOG_LEVEL,
    /** Bearer token required on every route but /healthz (and /metrics when `metricsPublic`). */
    apiKey: e.REWARD_API_KEY,
    /** The keys file (tenants with scopes, weights, limits), read and validated at start-up; reloaded. */
    keys: e.REWARD_KEYS === undefined ? undefined : loadKeys(e.REWARD_KEYS, e.REWARD_API_KEY, ctx),
    metricsPublic: e.METRICS_PUBLIC,
    bodyLimitBytes: e.BODY_LIMIT_BYTES,
    shutdownGraceMs: e.SHUTDOWN_GRACE_MS,
    /** Headers and body must have arrived this long after the connection's request started (0 = off). */
    requestTimeoutMs: e.REQUEST_TIMEOUT_MS,
  }));

/** Hex SHA-256 of a bearer key: what the keys file holds (`npm run keys -- hash`). */
export const hashKey = (key: string): string => createHash('sha256').update(key, 'utf8').digest('hex');

/**
 * Reads and validates the keys file (REWARD_KEYS) at `path`, and checks it against REWARD_API_KEY
 * (`apiKey`), which is the tenant `default`: neither its name nor its key may appear in the file. Throws an
 * Error that says why (never quoting a key). What start-up and every reload run.
 */
export function readKeysFile(path: string, apiKey: string | undefined): TenantKey[] {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new Error(`cannot read ${path}: ${err instanceof Error ? err.message : String(err)}`, {
      cause: err,
    });
  }
  const keys = parseKeysFile(json);
  if (apiKey !== undefined) {
    const apiHash = hashKey(apiKey);
    for (const k of keys) {
      if (k.name === DEFAULT_TENANT)
        throw new Error(`"${DEFAULT_TENANT}" is the tenant of REWARD_API_KEY: name this key otherwise`);
      if (k.sha256 === apiHash) throw new Error(`key "${k.name}" is REWARD_API_KEY itself`);
    }
  }
  return keys;
}

function loadKeys(
  path: string,
  apiKey: string | undefined,
  ctx: z.RefinementCtx,
): { path: string; entries: TenantKey[] } | undefined {
  try {
    return { path, entries: readKeysFile(path, apiKey) };
  } catch (err) {
    ctx.addIssue({
      code: 'custom',
      path: ['REWARD_KEYS'],
      message: err instanceof Error ? err.message : String(err),
    });
    return undefined;
  }
}

function readRoutingFile(path: string, ctx: z.RefinementCtx): RoutingFile | undefined {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    ctx.addIssue({
      code: 'custom',
      path: ['REWARD_CONFIG'],
      message: `cannot read ${path}: ${err instanceof Error ? err.message : String(err)}`,
    });
    return undefined;
  }
  try {
    return loadRoutingFile(json);
  } catch (err) {
    ctx.addIssue({
      code: 'custom',
      path: ['REWARD_CONFIG'],
      message: err instanceof Error ? err.message : String(err),
    });
    return undefined;
  }
}

/** JUDGE_REASONING_EFFORT is the effort of every routing-file backend that names none itself. */
function withDefaultEffort(
  file: RoutingFile | undefined,
  effort: ReasoningEffort | undefined,
): RoutingFile | undefined {
  if (file === undefined || effort === undefined) return file;
  const backends = Object.fromEntries(
    Object.entries(file.backends).map(([name, b]) => [
      name,
      { ...b, reasoning_effort: b.reasoning_effort ?? effort },
    ]),
  );
  return { ...file, backends };
}

/** The default judge backend (offline unless JUDGE_BASE_URL is set) and the routing file. */
const JudgeEnv = z
  .object({
    /** One URL, or a comma-separated list of replicas of the same model. */
    JUDGE_BASE_URL: z
      .string()
      .transform((v) =>
        v
          .split(',')
          .map((u) => u.trim())
          .filter((u) => u !== ''),
      )
      .pipe(z.array(z.url()).min(1))
      .optional(),
    JUDGE_API_KEY: z.string().optional(),
    JUDGE_MODEL: z.string().min(1).optional(),
    JUDGE_TIMEOUT_MS: int(1).default(BACKEND_DEFAULTS.timeoutMs),
    JUDGE_MAX_RETRIES: int(0, 10).default(BACKEND_DEFAULTS.maxRetries),
    JUDGE_MAX_INFLIGHT: int(1).default(BACKEND_DEFAULTS.maxInflight),
    JUDGE_RPM: int(1).optional(),
    JUDGE_TPM: int(1).optional(),
    JUDGE_RESPONSE_FORMAT: ResponseFormat.default(BACKEND_DEFAULTS.responseFormat),
    JUDGE_ADAPTIVE_INFLIGHT: z.stringbool().default(BACKEND_DEFAULTS.adaptiveInflight),
    JUDGE_INFLIGHT_CONTROL: InflightControl.optional(),
    /** `auto`, `off`, or a comma-separated list of metrics URLs, one per replica. */
    JUDGE_ENGINE_METRICS: z
      .string()
      .transform((v): 'auto' | 'off' | string[] => {
        const t = v.trim();
        if (t === 'auto' || t === 'off') return t;
        return t
          .split(',')
          .map((u) => u.trim())
          .filter((u) => u !== '');
      })
      .default(BACKEND_DEFAULTS.engineMetrics),
    JUDGE_ENGINE_METRICS_INTERVAL_MS: int(10, 60_000).default(BACKEND_DEFAULTS.engineMetricsIntervalMs),
    JUDGE_ENGINE_PRIORITY: EnginePriority.default(BACKEND_DEFAULTS.enginePriority),
    JUDGE_REPLICA_POLICY: ReplicaPolicy.default(BACKEND_DEFAULTS.replicaPolicy),
    JUDGE_PREFIX_STAGGER_MS: int(0, 10_000).default(BACKEND_DEFAULTS.prefixStaggerMs),
    JUDGE_ROUTING_KEY_HEADER: z.string().min(1).default(BACKEND_DEFAULTS.routingKeyHeader),
    JUDGE_CONTEXT_TOKENS: int(256).optional(),
    JUDGE_RETRY_BUDGET: decimal().pipe(z.number().min(0).max(1)).default(BACKEND_DEFAULTS.retryBudget),
    JUDGE_SCHEMA_REPROBE_MS: int(1).default(BACKEND_DEFAULTS.schemaReprobeMs),
    /** `reasoning_effort` of every backend that sets none itself (routing file: per backend, role, node). */
    JUDGE_REASONING_EFFORT: ReasoningEffort.optional(),
    /** A JSON object merged into every request to the JUDGE_BASE_URL backend (engine fields). */
    JUDGE_EXTRA_BODY: z
      .string()
      .transform((v, ctx): unknown => {
        try {
          return JSON.parse(v);
        } catch {
          ctx.addIssue({ code: 'custom', message: 'not JSON: a JSON object such as {"top_k": 20}' });
          return z.NEVER;
        }
      })
      .pipe(z.record(z.string(), z.unknown(), 'must be a JSON object such as {"top_k": 20}'))
      .optional(),
    REWARD_CONFIG: z.string().min(1).optional(),
  })
  .superRefine((env, ctx) => {
    if (env.JUDGE_BASE_URL !== undefined && env.JUDGE_MODEL === undefined) {
      ctx.addIssue({ code: 'custom', path: ['JUDGE_MODEL'], message: 'required when JUDGE_BASE_URL is set' });
    }
    // A model with nowhere to send it would silently run the offline heuristic instead of the judge.
    if (env.JUDGE_MODEL !== undefined && env.JUDGE_BASE_URL === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['JUDGE_BASE_URL'],
        message: 'required when JUDGE_MODEL is set (without it the server would run the offline backend)',
      });
    }
    if (env.JUDGE_EXTRA_BODY !== undefined && env.JUDGE_BASE_URL === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['JUDGE_EXTRA_BODY'],
        message:
          'applies to the JUDGE_BASE_URL backend, and none is set (routing-file backends take extra_body)',
      });
    }
  })
  .transform((e, ctx) => {
    let judgeDefault: BackendSettings | 'offline' = 'offline';
    if (e.JUDGE_BASE_URL !== undefined && e.JUDGE_MODEL !== undefined) {
      const urls = e.JUDGE_BASE_URL;
      const parsed = BackendSettings.safeParse({
        ...(urls.length === 1 ? { base_url: urls[0] } : { base_urls: urls }),
        api_key: e.JUDGE_API_KEY ?? BACKEND_DEFAULTS.apiKey,
        model: e.JUDGE_MODEL,
        timeout_ms: e.JUDGE_TIMEOUT_MS,
        max_retries: e.JUDGE_MAX_RETRIES,
        max_inflight: e.JUDGE_MAX_INFLIGHT,
        rpm: e.JUDGE_RPM,
        tpm: e.JUDGE_TPM,
        response_format: e.JUDGE_RESPONSE_FORMAT,
        adaptive_inflight: e.JUDGE_ADAPTIVE_INFLIGHT,
        inflight_control: e.JUDGE_INFLIGHT_CONTROL,
        engine_metrics: e.JUDGE_ENGINE_METRICS,
        engine_metrics_interval_ms: e.JUDGE_ENGINE_METRICS_INTERVAL_MS,
        engine_priority: e.JUDGE_ENGINE_PRIORITY,
        replica_policy: e.JUDGE_REPLICA_POLICY,
        prefix_stagger_ms: e.JUDGE_PREFIX_STAGGER_MS,
        routing_key_header: e.JUDGE_ROUTING_KEY_HEADER,
        context_tokens: e.JUDGE_CONTEXT_TOKENS,
        retry_budget: e.JUDGE_RETRY_BUDGET,
        schema_reprobe_ms: e.JUDGE_SCHEMA_REPROBE_MS,
        reasoning_effort: e.JUDGE_REASONING_EFFORT,
        extra_body: e.JUDGE_EXTRA_BODY,
      });
      if (parsed.success) judgeDefault = parsed.data;
      else {
        for (const issue of parsed.error.issues) {
          const field =
            issue.path[0] === 'extra_body'
              ? 'JUDGE_EXTRA_BODY'
              : issue.path[0] === 'routing_key_header'
                ? 'JUDGE_ROUTING_KEY_HEADER'
                : issue.path[0] === 'engine_metrics'
                  ? 'JUDGE_ENGINE_METRICS'
                  : issue.path[0] === 'adaptive_inflight'
                    ? 'JUDGE_ADAPTIVE_INFLIGHT'
                    : 'JUDGE_BASE_URL';
          ctx.addIssue({ code: 'custom', path: [field], message: issue.message });
        }
      }
    }
    const read = e.REWARD_CONFIG === undefined ? undefined : readRoutingFile(e.REWARD_CONFIG, ctx);
    const file = withDefaultEffort(read, e.JUDGE_REASONING_EFFORT);
    /** Spread into `createRouter({ ...config.judge, offline: createOfflineBackend })`. */
    const judge: { default: BackendSettings | 'offline'; file?: RoutingFile | undefined } = {
      default: judgeDefault,
      file,
    };
    return { judge };
  });

/** What a request may ask for and how long it may take. */
const RequestEnv = z
  .object({
    DEFAULT_GRAPH: z.string().min(1).default('default'),
    REQUEST_DEADLINE_MS: int(1).default(110_000),
    MAX_CANDIDATES: int(1).default(1024),
    MAX_RANK_CALLS: int(1).default(4096),
    MIN_CANDIDATE_CHARS: int(0).default(CANDIDATE_LIMIT_DEFAULTS.minChars),
    MAX_CANDIDATE_CHARS: int(1).default(CANDIDATE_LIMIT_DEFAULTS.maxChars),
    FAILURE_REWARD: decimal().optional(),
    GET_REWARD_HOLD_MS: int(0).default(170_000),
    MAX_GROUND_TRUTH_CHARS: int(1).default(20_000),
    MAX_QUESTION_CHARS: int(1).default(8_000),
    ALLOW_INLINE_GRAPHS: z.stringbool().default(false),
    INLINE_MAX_CALLS: int(1).default(12),
    INLINE_MAX_ROUNDS: int(1, 5).default(3),
    INLINE_MAX_TOKENS: int(16).default(2048),
    REASONING_FORMAT: z.enum(REASONING_FORMATS).default('auto'),
    REASONING_MARKERS: z.string().optional().transform(markerPairs),
  })
  .superRefine((env, ctx) => {
    if (env.MIN_CANDIDATE_CHARS > env.MAX_CANDIDATE_CHARS) {
      ctx.addIssue({
        code: 'custom',
        path: ['MIN_CANDIDATE_CHARS'],
        message: 'must not exceed MAX_CANDIDATE_CHARS',
      });
    }
  })
  .transform((e) => ({
    defaultGraph: e.DEFAULT_GRAPH,
    /** Per request, ms: unfinished judgments come back `timeout` at this point. */
    requestDeadlineMs: e.REQUEST_DEADLINE_MS,
    /** Candidates per request (all groups of a batch together). */
    maxCandidates: e.MAX_CANDIDATES,
    /** LLM calls a ranking request's schedule may plan (pairs × 2 orders × judges); beyond it 400. */
    maxRankCalls: e.MAX_RANK_CALLS,
    candidateLimits: { minChars: e.MIN_CANDIDATE_CHARS, maxChars: e.MAX_CANDIDATE_CHARS },
    /** When set, trainer adapters answer this reward for failed judgments instead of 503. */
    failureReward: e.FAILURE_REWARD,
    /**
     * `/get_reward`: how long after its arrival a request may be answered, ms (OpenRLHF's client waits
     * 180 s per attempt, then retries 5 times 1 s apart): work that does not fit REQUEST_DEADLINE_MS but
     * fits this is held (admitted with its deadline moved here) instead of refused. 0 = off.
     */
    getRewardHoldMs: e.GET_REWARD_HOLD_MS,
    /** Per request field, characters: a longer ground truth or question is a 400 naming the field. */
    textLimits: { maxGroundTruthChars: e.MAX_GROUND_TRUTH_CHARS, maxQuestionChars: e.MAX_QUESTION_CHARS },
    /** Inline graph specs in request bodies: off by default; when on, within these limits. */
    inlineGraphs: {
      allowed: e.ALLOW_INLINE_GRAPHS,
      maxCalls: e.INLINE_MAX_CALLS,
      maxRounds: e.INLINE_MAX_ROUNDS,
      maxTokens: e.INLINE_MAX_TOKENS,
    },
    /**
     * Where a candidate's reasoning trace ends and its answer starts (src/text/reasoning.ts): the
     * REASONING_FORMAT name, with REASONING_MARKERS' pair added when set.
     */
    reasoningFormat:
      e.REASONING_MARKERS === undefined
        ? e.REASONING_FORMAT
        : { format: e.REASONING_FORMAT, markers: e.REASONING_MARKERS },
  }));

/** How much judging runs and waits at once, and what is kept. */
const CapacityEnv = z
  .object({
    MAX_QUEUED_JUDGMENTS: int(0).default(32_768),
    MAX_CONCURRENT_JUDGMENTS: int(1).default(512),
    CACHE_SIZE: int(0).default(10_000),
    IDEMPOTENCY_WINDOW_MS: int(0).default(600_000),
    IDEMPOTENCY_LINGER_MS: int(0).default(30_000),
    // Removed: refused with a message rather than silently reinterpreted (an old small value would bring
    // back refusals of work that fits the deadline).
    MAX_QUEUE: z.string().optional(),
    // Operator controls (issue 21): the priority lane and the token budget.
    HIGH_PRIORITY_SHARE: decimal().pipe(z.number().min(0).max(1)).default(0.1),
    // Tenants (issue 30): fair queuing between the keys of REWARD_KEYS, and whether they share judgments.
    FAIR_QUEUING: z.stringbool().default(true),
    CACHE_SCOPE: z.enum(['shared', 'tenant']).default('shared'),
    JUDGE_TOKEN_BUDGET: int(1).optional(),
    JUDGE_BUDGET_WINDOW_S: int(1).default(86_400),
    CACHED_TOKEN_WEIGHT: decimal().pipe(z.number().min(0).max(1)).default(1),
  })
  .superRefine((env, ctx) => {
    if (env.MAX_QUEUE !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['MAX_QUEUE'],
        message:
          'no longer supported: admission is by predicted completion within REQUEST_DEADLINE_MS; the queue ' +
          'is bounded by memory with MAX_QUEUED_JUDGMENTS (default 32768). Unset MAX_QUEUE',
      });
    }
  })
  .transform((e) => ({
    /** Judgments admitted and waiting for a run slot (the memory bound; admission is by deadline). */
    maxQueuedJudgments: e.MAX_QUEUED_JUDGMENTS,
    /** Judgments running at once. */
    maxConcurrentJudgments: e.MAX_CONCURRENT_JUDGMENTS,
    /** Completed judgments kept in the LRU (0 disables the cache; single-flight stays on). */
    cacheSize: e.CACHE_SIZE,
    /** A request id's completed judgments are replayed to a retry within this window, ms. */
    idempotencyWindowMs: e.IDEMPOTENCY_WINDOW_MS,
    /** A request with an id whose client left keeps its judgments running this long for a retry, ms. */
    idempotencyLingerMs: e.IDEMPOTENCY_LINGER_MS,
    /** Share of the drain rate the high-priority lane may use (its own admission budget). */
    highPriorityShare: e.HIGH_PRIORITY_SHARE,
    /** Run slots and backend slots shared between tenants by weight; false = first come, first served. */
    fairQueuing: e.FAIR_QUEUING,
    /** `tenant`: no judgment (cache, single-flight, shared tier) is shared between tenants. */
    cacheScope: e.CACHE_SCOPE,
    /** CACHED_TOKEN_WEIGHT, also for the tenants' budgets and spend (REWARD_KEYS). */
    cachedTokenWeight: e.CACHED_TOKEN_WEIGHT,
    /**
     * Judge tokens (prompt + completion as the backends report them, cached prompt tokens × `cachedWeight`)
     * per fixed window of `windowS` seconds (epoch-aligned); undefined = no budget.
     */
    tokenBudget:
      e.JUDGE_TOKEN_BUDGET === undefined
        ? undefined
        : {
            tokens: e.JUDGE_TOKEN_BUDGET,
            windowS: e.JUDGE_BUDGET_WINDOW_S,
            cachedWeight: e.CACHED_TOKEN_WEIGHT,
          },
  }));

/** What the server records about its judgments. */
const RecordsEnv = z
  .object({
    TRANSCRIPTS_PATH: z.string().min(1).optional(),
    RECENT_WINDOW: int(1).default(512),
    FAILURE_WARN_RATE: decimal().pipe(z.number().min(0).max(1)).default(0.05),
    FAILURE_WARN_INTERVAL_MS: int(1000).default(60_000),
  })
  .transform((e) => ({
    transcriptsPath: e.TRANSCRIPTS_PATH,
    /** Completed judgments per graph behind `reward_recent_mean`. */
    recentWindow: e.RECENT_WINDOW,
    /** A warning is logged when this fraction of judgments over an interval fail or time out. */
    failureWarnRate: e.FAILURE_WARN_RATE,
    /** The failure warning's interval (and rate limit: at most one warning per interval), ms. */
    failureWarnIntervalMs: e.FAILURE_WARN_INTERVAL_MS,
  }));

/** Scale-out: worker processes on one port, and state shared with other processes through Redis. */
const ScaleEnv = z
  .object({
    WORKERS: z.union([z.literal('auto'), int(1, 256)]).default(1),
    REDIS_URL: z.url({ protocol: /^rediss?$/ }).optional(),
    REDIS_PREFIX: z.string().min(1).max(64).default('reward:'),
    REDIS_CACHE_TTL_MS: int(1000).default(86_400_000),
    REDIS_LEASE_MS: int(100).default(15_000),
    REDIS_TIMEOUT_MS: int(10).default(1000),
  })
  .transform((e) => ({
    /** Worker processes on the one port (`auto` = the machine's cores); 1 = no primary process. */
    workers: e.WORKERS,
    /** Shared state; undefined = local (one process). */
    redis:
      e.REDIS_URL === undefined
        ? undefined
        : {
            url: e.REDIS_URL,
            /** Key namespace (deployments sharing one Redis pick different ones). */
            prefix: e.REDIS_PREFIX,
            /** A single-flight lease not renewed for this long expires (its holder died), ms. */
            leaseMs: e.REDIS_LEASE_MS,
            /** Per Redis command, ms; past it local state answers. */
            timeoutMs: e.REDIS_TIMEOUT_MS,
          },
    /** How long a judgment stays in the shared cache, ms (only with `redis`). */
    sharedCacheTtlMs: e.REDIS_CACHE_TTL_MS,
  }));

function readCanaryDataset(path: string, ctx: z.RefinementCtx): CanaryRow[] | undefined {
  try {
    return parseCanaryDataset(readFileSync(path, 'utf8'), path);
  } catch (err) {
    ctx.addIssue({
      code: 'custom',
      path: ['CANARY_DATASET'],
      message: err instanceof Error ? err.message : String(err),
    });
    return undefined;
  }
}

function readCanaryReference(
  path: string,
  rows: readonly CanaryRow[] | undefined,
  ctx: z.RefinementCtx,
): CanaryReference | undefined {
  const fail = (message: string): undefined => {
    ctx.addIssue({ code: 'custom', path: ['CANARY_REFERENCE'], message });
    return undefined;
  };
  if (rows === undefined) return fail('needs CANARY_DATASET (the canary set it measured)');
  try {
    return parseCanaryReference(
      readFileSync(path, 'utf8'),
      path,
      rows.map((r) => r.id),
    );
  } catch (err) {
    return fail(err instanceof Error ? err.message : String(err));
  }
}

/** Reward integrity during a run: canaries, quarantine, audits, drift (docs/integrity.md). */
const IntegrityEnv = z
  .object({
    CANARY_DATASET: z.string().min(1).optional(),
    CANARY_RATE: decimal().pipe(z.number().min(0).max(1)).optional(),
    CANARY_MARGIN: decimal().pipe(z.number().gt(0).max(0.9)).default(0.2),
    CANARY_THRESHOLD: decimal().pipe(z.number().gt(0)).default(10),
    CANARY_ERROR_FLOOR: decimal().pipe(z.number().gt(0).max(0.5)).default(0.05),
    CANARY_WINDOW: int(10).default(200),
    CANARY_MAX_INFLIGHT: int(1).default(4),
    CANARY_REFERENCE: z.string().min(1).optional(),
    CANARY_REFERENCE_SIZE: int(10).default(400),
    CANARY_FLEET_THRESHOLD: decimal().pipe(z.number().gt(0)).default(9),
    CANARY_BOOST: decimal().pipe(z.number().min(1).max(10)).default(3),
    AUDIT_RATE: decimal().pipe(z.number().min(0).max(1)).default(0),
    AUDIT_GRAPH: z.string().min(1).optional(),
    AUDIT_MAX_INFLIGHT: int(1).default(4),
    DRIFT_WINDOW: int(10).default(1000),
  })
  .transform((e, ctx) => {
    /** Labelled canary rows (CANARY_DATASET, read and validated at start-up); undefined = no canaries. */
    const canaries = e.CANARY_DATASET === undefined ? undefined : readCanaryDataset(e.CANARY_DATASET, ctx);
    return {
      integrity: {
        canaries,
        /** Canaries per computed real judgment (0.02 with a dataset unless set; 0 without one). */
        canaryRate: e.CANARY_DATASET === undefined ? 0 : (e.CANARY_RATE ?? 0.02),
        /** Ceiling of the canary rate while a replica or the fleet is under doubt: CANARY_BOOST × the rate. */
        canaryBoost: e.CANARY_BOOST,
        /** The sequential test: accuracy drop to detect, CUSUM threshold h, lowest reference error. */
        test: { margin: e.CANARY_MARGIN, threshold: e.CANARY_THRESHOLD, floor: e.CANARY_ERROR_FLOOR },
        /**
         * The fleet-level test on pooled canaries: its threshold, and its reference (CANARY_REFERENCE, read
         * at start-up and fitted to the canary rows; undefined = the first `referenceSize` canaries, frozen).
         */
        fleet: {
          threshold: e.CANARY_FLEET_THRESHOLD,
          reference:
            e.CANARY_REFERENCE === undefined
              ? undefined
              : readCanaryReference(e.CANARY_REFERENCE, canaries, ctx),
          referenceSize: e.CANARY_REFERENCE_SIZE,
        },
        /** Canaries per replica behind a replica's reference: its peers' recent canaries. */
        window: e.CANARY_WINDOW,
        /** Canaries running at once (more are skipped and counted). */
        canaryMaxInflight: e.CANARY_MAX_INFLIGHT,
        /** Share of computed real judgments judged again in the background. */
        auditRate: e.AUDIT_RATE,
        /** The auditing graph; undefined = the judged graph, on another replica when there is one. */
        auditGraph: e.AUDIT_GRAPH,
        auditMaxInflight: e.AUDIT_MAX_INFLIGHT,
        /** Computed judgments per graph behind the drift gauges. */
        driftWindow: e.DRIFT_WINDOW,
      },
    };
  });

export type Config = z.output<typeof ServerEnv> &
  z.output<typeof JudgeEnv> &
  z.output<typeof RequestEnv> &
  z.output<typeof CapacityEnv> &
  z.output<typeof RecordsEnv> &
  z.output<typeof ScaleEnv> &
  z.output<typeof IntegrityEnv>;

/**
 * Every variable the server reads, by name, with its schema (and so its default). docs/configuration.md
 * lists the same variables with these defaults; a test keeps them in sync.
 */
export const ENV_VARIABLES = Object.freeze({
  ...ServerEnv.in.shape,
  ...JudgeEnv.in.shape,
  ...RequestEnv.in.shape,
  ...CapacityEnv.in.shape,
  ...RecordsEnv.in.shape,
  ...ScaleEnv.in.shape,
  ...IntegrityEnv.in.shape,
});

type EnvSource = Readonly<Record<string, string | undefined>>;

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

/**
 * Validates the environment. Empty values count as unset. Throws an Error naming every invalid variable
 * (of every group). Reads the routing file named by REWARD_CONFIG, if any.
 */
export function loadConfig(env: EnvSource = process.env): Config {
  const present: Record<string, string> = {};
  for (const [key, value] of Object.entries(env))
    if (value !== undefined && value !== '') present[key] = value;
  const server = ServerEnv.safeParse(present);
  const judge = JudgeEnv.safeParse(present);
  const request = RequestEnv.safeParse(present);
  const capacity = CapacityEnv.safeParse(present);
  const records = RecordsEnv.safeParse(present);
  const scale = ScaleEnv.safeParse(present);
  const integrity = IntegrityEnv.safeParse(present);
  if (
    !server.success ||
    !judge.success ||
    !request.success ||
    !capacity.success ||
    !records.success ||
    !scale.success ||
    !integrity.success
  ) {
    const issues = [server, judge, request, capacity, records, scale, integrity].flatMap(
      (r) => r.error?.issues ?? [],
    );
    const lines = issues.map((i) => `  ${i.path.join('.') || '(env)'}: ${i.message}`);
    throw new Error(`invalid environment:\n${lines.join('\n')}`);
  }
  return deepFreeze({
    ...server.data,
    ...judge.data,
    ...request.data,
    ...capacity.data,
    ...records.data,
    ...scale.data,
    ...integrity.data,
  });
}
