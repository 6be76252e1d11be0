/**
 * The shapes of the service's metrics (metrics.ts defines them): what the server is handed (`Metrics`, and its
 * integrity, tenant and cluster parts) and the readings the scrape-time gauges take from their sources.
 * Types only.
 */
import type { Counter, Gauge, Histogram, Registry } from 'prom-client';

import type { PairJudgment } from '../../judge/compare.js';
import type { Backend, CallEvent, Judgment, RetryEvent } from '../../judge/types.js';
import type { StateObserver } from '../../state/types.js';

/** One replica's measured rate at capacity (admission/capacity.ts), as the metrics read it. */
export interface MeasuredReplica {
  backend: string;
  replica: string;
  /** Calls completed per second while at capacity; undefined before a measurement. */
  measured: number | undefined;
}

export interface Metrics {
  registry: Registry;
  requests: Counter<'route' | 'code'>;
  requestDuration: Histogram<'route'>;
  /** Error answers by route pattern and RW_* code (the HTTP status alone hides e.g. a prompt mismatch). */
  requestErrors: Counter<'route' | 'code'>;
  judgments: Counter<'graph' | 'status' | 'verdict'>;
  judgmentDuration: Histogram<'graph'>;
  llmCalls: Counter<'role' | 'model' | 'outcome'>;
  llmCallDuration: Histogram<'role' | 'model'>;
  llmTokens: Counter<'role' | 'model' | 'kind'>;
  cachedPromptTokens: Counter<'backend' | 'role'>;
  cacheLookups: Counter<'result'>;
  inflightJudgments: Gauge;
  queueDepth: Gauge;
  /** Seconds the admitted backlog needs at the measured drain rate. */
  predictedWait: Gauge;
  /** REQUEST_DEADLINE_MS in seconds, set once at start-up. */
  requestDeadline: Gauge;
  /** Estimated judge capacity, backend calls per second. */
  drainRate: Gauge;
  admissionRefusals: Counter<'reason'>;
  idempotencyLookups: Counter<'result'>;
  recentMean: Gauge<'graph'>;
  /** Transcript lines that could not be written (the reward is still answered). */
  transcriptErrors: Counter;
  /** Computed judgments in which a deciding reply contradicts itself (confidence < 0.5), by graph. */
  incoherentJudgments: Counter<'graph'>;
  /** Backend retries wanted, by backend and result (`allowed` or `denied` by the retry budget). */
  backendRetries: Counter<'backend' | 'result'>;
  /** Feeds reward_backend_retries_total; pass as the engine's JudgeObserver.onRetry. */
  observeRetry(event: RetryEvent): void;
  comparisons: Counter<'criterion' | 'status'>;
  positionBiasEvents: Counter<'criterion'>;
  comparisonDuration: Histogram<'criterion'>;
  comparisonCacheLookups: Counter<'result'>;
  rankPositionBiasRate: Histogram<'route' | 'criterion'>;
  /** Counts one computed pairwise comparison (both orders) under its criterion. */
  observeComparison(criterion: string, judgment: PairJudgment): void;
  /** 1 while REDIS_URL is set but Redis is unreachable (judging continues on local state). */
  sharedStateDegraded: Gauge;
  sharedStateErrors: Counter<'op'>;
  /** JUDGE_TOKEN_BUDGET: tokens left in the current window (absent without a budget). */
  budgetRemainingTokens: Gauge<'window_s'>;
  /** JUDGE_TOKEN_BUDGET: the budget of a window (absent without a budget), for alerts on the share left. */
  budgetLimitTokens: Gauge<'window_s'>;
  /** Feeds the reward_shared_state_* metrics; pass to `createRedisState`. */
  stateObserver: StateObserver;
  /** Feeds the reward_llm_* metrics; pass as the engine's JudgeObserver.onCall. */
  observeCall(event: CallEvent): void;
  /** Counts one computed judgment under its graph label (a preset name or `custom`). */
  observeJudgment(graph: string, judgment: Judgment): void;
  /** Reads the backends' per-replica state at every scrape (reward_backend_replica_*). */
  watchBackends(source: () => readonly Backend[]): void;
  /** Reads admission's measured capacity per replica at every scrape (completions per second). */
  watchCapacity(source: () => readonly MeasuredReplica[]): void;
  /** Requests held before admission while the fleet's capacity is measured. */
  heldRequests: Gauge;
  /** Candidates answered `rejected_input` (a real 0, no LLM call), by reason; every reason starts at 0. */
  rejectedInputs: Counter<'reason'>;
  /** Judgments (and comparisons) POST /v1/cancel aborted, by route of the cancelled request. */
  cancelledJudgments: Counter<'route'>;
  /** Canaries, quarantine, audits and drift (docs/integrity.md). */
  integrity: IntegrityMetrics;
  /** Tenants of REWARD_KEYS: their requests, spend and budgets. */
  tenants: TenantMetrics;
}

/** One graph's drift gauges over the recent window; null where undefined (no judgment, no variance). */
export interface DriftReading {
  graph: string;
  acceptRate: number | null;
  candidateChars: number | null;
  lengthRewardCorrelation: number | null;
  rejectedInputRate: number | null;
}

/** The canary schedule and the fleet test now (read at every scrape). */
export interface CanaryReading {
  /** Canaries per computed real judgment now (CANARY_RATE, up to its ceiling while in doubt). */
  rate: number;
  /** Each replica's share of its backend's current canaries. */
  shares: ReadonlyArray<{ backend: string; replica: string; share: number }>;
  /** The pooled fleet CUSUM; null while its reference is being collected. */
  fleetCusum: number | null;
}

export interface IntegrityMetrics {
  canaryJudgments: Counter<'backend' | 'replica' | 'outcome'>;
  canaryMemberStances: Counter<'node' | 'role' | 'label' | 'outcome'>;
  suspectJudgments: Counter<'backend' | 'replica'>;
  canaryFleetAlert: Gauge;
  auditJudgments: Counter<'outcome' | 'first_verdict'>;
  /** Read at every scrape (reward_drift_*). */
  watchDrift(source: () => readonly DriftReading[]): void;
  /** Read at every scrape (reward_canary_rate, reward_canary_share, reward_canary_fleet_cusum). */
  watchCanaries(source: () => CanaryReading): void;
}

export interface MetricsOptions {
  /** Judgments behind reward_recent_mean (default 512). */
  recentWindow?: number | undefined;
}

/** Per-tenant metrics (REWARD_KEYS, docs/operations.md): the `tenant` label takes configured names only. */
export interface TenantMetrics {
  /** Judge tokens spent for the tenant's judgments (as its budget counts them). */
  tokens: Counter<'tenant'>;
  /** Reasoning tokens of the tenant's judgments (part of `tokens`; estimated where not reported). */
  reasoningTokens: Counter<'tenant'>;
  /** Authenticated requests by tenant, route pattern and HTTP status. */
  requests: Counter<'tenant' | 'route' | 'code'>;
  budgetRemainingTokens: Gauge<'tenant'>;
  budgetLimitTokens: Gauge<'tenant'>;
  /** Reloads of the keys file by outcome (`ok`, `invalid`). */
  keyReloads: Counter<'outcome'>;
  /** A tenant's name as a label value: itself, or `other` past MAX_TENANT_LABELS names. */
  label(name: string): string;
}

/** The primary's own metrics under WORKERS>1, merged into every worker's /metrics answer. */
export interface ClusterMetrics {
  registry: Registry;
  workers: Gauge;
  restarts: Counter<'reason'>;
}
