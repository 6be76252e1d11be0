/**
 * Every Prometheus metric of the service (DESIGN §7), on its own Registry so each app (and each test) gets
 * fresh counters. Labels take bounded values only: route patterns, status codes, preset names or `custom`,
 * roles, models from config (capped), outcomes and statuses.
 *
 * The one table of the metrics' definitions (name, help, type, labels), group by group. Beside it: their
 * shapes (`metric-types.ts`), the label bounds (`metric-labels.ts`), the Registry and its default process
 * metrics (`registry.ts`), the scrape-time gauges' callbacks (`scrape-gauges.ts`) and the running mean
 * behind reward_recent_mean (`recent-window.ts`).
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

import { REJECTION_REASONS } from '../../judge/degenerate.js';
import type { Backend, ReplicaSnapshot } from '../../judge/types.js';
import {
  boundedLabel,
  controlLaw,
  MAX_LABEL_VALUES,
  MAX_TENANT_LABELS,
  type CallLabels,
} from './metric-labels.js';
import type {
  CanaryReading,
  ClusterMetrics,
  DriftReading,
  IntegrityMetrics,
  MeasuredReplica,
  Metrics,
  MetricsOptions,
  TenantMetrics,
} from './metric-types.js';
import { recentMeans } from './recent-window.js';
import { createRegistry } from './registry.js';
import { driftGauges, engineGauges, replicaGauges } from './scrape-gauges.js';

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120];

/** The canary schedule and the fleet test, read from `source` at every scrape. */
function registerCanaryGauges(registers: Registry[], source: () => CanaryReading): void {
  new Gauge({
    name: 'reward_canary_rate',
    help: 'Canaries per computed real judgment now: CANARY_RATE, up to CANARY_BOOST times it while a replica or the fleet is in doubt.',
    registers,
    collect() {
      this.set(source().rate);
    },
  });
  new Gauge({
    name: 'reward_canary_share',
    help: 'Share of its backend’s current canaries pinned to each replica (more on a replica under doubt).',
    labelNames: ['backend', 'replica'] as const,
    registers,
    collect() {
      this.reset();
      for (const s of source().shares) this.labels(s.backend, s.replica).set(s.share);
    },
  });
  new Gauge({
    name: 'reward_canary_fleet_cusum',
    help: 'The fleet-level CUSUM on the pooled canaries of every replica against the reference (alarm at CANARY_FLEET_THRESHOLD); absent while the reference is collected.',
    registers,
    collect() {
      this.reset();
      const s = source().fleetCusum;
      if (s !== null) this.set(s);
    },
  });
}

/** One graph's drift over the recent window, read from `source` at every scrape (absent where null). */
function registerDriftGauges(registers: Registry[], source: () => readonly DriftReading[]): void {
  const driftGauge = driftGauges(registers, source);
  driftGauge(
    'reward_drift_accept_rate',
    'Share of reward 1 among the recent window of computed judgments with a reward, by graph.',
    (d) => d.acceptRate,
  );
  driftGauge(
    'reward_drift_candidate_chars',
    'Mean candidate length in characters over the recent window of computed judgments, by graph.',
    (d) => d.candidateChars,
  );
  driftGauge(
    'reward_drift_length_reward_correlation',
    'Pearson correlation of candidate length and reward over the recent window (a policy learning to babble), by graph.',
    (d) => d.lengthRewardCorrelation,
  );
  driftGauge(
    'reward_drift_rejected_input_rate',
    'Share of rejected_input (degenerate candidates) over the recent window of computed judgments, by graph.',
    (d) => d.rejectedInputRate,
  );
}

