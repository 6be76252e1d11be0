/**
 * Defaults that both the environment schema (src/config.ts) and the engine use. Defined once here so a
 * changed default changes everywhere; a leaf module (imports nothing).
 */

/** Judge backend, per backend (the environment's and each routing-file backend). */
export const BACKEND_DEFAULTS = Object.freeze({
  /** Per HTTP attempt, ms (clipped to the judgment's deadline). */
  timeoutMs: 30_000,
  /** Retries after the first attempt. */
  maxRetries: 3,
  /** Concurrent HTTP requests (the connection pool's size). */
  maxInflight: 256,
  responseFormat: 'json_schema',
  apiKey: 'EMPTY',
  /** Adapt each replica's in-flight limit below `maxInflight` (AIMD on latency; the old opt-in mode). */
  adaptiveInflight: false,
  /**
   * How each replica's in-flight limit is set: `engine` (from the engine's own metrics, else a latency
   * gradient), `fixed` (= `maxInflight`), `aimd` (the old adaptive mode).
   */
  inflightControl: 'engine',
  /** Where the engine's metrics are read: `auto` (the base URL's `/metrics`), `off`, or URLs. */
  engineMetrics: 'auto',
  /** How often the engine's metrics are read, ms. */
  engineMetricsIntervalMs: 100,
  /** Whether high-priority calls carry the engine's request priority: `off`, `vllm`, `sglang`. */
  enginePriority: 'off',
  /** Which replica an attempt goes to: `affinity` (consistent hash of the ground truth) or `round_robin`. */
  replicaPolicy: 'affinity',
  /** Hold a call whose prompt prefix is being prefilled by a sibling call for up to this long, ms. */
  prefixStaggerMs: 50,
  /** Header carrying the per-ground-truth routing key, for an external router. */
  routingKeyHeader: 'x-reward-routing-key',
  /** Retries per call allowed over the retry-budget window (0.2: retries ≤ 20 % of calls). */
  retryBudget: 0.2,
  /** Sliding window of the retry budget, ms. */
  retryBudgetWindowMs: 10_000,
  /** Retries always allowed per window, whatever the call count. */
  retryBudgetMin: 10,
  /** A replica switched off json_schema (it refused the schema) tries json_schema again after this long, ms. */
  schemaReprobeMs: 60_000,
} as const);

/** Trimmed-candidate length limits, in characters (Unicode code points). */
export const CANDIDATE_LIMIT_DEFAULTS = Object.freeze({ minChars: 20, maxChars: 8000 } as const);
