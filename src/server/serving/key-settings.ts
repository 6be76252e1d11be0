/**
 * Which configuration variables can change a judgment's outcome, and so must be in its key (src/judge/key.ts),
 * decided once per variable of src/config.ts: in the key (as a preparation setting, through the routes, or
 * through the graph's hash), or not, with the reason. The type lists every variable of `ENV_VARIABLES`, so
 * a new variable does not compile without a decision; `test/server/key-settings.test.ts` checks the table
 * against the schema and that every variable said to be in the key does change it.
 *
 * Not in the key, by rule: what only decides whether or when a judgment runs (deadlines, retries, capacity,
 * admission, budgets), how failures are answered (failures are never cached), where things are served or
 * recorded, and what is validated before a judgment exists (a refused request has no judgment to replay).
 */
import type { Config, ENV_VARIABLES } from '../../config.js';
import type { KeySettings } from '../../judge/key.js';

/** Whether a configuration variable is part of the judgment key, and through what. */
export type KeyDecision =
  /** A `KeySettings` field: how a candidate is prepared. */
  | { in: 'settings' }
  /** Every LLM node's route (backend, model, temperature, top_p, max_tokens, reasoning effort, extra body). */
  | { in: 'routes' }
  /** The hash of the graph the judgment ran. */
  | { in: 'graph' }
  | { in: 'none'; reason: string };

const none = (reason: string): KeyDecision => ({ in: 'none', reason });
const SERVING = none('how the server listens, authenticates or shuts down: no judgment depends on it');
const WHEN = none(
  'decides whether or when a judgment runs, never what it decides (failures are never cached)',
);
const CAPACITY = none('capacity and admission: how much runs at once, never what a judgment decides');
const RECORDS = none('what the server records about its judgments, after they are decided');
const SCALE = none('where state is shared: the key itself is what replicas agree on');
const INTEGRITY = none('canaries and audits run beside real work and never replace a served judgment');
const VALIDATION = none('request validation: a refused request has no judgment to replay');