function createIntegrityMetrics(registers: Registry[]): IntegrityMetrics {
  let driftSource: () => readonly DriftReading[] = () => [];
  let canarySource: () => CanaryReading = () => ({ rate: 0, shares: [], fleetCusum: null });
  registerCanaryGauges(registers, () => canarySource());
  registerDriftGauges(registers, () => driftSource());
  return {
    canaryJudgments: new Counter({
      name: 'reward_canary_judgments_total',
      help: 'Canary judgments by the replica they were pinned to and outcome: correct, wrong (verdict ≠ label) or failed.',
      labelNames: ['backend', 'replica', 'outcome'] as const,
      registers,
    }),
    canaryMemberStances: new Counter({
      name: 'reward_canary_member_stances_total',
      help: 'Committee members’ stances on canaries, by node, role, the canary’s label and outcome (correct, wrong): online TPR/TNR.',
      labelNames: ['node', 'role', 'label', 'outcome'] as const,
      registers,
    }),
    suspectJudgments: new Counter({
      name: 'reward_suspect_judgments_total',
      help: 'Real judgments a replica produced since its last good canary, counted when it is quarantined.',
      labelNames: ['backend', 'replica'] as const,
      registers,
    }),
    canaryFleetAlert: new Gauge({
      name: 'reward_canary_fleet_alert',
      help: '1 while the pooled canaries of the fleet are below their reference, or more replicas fail their canaries than may be quarantined (a fleet-wide drop): serving goes on.',
      registers,
    }),
    auditJudgments: new Counter({
      name: 'reward_audit_judgments_total',
      help: 'Real judgments judged again in the background, by outcome (agree, disagree, failed) and the first verdict.',
      labelNames: ['outcome', 'first_verdict'] as const,
      registers,
    }),
    watchDrift(source) {
      driftSource = source;
    },
    watchCanaries(source) {
      canarySource = source;
    },
  };
}

const CIRCUIT_STATE = { closed: 0, half_open: 1, open: 2 } as const satisfies Record<
  ReplicaSnapshot['state'],
  number
>;

/**
 * The per-replica series read from the backends at every scrape (`snapshots`; labels: backend names and
 * replica hosts, both from config): up, circuit state, in flight, waiting, the in-flight limit and what sets
 * it, the engine's own running / waiting / KV use / capacity, measured completions per second (`capacity`),
 * attempts by outcome, quarantine.
 */
function registerReplicaGauges(
  registers: Registry[],
  snapshots: () => ReplicaSnapshot[],
  capacitySource: () => readonly MeasuredReplica[],
): void {
  const replicaGauge = replicaGauges(registers, snapshots);
  replicaGauge(
    'reward_backend_replica_up',
    'Whether the replica takes calls: 1 while its circuit is closed or half-open, 0 while open.',
    (r) => (r.state === 'open' ? 0 : 1),
  );
  replicaGauge(
    'reward_backend_replica_circuit_state',
    'Circuit breaker state of the replica: 0 closed, 1 half-open (probing), 2 open.',
    (r) => CIRCUIT_STATE[r.state],
  );
  replicaGauge(
    'reward_backend_replica_inflight',
    'HTTP attempts in flight to the replica.',
    (r) => r.inflight,
  );
  replicaGauge(
    'reward_backend_replica_waiting',
    'Calls queued in this server for one of the replica’s in-flight slots.',
    (r) => r.waiting,
  );
  replicaGauge(
    'reward_backend_replica_inflight_limit',
    'In-flight limit of the replica (at most max_inflight): from its engine’s metrics, a latency gradient, fixed, or AIMD.',
    (r) => r.limit,
  );
  new Gauge({
    name: 'reward_backend_replica_inflight_control',
    help: 'What sets the replica’s in-flight limit now: 1 for its law (engine metrics, latency gradient, fixed, aimd).',
    labelNames: ['backend', 'replica', 'law'] as const,
    registers,
    collect() {
      this.reset();
      for (const r of snapshots()) this.labels(r.backend, r.replica, controlLaw(r)).set(1);
    },
  });
  registerEngineGauges(registers, snapshots);
  registerReplicaThroughput(registers, snapshots, capacitySource);
  replicaGauge(
    'reward_backend_replica_quarantined',
    'Whether the canaries’ sequential test has taken the replica out of real work (1) or not (0).',
    (r) => (r.quarantined === true ? 1 : 0),
  );
}

