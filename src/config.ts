/**
 * The only reader of `process.env`. `loadConfig` validates the environment once at start-up and returns a
 * frozen, typed value that is passed down; nothing else reads the environment.
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';

import { BackendSettings, loadRoutingFile, type RoutingFile } from './settings/routing-file.js';

const int = (min: number, max = Number.MAX_SAFE_INTEGER) => z.coerce.number().int().min(min).max(max);

/** Environment variables, their defaults and units. README `configuration` lists the same table. */
const Env = z
  .object({
    PORT: int(0, 65_535).default(8080),
    HOST: z.string().min(1).default('127.0.0.1'),
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    JUDGE_BASE_URL: z.url().optional(),
    JUDGE_API_KEY: z.string().optional(),
    JUDGE_MODEL: z.string().min(1).optional(),
    JUDGE_TIMEOUT_MS: int(1).default(30_000),
    JUDGE_MAX_RETRIES: int(0, 10).default(3),
    JUDGE_MAX_INFLIGHT: int(1).default(256),
    JUDGE_RPM: int(1).optional(),
    JUDGE_TPM: int(1).optional(),
    JUDGE_RESPONSE_FORMAT: z.enum(['json_schema', 'json_object']).default('json_schema'),
    REWARD_CONFIG: z.string().min(1).optional(),
    REWARD_API_KEY: z.string().min(1).optional(),
    METRICS_PUBLIC: z.stringbool().default(false),
    DEFAULT_GRAPH: z.string().min(1).default('default'),
    REQUEST_DEADLINE_MS: int(1).default(110_000),
    MAX_QUEUE: int(0).default(4096),
    MAX_CONCURRENT_JUDGMENTS: int(1).default(512),
    CACHE_SIZE: int(0).default(10_000),
    MAX_CANDIDATES: int(1).default(1024),
    MIN_CANDIDATE_CHARS: int(0).default(20),
    MAX_CANDIDATE_CHARS: int(1).default(8000),
    BODY_LIMIT_BYTES: int(1024).default(8_388_608),
    FAILURE_REWARD: z.coerce.number().finite().optional(),
    TRANSCRIPTS_PATH: z.string().min(1).optional(),
    SHUTDOWN_GRACE_MS: int(0).default(30_000),
    RECENT_WINDOW: int(1).default(512),
  })
  .superRefine((env, ctx) => {
    if (env.JUDGE_BASE_URL !== undefined && env.JUDGE_MODEL === undefined) {
      ctx.addIssue({ code: 'custom', path: ['JUDGE_MODEL'], message: 'required when JUDGE_BASE_URL is set' });
    }
    if (env.MIN_CANDIDATE_CHARS > env.MAX_CANDIDATE_CHARS) {
      ctx.addIssue({
        code: 'custom',
        path: ['MIN_CANDIDATE_CHARS'],
        message: 'must not exceed MAX_CANDIDATE_CHARS',
      });
    }
  });

export interface Config {
  port: number;
  host: string;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** Spread into `createRouter({ ...config.judge, offline: createOfflineBackend })`. */
  judge: { default: BackendSettings | 'offline'; file?: RoutingFile | undefined };
  /** Bearer token required on every route but /healthz (and /metrics when `metricsPublic`). */
  apiKey?: string | undefined;
  metricsPublic: boolean;
  defaultGraph: string;
  /** Per request, ms: unfinished judgments come back `timeout` at this point. */
  requestDeadlineMs: number;
  /** Judgments that may wait for a run slot; beyond it a request is refused with 503. */
  maxQueue: number;
  /** Judgments running at once. */
  maxConcurrentJudgments: number;
  /** Completed judgments kept in the LRU (0 disables the cache; single-flight stays on). */
  cacheSize: number;
  /** Candidates per request (all groups of a batch together). */
  maxCandidates: number;
  candidateLimits: { minChars: number; maxChars: number };
  bodyLimitBytes: number;
  /** When set, trainer adapters answer this reward for failed judgments instead of 503. */
  failureReward?: number | undefined;
  transcriptsPath?: string | undefined;
  shutdownGraceMs: number;
  /** Completed judgments per graph behind `reward_recent_mean`. */
  recentWindow: number;
}

type EnvSource = Readonly<Record<string, string | undefined>>;

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

function readRoutingFile(path: string): RoutingFile {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new Error(
      `REWARD_CONFIG: cannot read ${path}: ${err instanceof Error ? err.message : String(err)}`,
      {
        cause: err,
      },
    );
  }
  return loadRoutingFile(json);
}

/**
 * Validates the environment. Empty values count as unset. Throws an Error naming every invalid variable.
 * Reads the routing file named by REWARD_CONFIG, if any.
 */
export function loadConfig(env: EnvSource = process.env): Config {
  const present: Record<string, string> = {};
  for (const [key, value] of Object.entries(env))
    if (value !== undefined && value !== '') present[key] = value;
  const parsed = Env.safeParse(present);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.') || '(env)'}: ${i.message}`);
    throw new Error(`invalid environment:\n${lines.join('\n')}`);
  }
  const e = parsed.data;

  let judgeDefault: BackendSettings | 'offline' = 'offline';
  if (e.JUDGE_BASE_URL !== undefined && e.JUDGE_MODEL !== undefined) {
    judgeDefault = BackendSettings.parse({
      base_url: e.JUDGE_BASE_URL,
      api_key: e.JUDGE_API_KEY ?? 'EMPTY',
      model: e.JUDGE_MODEL,
      timeout_ms: e.JUDGE_TIMEOUT_MS,
      max_retries: e.JUDGE_MAX_RETRIES,
      max_inflight: e.JUDGE_MAX_INFLIGHT,
      rpm: e.JUDGE_RPM,
      tpm: e.JUDGE_TPM,
      response_format: e.JUDGE_RESPONSE_FORMAT,
    });
  }

  return deepFreeze({
    port: e.PORT,
    host: e.HOST,
    logLevel: e.LOG_LEVEL,
    judge: {
      default: judgeDefault,
      file: e.REWARD_CONFIG === undefined ? undefined : readRoutingFile(e.REWARD_CONFIG),
    },
    apiKey: e.REWARD_API_KEY,
    metricsPublic: e.METRICS_PUBLIC,
    defaultGraph: e.DEFAULT_GRAPH,
    requestDeadlineMs: e.REQUEST_DEADLINE_MS,
    maxQueue: e.MAX_QUEUE,
    maxConcurrentJudgments: e.MAX_CONCURRENT_JUDGMENTS,
    cacheSize: e.CACHE_SIZE,
    maxCandidates: e.MAX_CANDIDATES,
    candidateLimits: { minChars: e.MIN_CANDIDATE_CHARS, maxChars: e.MAX_CANDIDATE_CHARS },
    bodyLimitBytes: e.BODY_LIMIT_BYTES,
    failureReward: e.FAILURE_REWARD,
    transcriptsPath: e.TRANSCRIPTS_PATH,
    shutdownGraceMs: e.SHUTDOWN_GRACE_MS,
    recentWindow: e.RECENT_WINDOW,
  });
}