/** Per configuration variable: in the key (and how), or why not. */
export const KEY_DECISIONS: { readonly [K in keyof typeof ENV_VARIABLES]: KeyDecision } = {
  PORT: SERVING,
  HOST: SERVING,
  LOG_LEVEL: SERVING,
  REWARD_API_KEY: SERVING,
  REWARD_KEYS: SERVING,
  FAIR_QUEUING: CAPACITY,
  CACHE_SCOPE: none(
    'who may reuse a judgment, never what it decides: with `tenant` the key is scoped by the tenant ' +
      '(serving/tenant-work.ts), so the same inputs give the same verdict in either scope',
  ),
  METRICS_PUBLIC: SERVING,
  BODY_LIMIT_BYTES: VALIDATION,
  SHUTDOWN_GRACE_MS: SERVING,
  REQUEST_TIMEOUT_MS: SERVING,
  JUDGE_BASE_URL: none(
    'where the judge model is served: replicas of one model share its judgments by design (DESIGN §10); ' +
      'the model itself is keyed through the routes (JUDGE_MODEL)',
  ),
  JUDGE_API_KEY: none('credentials of the same backend'),
  JUDGE_MODEL: { in: 'routes' },
  JUDGE_TIMEOUT_MS: WHEN,
  JUDGE_MAX_RETRIES: WHEN,
  JUDGE_MAX_INFLIGHT: CAPACITY,
  JUDGE_INFLIGHT_CONTROL: CAPACITY,
  JUDGE_ENGINE_METRICS: CAPACITY,
  JUDGE_ENGINE_METRICS_INTERVAL_MS: CAPACITY,
  // The engine's scheduling order of a call, never its sampling: what it decides is the same.
  JUDGE_ENGINE_PRIORITY: WHEN,
  JUDGE_RPM: CAPACITY,
  JUDGE_TPM: CAPACITY,
  JUDGE_RESPONSE_FORMAT: none(
    'how the same output schema is asked for on the wire (`auto` negotiates per backend at run time); ' +
      'every reply is validated against the same schema, the prompts and the model are keyed',
  ),
  JUDGE_ADAPTIVE_INFLIGHT: CAPACITY,
  JUDGE_REPLICA_POLICY: none('which replica of the same model answers (replicas share judgments)'),
  JUDGE_PREFIX_STAGGER_MS: WHEN,
  JUDGE_ROUTING_KEY_HEADER: none('a header for external routers; the request sent is otherwise the same'),
  JUDGE_CONTEXT_TOKENS: none(
    'decides whether a retry with a raised max_tokens fits the context (a truncated reply fails, and ' +
      'failures are never cached); a completed reply is the same prompt and model answering',
  ),
  JUDGE_RETRY_BUDGET: WHEN,
  JUDGE_SCHEMA_REPROBE_MS: none('when the wire format is probed again (see JUDGE_RESPONSE_FORMAT)'),
  // How long a reasoning model thinks changes what it decides: every route carries its backend's effort.
  JUDGE_REASONING_EFFORT: { in: 'routes' },
  // Engine fields (chat_template_kwargs.enable_thinking, top_k, min_p…) change the reply: keyed per route.
  JUDGE_EXTRA_BODY: { in: 'routes' },
  REWARD_CONFIG: { in: 'routes' },
  DEFAULT_GRAPH: { in: 'graph' },
  REQUEST_DEADLINE_MS: WHEN,
  GET_REWARD_HOLD_MS: WHEN,
  MAX_CANDIDATES: VALIDATION,
  MAX_RANK_CALLS: VALIDATION,
  MIN_CANDIDATE_CHARS: { in: 'settings' },
  MAX_CANDIDATE_CHARS: { in: 'settings' },
  FAILURE_REWARD: none('what the trainer adapters answer for a failure, which is never cached'),
  MAX_GROUND_TRUTH_CHARS: VALIDATION,
  MAX_QUESTION_CHARS: VALIDATION,
  ALLOW_INLINE_GRAPHS: VALIDATION,
  INLINE_MAX_CALLS: VALIDATION,
  INLINE_MAX_ROUNDS: VALIDATION,
  INLINE_MAX_TOKENS: VALIDATION,
  REASONING_FORMAT: { in: 'settings' },
  REASONING_MARKERS: { in: 'settings' },
  MAX_QUEUED_JUDGMENTS: CAPACITY,
  MAX_CONCURRENT_JUDGMENTS: CAPACITY,
  CACHE_SIZE: none('how many judgments the cache keeps, not which'),
  IDEMPOTENCY_WINDOW_MS: none('how long a retry is recognised; it replays judgments under their own keys'),
  IDEMPOTENCY_LINGER_MS: WHEN,
  MAX_QUEUE: none('removed: refused at start-up'),
  HIGH_PRIORITY_SHARE: CAPACITY,
  JUDGE_TOKEN_BUDGET: WHEN,
  JUDGE_BUDGET_WINDOW_S: WHEN,
  CACHED_TOKEN_WEIGHT: WHEN,
  TRANSCRIPTS_PATH: RECORDS,
  RECENT_WINDOW: RECORDS,
  FAILURE_WARN_RATE: RECORDS,
  FAILURE_WARN_INTERVAL_MS: RECORDS,
  WORKERS: CAPACITY,
  REDIS_URL: SCALE,
  REDIS_PREFIX: none(
    'the namespace of shared state; replicas sharing it agree on keys, this is what they share',
  ),
  REDIS_CACHE_TTL_MS: none('how long a shared judgment is kept, not which'),
  REDIS_LEASE_MS: SCALE,
  REDIS_TIMEOUT_MS: SCALE,
  CANARY_DATASET: INTEGRITY,
  CANARY_RATE: INTEGRITY,
  CANARY_MARGIN: INTEGRITY,
  CANARY_THRESHOLD: INTEGRITY,
  CANARY_ERROR_FLOOR: INTEGRITY,
  CANARY_WINDOW: INTEGRITY,
  CANARY_REFERENCE: INTEGRITY,
  CANARY_REFERENCE_SIZE: INTEGRITY,
  CANARY_FLEET_THRESHOLD: INTEGRITY,
  CANARY_BOOST: INTEGRITY,
  CANARY_MAX_INFLIGHT: INTEGRITY,
  AUDIT_RATE: INTEGRITY,
  AUDIT_GRAPH: INTEGRITY,
  AUDIT_MAX_INFLIGHT: INTEGRITY,
  DRIFT_WINDOW: INTEGRITY,
};

/** The preparation settings of the key, from the configuration (the variables decided `settings`). */
export function keySettings(config: Pick<Config, 'reasoningFormat' | 'candidateLimits'>): KeySettings {
  return { reasoningFormat: config.reasoningFormat, limits: config.candidateLimits };
}