/** The engine's own numbers per replica, from its last fresh /metrics reading: no series without one. */
function registerEngineGauges(registers: Registry[], snapshots: () => ReplicaSnapshot[]): void {
  const engineGauge = engineGauges(registers, snapshots);
  engineGauge(
    'reward_backend_replica_engine_running',
    'Sequences in the engine’s batch (vllm:num_requests_running, sglang:num_running_reqs, llamacpp:requests_processing).',
    (r) => r.control?.engine?.running,
  );
  engineGauge(
    'reward_backend_replica_engine_waiting',
    'Requests waiting in the engine’s own queue (vllm:num_requests_waiting, sglang:num_queue_reqs, llamacpp:requests_deferred).',
    (r) => r.control?.engine?.waiting,
  );
  engineGauge(
    'reward_backend_replica_engine_kv_usage',
    'KV-cache use the engine reports, 0–1 (vllm:kv_cache_usage_perc, sglang:token_usage).',
    (r) => r.control?.engine?.kvUsage,
  );
  engineGauge(
    'reward_backend_replica_engine_capacity',
    'The engine’s batch when it was last seen queueing: its capacity in concurrent calls (no series before).',
    (r) => (r.control?.metrics === true && r.control.capacity.known ? r.control.capacity.calls : undefined),
  );
  engineGauge(
    'reward_backend_replica_engine_metrics_trusted',
    'Whether the engine’s gauges are believed (1) or contradict our own in-flight calls and are ignored (0: steered and estimated from completions); no series without engine metrics.',
    (r) => (r.control?.gauge === undefined ? undefined : r.control.gauge === 'trusted' ? 1 : 0),
  );
}

/** What each replica completed per second at capacity (measured by admission) and attempted, by outcome. */
function registerReplicaThroughput(
  registers: Registry[],
  snapshots: () => ReplicaSnapshot[],
  capacitySource: () => readonly MeasuredReplica[],
): void {
  new Gauge({
    name: 'reward_backend_replica_completions_per_second',
    help: 'Calls the replica completed per second while at its capacity, measured (admission’s drain rate; no series before a measurement).',
    labelNames: ['backend', 'replica'] as const,
    registers,
    collect() {
      this.reset();
      for (const m of capacitySource()) {
        if (m.measured !== undefined) this.labels(m.backend, m.replica).set(m.measured);
      }
    },
  });
  new Counter({
    name: 'reward_backend_replica_attempts_total',
    help: 'HTTP attempts to the replica by outcome: ok, unparsable, timeout, connection, http_429, http_503, http_5xx, http_4xx, deadline, aborted.',
    labelNames: ['backend', 'replica', 'outcome'] as const,
    registers,
    collect() {
      // Cumulative counts kept by the replica: re-stated at each scrape, so they never go down.
      this.reset();
      for (const r of snapshots()) {
        for (const [outcome, n] of r.attempts) this.labels(r.backend, r.replica, outcome).inc(n);
      }
    },
  });
}

/** Builds a fresh Registry with every metric plus prom-client's default process metrics (less three). */
export function createMetrics(options: MetricsOptions = {}): Metrics {
  const registry = createRegistry();
  const registers = [registry];
  const labels: CallLabels = {
    model: boundedLabel(MAX_LABEL_VALUES),
    role: boundedLabel(MAX_LABEL_VALUES),
    backend: boundedLabel(MAX_LABEL_VALUES),
  };
  return {
    registry,
    ...requestMetrics(registers),
    ...answerMetrics(registers),
    ...judgmentMetrics(registers, options.recentWindow ?? 512),
    ...callMetrics(registers, labels),
    ...backlogMetrics(registers),
    ...refusalMetrics(registers),
    ...backendMetrics(registers),
    ...comparisonMetrics(registers),
    ...stateMetrics(registers),
    integrity: createIntegrityMetrics(registers),
    tenants: createTenantMetrics(registers),
  };
}

/** HTTP requests: counted and timed by route pattern, error answers by code. */
function requestMetrics(
  registers: Registry[],
): Pick<Metrics, 'requests' | 'requestErrors' | 'requestDuration'> {
  const requests = new Counter({
    name: 'reward_requests_total',
    help: 'HTTP requests answered, by route pattern and status code.',
    labelNames: ['route', 'code'] as const,
    registers,
  });
  const requestErrors = new Counter({
    name: 'reward_request_errors_total',
    help: 'Error answers by route pattern and error code (RW_CLIENT_ABORTED: counted, nothing sent).',
    labelNames: ['route', 'code'] as const,
    registers,
  });
  const requestDuration = new Histogram({
    name: 'reward_request_duration_seconds',
    help: 'HTTP request duration by route pattern.',
    labelNames: ['route'] as const,
    buckets: LATENCY_BUCKETS,
    registers,
  });
  return { requests, requestErrors, requestDuration };
}

/** What requests are answered besides judgments: replays, rejections, cancels, transcripts. */
function answerMetrics(
  registers: Registry[],
): Pick<Metrics, 'idempotencyLookups' | 'transcriptErrors' | 'rejectedInputs' | 'cancelledJudgments'> {
  const idempotencyLookups = new Counter({
    name: 'reward_idempotency_lookups_total',
    help: 'Requests carrying an idempotency id: hit (same id and items answered within the window, by this process or, with REDIS_URL, another) or miss.',
    labelNames: ['result'] as const,
    registers,
  });
  const transcriptErrors = new Counter({
    name: 'reward_transcript_write_errors_total',
    help: 'Transcript lines that could not be written.',
    registers,
  });
  const rejectedInputs = new Counter({
    name: 'reward_rejected_inputs_total',
    help: 'Candidates answered rejected_input (a real 0 without an LLM call) per request item or ranked candidate, by reason.',
    labelNames: ['reason'] as const,
    registers,
  });
  for (const reason of REJECTION_REASONS) rejectedInputs.labels(reason).inc(0);
  const cancelledJudgments = new Counter({
    name: 'reward_cancelled_judgments_total',
    help: 'Judgments (and comparisons) aborted by POST /v1/cancel because only cancelled requests waited for them, by route of the cancelled request.',
    labelNames: ['route'] as const,
    registers,
  });
  return { idempotencyLookups, transcriptErrors, rejectedInputs, cancelledJudgments };
}

/** Computed judgments by graph, the judgment cache and the recent mean reward. */
function judgmentMetrics(
  registers: Registry[],
  windowSize: number,
): Pick<
  Metrics,
  'judgments' | 'judgmentDuration' | 'cacheLookups' | 'recentMean' | 'incoherentJudgments' | 'observeJudgment'
> {
  const judgments = new Counter({
    name: 'reward_judgments_total',
    help: 'Judgments computed (cache hits excluded), by graph, status and verdict (`none` on failure).',
    labelNames: ['graph', 'status', 'verdict'] as const,
    registers,
  });
  const judgmentDuration = new Histogram({
    name: 'reward_judgment_duration_seconds',
    help: 'Duration of one computed judgment, by graph.',
    labelNames: ['graph'] as const,
    buckets: LATENCY_BUCKETS,
    registers,
  });
  const cacheLookups = new Counter({
    name: 'reward_cache_lookups_total',
    help: 'Judgment lookups: hit (completed judgment cached), coalesced (joined one in flight), miss (computed).',
    labelNames: ['result'] as const,
    registers,
  });
  const recentMean = new Gauge({
    name: 'reward_recent_mean',
    // WORKERS>1: the mean over workers' windows (each sees a round-robin share of the traffic).
    aggregator: 'average',
    help: 'Mean reward of the last RECENT_WINDOW judgments that carry a reward (ok, rejected_input), by graph.',
    labelNames: ['graph'] as const,
    registers,
  });
  const incoherentJudgments = new Counter({
    name: 'reward_incoherent_judgments_total',
    help: 'Computed judgments in which a deciding reply gave its own stance a confidence below 0.5 (no_match with P(match) 0.9), by graph.',
    labelNames: ['graph'] as const,
    registers,
  });
  const recent = recentMeans(windowSize);
  return {
    judgments,
    judgmentDuration,
    cacheLookups,
    recentMean,
    incoherentJudgments,
    observeJudgment(graph, judgment) {
      judgments.labels(graph, judgment.status, judgment.verdict ?? 'none').inc();
      judgmentDuration.labels(graph).observe(judgment.latencyMs / 1000);
      if (judgment.incoherent) incoherentJudgments.labels(graph).inc();
      if (judgment.reward !== null) recentMean.labels(graph).set(recent(graph, judgment.reward));
    },
  };
}

/** The LLM calls of judgments: counts, durations, tokens (prefix-cached too) and retries. */
function callMetrics(
  registers: Registry[],
  labels: CallLabels,
): Pick<
  Metrics,
  | 'llmCalls'
  | 'llmCallDuration'
  | 'llmTokens'
  | 'cachedPromptTokens'
  | 'backendRetries'
  | 'observeCall'
  | 'observeRetry'
> {
  const llmCalls = new Counter({
    name: 'reward_llm_calls_total',
    help: 'LLM calls made by judge nodes (re-asks included), by role, model and outcome (ok or an RW_* code).',
    labelNames: ['role', 'model', 'outcome'] as const,
    registers,
  });
  const llmCallDuration = new Histogram({
    name: 'reward_llm_call_duration_seconds',
    help: 'LLM call duration (retries included), by role and model.',
    labelNames: ['role', 'model'] as const,
    buckets: LATENCY_BUCKETS,
    registers,
  });
  const llmTokens = new Counter({
    name: 'reward_llm_tokens_total',
    help:
      'Tokens reported by the backend, by role, model and kind (prompt, completion, or reasoning: the part ' +
      'of completion tokens spent thinking, estimated from the trace where the backend reports none).',
    labelNames: ['role', 'model', 'kind'] as const,
    registers,
  });
  const cachedPromptTokens = new Counter({
    name: 'reward_backend_cached_prompt_tokens_total',
    help:
      'Prompt tokens the backend served from its prefix cache (usage.prompt_tokens_details.cached_tokens), ' +
      'by backend and role; calls whose backend does not report the field are not counted.',
    labelNames: ['backend', 'role'] as const,
    registers,
  });
  const backendRetries = new Counter({
    name: 'reward_backend_retries_total',
    help: 'Retries of judge backend calls, by backend and result: allowed or denied by the retry budget.',
    labelNames: ['backend', 'result'] as const,
    registers,
  });
  return {
    llmCalls,
    llmCallDuration,
    llmTokens,
    cachedPromptTokens,
    backendRetries,
    observeRetry(event) {
      backendRetries.labels(labels.backend(event.backend), event.allowed ? 'allowed' : 'denied').inc();
    },
    observeCall(event) {
      const role = labels.role(event.role);
      const model = labels.model(event.model);
      llmCalls.labels(role, model, event.outcome).inc();
      llmCallDuration.labels(role, model).observe(event.latencyMs / 1000);
      if (event.promptTokens > 0) llmTokens.labels(role, model, 'prompt').inc(event.promptTokens);
      if (event.completionTokens > 0) llmTokens.labels(role, model, 'completion').inc(event.completionTokens);
      const reasoning = event.reasoningTokens ?? 0;
      if (reasoning > 0) llmTokens.labels(role, model, 'reasoning').inc(reasoning);
      // A reported 0 creates the series (the backend reports the field); unreported leaves it absent.
      if (event.cachedPromptTokens !== null) {
        cachedPromptTokens.labels(labels.backend(event.backend), role).inc(event.cachedPromptTokens);
      }
    },
  };
}

/** Admission's backlog: running and waiting judgments, its predicted wait against the deadline, holds. */
function backlogMetrics(
  registers: Registry[],
): Pick<
  Metrics,
  'inflightJudgments' | 'queueDepth' | 'predictedWait' | 'heldRequests' | 'requestDeadline' | 'drainRate'
> {
  const inflightJudgments = new Gauge({
    name: 'reward_inflight_judgments',
    help: 'Judgments running now (holding a run slot).',
    registers,
  });
  const queueDepth = new Gauge({
    name: 'reward_queue_depth',
    help: 'Judgments admitted and waiting for a run slot.',
    registers,
  });
  const predictedWait = new Gauge({
    name: 'reward_predicted_wait_seconds',
    help: 'Seconds the admitted backlog needs at the measured drain rate; above the request deadline, new work is refused.',
    registers,
  });
  const heldRequests = new Gauge({
    name: 'reward_admission_held_requests',
    help: 'Requests held before admission, in arrival order, while the judge fleet’s capacity is being measured.',
    registers,
  });
  const requestDeadline = new Gauge({
    name: 'reward_request_deadline_seconds',
    help: 'REQUEST_DEADLINE_MS in seconds: the longest a request may wait; the predicted-wait alert compares against it.',
    registers,
  });
  const drainRate = new Gauge({
    name: 'reward_drain_calls_per_second',
    help: 'Estimated judge capacity in backend calls per second (measured while backlogged, else modelled).',
    registers,
  });
  return { inflightJudgments, queueDepth, predictedWait, heldRequests, requestDeadline, drainRate };
}

/** Admission's refusals and the token budget (JUDGE_TOKEN_BUDGET) it gates by. */
function refusalMetrics(
  registers: Registry[],
): Pick<Metrics, 'admissionRefusals' | 'budgetRemainingTokens' | 'budgetLimitTokens'> {
  const admissionRefusals = new Counter({
    name: 'reward_admission_refusals_total',
    help: 'Requests refused with 503 RW_OVERLOADED, by reason: deadline (predicted completion too late), memory (queue full) or priority (HIGH_PRIORITY_SHARE).',
    labelNames: ['reason'] as const,
    registers,
  });
  const budgetRemainingTokens = new Gauge({
    name: 'reward_budget_remaining_tokens',
    help: 'JUDGE_TOKEN_BUDGET: judge tokens left in the current window, labelled by the window length (no series without a budget).',
    labelNames: ['window_s'] as const,
    // WORKERS>1: the worker with the least left (without REDIS_URL each worker has its share).
    aggregator: 'min',
    registers,
  });
  const budgetLimitTokens = new Gauge({
    name: 'reward_budget_limit_tokens',
    help: 'JUDGE_TOKEN_BUDGET: judge tokens a window allows, labelled by the window length (no series without a budget).',
    labelNames: ['window_s'] as const,
    // WORKERS>1 without REDIS_URL: a worker's share, the budget reward_budget_remaining_tokens is left of.
    aggregator: 'min',
    registers,
  });
  return { admissionRefusals, budgetRemainingTokens, budgetLimitTokens };
}

/**
 * Backend and replica metrics, read from the backends at scrape time: the engine keeps the counts, so the
 * transport needs no metrics dependency. Labels: backend names and replica hosts, both from config.
 */
function backendMetrics(registers: Registry[]): Pick<Metrics, 'watchBackends' | 'watchCapacity'> {
  let backendSource: () => readonly Backend[] = () => [];
  let capacitySource: () => readonly MeasuredReplica[] = () => [];
  const snapshots = (): ReplicaSnapshot[] => backendSource().flatMap((b) => b.replicas?.() ?? []);
  registerReplicaGauges(registers, snapshots, () => capacitySource());
  new Counter({
    name: 'reward_backend_replica_circuit_opens_total',
    help: 'Times the replica’s circuit breaker opened.',
    labelNames: ['backend', 'replica'] as const,
    registers,
    collect() {
      this.reset();
      for (const r of snapshots()) this.labels(r.backend, r.replica).inc(r.circuitOpens);
    },
  });
  new Counter({
    name: 'reward_backend_response_format_switches_total',
    help: 'Times the replica’s response format switched: to json_object on evidence that it refuses the schema, back to json_schema when a re-probe is accepted.',
    labelNames: ['backend', 'replica', 'to'] as const,
    registers,
    collect() {
      this.reset();
      for (const r of snapshots()) {
        for (const [to, n] of r.responseFormatSwitches ?? []) this.labels(r.backend, r.replica, to).inc(n);
      }
    },
  });
  new Counter({
    name: 'reward_backend_staggered_calls_total',
    help: 'Calls held back briefly so a sibling call with the same prompt prefix could prefill it first.',
    labelNames: ['backend'] as const,
    registers,
    collect() {
      this.reset();
      for (const b of backendSource()) {
        const n = b.staggeredCalls?.();
        if (n !== undefined) this.labels(b.name).inc(n);
      }
    },
  });
  return {
    watchBackends(source) {
      backendSource = source;
    },
    watchCapacity(source) {
      capacitySource = source;
    },
  };
}

/** Pairwise comparisons (ranking, best-of-n): counts, durations, position bias and their cache. */
function comparisonMetrics(
  registers: Registry[],
): Pick<
  Metrics,
  | 'comparisons'
  | 'positionBiasEvents'
  | 'comparisonDuration'
  | 'comparisonCacheLookups'
  | 'rankPositionBiasRate'
  | 'observeComparison'
> {
  const comparisons = new Counter({
    name: 'reward_comparisons_total',
    help: 'Pairwise comparisons computed (both orders; cache hits excluded), by criterion and status.',
    labelNames: ['criterion', 'status'] as const,
    registers,
  });
  const positionBiasEvents = new Counter({
    name: 'reward_position_bias_events_total',
    help: 'Computed comparisons whose two orders disagreed (counted as ties), by criterion.',
    labelNames: ['criterion'] as const,
    registers,
  });
  const comparisonDuration = new Histogram({
    name: 'reward_comparison_duration_seconds',
    help: 'Duration of one computed comparison (both orders), by criterion.',
    labelNames: ['criterion'] as const,
    buckets: LATENCY_BUCKETS,
    registers,
  });
  const comparisonCacheLookups = new Counter({
    name: 'reward_comparison_cache_lookups_total',
    help: 'Comparison lookups: hit (cached), coalesced (joined one in flight), miss (computed).',
    labelNames: ['result'] as const,
    registers,
  });
  const rankPositionBiasRate = new Histogram({
    name: 'reward_rank_position_bias_rate',
    help: 'Per ranking request: share of its judged comparisons whose two orders disagreed, by route and criterion.',
    labelNames: ['route', 'criterion'] as const,
    buckets: [0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1],
    registers,
  });
  return {
    comparisons,
    positionBiasEvents,
    comparisonDuration,
    comparisonCacheLookups,
    rankPositionBiasRate,
    observeComparison(criterion, judgment) {
      comparisons.labels(criterion, judgment.status).inc();
      comparisonDuration.labels(criterion).observe(judgment.latencyMs / 1000);
      if (judgment.positionBias) positionBiasEvents.labels(criterion).inc();
    },
  };
}

/** Shared state (Redis): degraded or not, failed operations. */
function stateMetrics(
  registers: Registry[],
): Pick<Metrics, 'sharedStateDegraded' | 'sharedStateErrors' | 'stateObserver'> {
  const sharedStateDegraded = new Gauge({
    name: 'reward_shared_state_degraded',
    help: 'REDIS_URL is set but Redis is unreachable: 1 while judging runs on local state (cache, leases, buckets).',
    // WORKERS>1: 1 when any worker is degraded.
    aggregator: 'max',
    registers,
  });
  const sharedStateErrors = new Counter({
    name: 'reward_shared_state_errors_total',
    help: 'Shared-state operations that failed and were answered from local state, by store (judgments, leases, buckets, idempotency, flush, decode).',
    labelNames: ['op'] as const,
    registers,
  });
  return {
    sharedStateDegraded,
    sharedStateErrors,
    stateObserver: {
      onDegraded: (degraded) => sharedStateDegraded.set(degraded ? 1 : 0),
      onError: (op) => sharedStateErrors.labels(op).inc(),
    },
  };
}

function createTenantMetrics(registers: Registry[]): TenantMetrics {
  const reloads = new Counter({
    name: 'reward_keys_reloads_total',
    help: 'Reloads of the keys file (REWARD_KEYS, on SIGHUP or a change), by outcome: ok, or invalid (the old keys kept serving).',
    labelNames: ['outcome'] as const,
    registers,
  });
  for (const outcome of ['ok', 'invalid']) reloads.labels(outcome).inc(0);
  return {
    tokens: new Counter({
      name: 'reward_tenant_tokens_total',
      help: 'Judge tokens spent for the judgments a tenant received, split among the tenants a shared judgment answered (prompt + completion as reported, cached prompt tokens × CACHED_TOKEN_WEIGHT), by tenant (a REWARD_KEYS name).',
      labelNames: ['tenant'] as const,
      registers,
    }),
    reasoningTokens: new Counter({
      name: 'reward_tenant_reasoning_tokens_total',
      help: 'Reasoning tokens of the judgments a tenant received (split as reward_tenant_tokens_total) (part of their completion tokens: completion_tokens_details.reasoning_tokens, estimated from the trace where the backend reports none), by tenant.',
      labelNames: ['tenant'] as const,
      registers,
    }),
    requests: new Counter({
      name: 'reward_tenant_requests_total',
      help: 'Authenticated requests by tenant (a REWARD_KEYS name), route pattern and HTTP status.',
      labelNames: ['tenant', 'route', 'code'] as const,
      registers,
    }),
    budgetRemainingTokens: new Gauge({
      name: 'reward_tenant_budget_remaining_tokens',
      help: 'Tokens left of a tenant’s token_budget in the current window (tenants with a budget only).',
      labelNames: ['tenant'] as const,
      registers,
    }),
    budgetLimitTokens: new Gauge({
      name: 'reward_tenant_budget_limit_tokens',
      help: 'A tenant’s token_budget per window (tenants with a budget only).',
      labelNames: ['tenant'] as const,
      registers,
    }),
    keyReloads: reloads,
    label: boundedLabel(MAX_TENANT_LABELS),
  };
}

export function createClusterMetrics(): ClusterMetrics {
  const registry = new Registry();
  const registers = [registry];
  return {
    registry,
    workers: new Gauge({
      name: 'reward_workers',
      help: 'Worker processes alive (WORKERS>1).',
      registers,
    }),
    restarts: new Counter({
      name: 'reward_worker_restarts_total',
      help: 'Workers that died and were replaced, by reason: crash (non-zero exit), signal (killed), exit (exited 0 unasked).',
      labelNames: ['reason'] as const,
      registers,
    }),
  };
}
