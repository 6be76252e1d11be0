/**
 * The capacity plan (`POST /v1/plan`): what a step of `rollouts` judgments (sent as requests of
 * `group_size` candidates) will cost and how long it will take on this server as it stands, from what the
 * server has measured: the graph's calls per judgment (admission's smoothed count), tokens per judgment
 * (smoothed over computed judgments of the graph, else tokens per call × calls), the unloaded call latency
 * and the drain rate, and the in-flight limits.
 *
 * Model. The step's calls drain at the smallest of: the backend drain rate (what the replicas were measured
 * to complete per second at their capacity, else their engines' capacity or in-flight limit ÷ call
 * latency — capacity.ts; capped by `JUDGE_RPM`, raised by a measurement while backlogged: admission.ts;
 * while the capacity is still being measured, its proven lower end), the run slots
 * (`MAX_CONCURRENT_JUDGMENTS` judgments at once, each needing its critical path × call latency), and
 * `JUDGE_TPM` / tokens per call. The last judgment started still needs its critical path after its first
 * call: predicted wall = backlog ahead / drain + calls / rate + (critical path − 1) × call latency.
 *
 * Before any call finished unloaded the latency is the assumed 1 s (admission's COLD_CALL_MS) and before any
 * judgment of the graph the tokens are unknown: the plan says `calibrated: false` (tokens null when nothing
 * at all was measured).
 */
import type { CompiledGraph } from '../../judge/graph.js';
import type { CallEvent, Judgment } from '../../judge/types.js';
import { ADMIT_WITHIN, COLD_CALL_MS, type Admission } from './admission.js';
import { flowOf, type TenantWork } from './fair-shares.js';

const EWMA_ALPHA = 0.1;
/** Graph hashes whose tokens are tracked (inline graphs are client-chosen). */
const MAX_TRACKED_GRAPHS = 256;

export interface PlanInput {
  rollouts: number;
  groupSize: number;
  graph: CompiledGraph;
  /** The trainer's timeout for one request, seconds (default: REQUEST_DEADLINE_MS). */
  timeoutS?: number | undefined;
  /**
   * The caller's tenant (REWARD_KEYS): the step is planned at its fair share (fair-shares.ts), against its
   * part of the queue memory. Default: the shared flow (the whole server, first come first served).
   */
  tenant?: TenantWork | undefined;
}

/** What bounds the step: its throughput bottleneck, or the limit it does not fit. */
export type Limiting =
  | 'backend_slots'
  | 'engine_capacity'
  | 'backend_rpm'
  | 'backend_tpm'
  | 'measured_drain'
  | 'run_slots'
  | 'critical_path'
  | 'queue_memory'
  | 'max_candidates'
  | 'token_budget';

export interface Plan {
  rollouts: number;
  group_size: number;
  requests: number;
  graph: { name: string; hash: string };
  calls: number;
  /** The canaries' calls during the step at the current canary rate (on top of `calls`). */
  canary_calls: number;
  prompt_tokens: number | null;
  completion_tokens: number | null;
  predicted_wall_s: number;
  /** min(timeout_s, REQUEST_DEADLINE_MS): what the step has. */
  deadline_s: number;
  fits: boolean;
  limiting: Limiting;
  /** Every limit the step does not fit (empty when `fits`). */
  blocking: Limiting[];
  calibrated: boolean;
  drain_calls_per_s: number;
  /**
   * The fleet's capacity behind the drain rate: `measured` at capacity, else `engine` (a range while it is
   * measured: `drain_calls_per_s` is its lower end, `upper_calls_per_s` its upper) or `model`.
   */
  capacity: { source: 'measured' | 'engine' | 'model'; upper_calls_per_s: number; calibrated: boolean };
  call_latency_s: number;
  calls_per_judgment: number;
  backlog_wait_s: number;
  budget_remaining_tokens: number | null;
}

export interface PlannerLimits {
  requestDeadlineMs: number;
  maxCandidates: number;
  /** JUDGE_TPM of the default backend; undefined = none. */
  tpm?: number | undefined;
  /**
   * Canaries run beside real work now: canaries per computed judgment (CANARY_RATE, higher while a
   * replica is in doubt) and the graph they judge. Their calls share the backend; undefined = none.
   */
  canaries?: (() => { rate: number; graph: CompiledGraph }) | undefined;
}

export interface Planner {
  /** One finished backend call (feeds tokens per call). */
  observeCall(event: Pick<CallEvent, 'promptTokens' | 'completionTokens' | 'outcome'>): void;
  /** One computed judgment (feeds tokens per judgment of its graph). */
  observeJudgment(judgment: Judgment): void;
  plan(input: PlanInput, budgetRemaining: number | undefined): Plan;
}

interface Tokens {
  prompt: number;
  completion: number;
}

const ewma = (prev: number | undefined, next: number): number =>
  prev === undefined ? next : prev + EWMA_ALPHA * (next - prev);

const round1 = (x: number): number => Math.round(x * 10) / 10;

/** Which backend limit the drain rate is: measured, an engine's capacity, the RPM, or the slots' model. */
function backendLimit(capacity: ReturnType<Admission['capacity']>, rpm: number, drain: number): Limiting {
  if (drain >= rpm - 1e-9) return 'backend_rpm';
  switch (capacity.source) {
    case 'measured':
      return 'measured_drain';
    case 'engine':
      return 'engine_capacity';
    case 'model':
      return 'backend_slots';
  }
}

interface RateInputs {
  graph: CompiledGraph;
  perJudgment: number;
  callS: number;
  tokens: Tokens | undefined;
  drain: number;
  capacity: ReturnType<Admission['capacity']>;
}

/** The throughput bottleneck, calls/s: the backend's limit, the run slots, or the TPM limit, slowest first. */
function slowestRate(admission: Admission, limits: PlannerLimits, r: RateInputs): [Limiting, number] {
  const { graph, perJudgment, callS, tokens, drain } = r;
  const rates: Array<[Limiting, number]> = [
    [backendLimit(r.capacity, admission.callRateLimit, drain), drain],
    ['run_slots', (admission.maxConcurrent * perJudgment) / (Math.max(1, graph.criticalPathCalls) * callS)],
  ];
  if (limits.tpm !== undefined && tokens !== undefined && perJudgment > 0) {
    const perCallTokens = (tokens.prompt + tokens.completion) / perJudgment;
    if (perCallTokens > 0) rates.push(['backend_tpm', limits.tpm / 60 / perCallTokens]);
  }
  let slowest = rates[0] ?? ['backend_slots', drain];
  for (const candidate of rates) if (candidate[1] < slowest[1]) slowest = candidate;
  return slowest;
}

/** The limits a step of `input` would break whatever the wait: size, queue memory, the token budget. */
function blockingLimits(
  admission: Admission,
  limits: PlannerLimits,
  input: PlanInput,
  budgetRemaining: number | undefined,
  stepTokens: number | null,
): Limiting[] {
  const blocking: Limiting[] = [];
  if (input.groupSize > limits.maxCandidates) blocking.push('max_candidates');
  const queueable = admission.maxQueued * (input.tenant?.fraction ?? 1);
  if (input.rollouts > admission.maxConcurrent + queueable) blocking.push('queue_memory');
  if (
    budgetRemaining !== undefined &&
    (budgetRemaining <= 0 || (stepTokens !== null && stepTokens > budgetRemaining))
  )
    blocking.push('token_budget');
  return blocking;
}

export function createPlanner(admission: Admission, limits: PlannerLimits): Planner {
  const byGraph = new Map<string, Tokens>();
  let perCall: Tokens | undefined;

  const tokensPerJudgment = (graph: CompiledGraph, calls: number): Tokens | undefined => {
    const measured = byGraph.get(graph.hash);
    if (measured !== undefined) return measured;
    if (perCall === undefined) return undefined;
    return { prompt: perCall.prompt * calls, completion: perCall.completion * calls };
  };

  return {
    observeCall(event) {
      if (event.outcome !== 'ok') return;
      perCall = {
        prompt: ewma(perCall?.prompt, event.promptTokens),
        completion: ewma(perCall?.completion, event.completionTokens),
      };
    },
    observeJudgment(judgment) {
      if (judgment.status !== 'ok' || judgment.usage.calls === 0) return;
      const hash = judgment.graph.hash;
      const prev = byGraph.get(hash);
      if (prev === undefined && byGraph.size >= MAX_TRACKED_GRAPHS) return;
      byGraph.set(hash, {
        prompt: ewma(prev?.prompt, judgment.usage.promptTokens),
        completion: ewma(prev?.completion, judgment.usage.completionTokens),
      });
    },
    plan(input, budgetRemaining) {
      const { rollouts, groupSize, graph } = input;
      const perJudgment = admission.costOf(graph);
      const calls = rollouts * perJudgment;
      const canaries = limits.canaries?.();
      const canaryCalls =
        canaries === undefined ? 0 : rollouts * canaries.rate * admission.costOf(canaries.graph);
      const latencyMs = admission.callLatencyMs();
      const callS = (latencyMs ?? COLD_CALL_MS) / 1000;
      const tokens = tokensPerJudgment(graph, perJudgment);
      const promptTokens = tokens === undefined ? null : Math.round(tokens.prompt * rollouts);
      const completionTokens = tokens === undefined ? null : Math.round(tokens.completion * rollouts);

      const drain = admission.drainCallsPerS();
      const capacity = admission.capacity();
      const slowest = slowestRate(admission, limits, { graph, perJudgment, callS, tokens, drain, capacity });
      let bottleneck = slowest[0];
      const rate = slowest[1];
      // What drains before the step's last call: the backlog ahead, or at the tenant's fair share what the
      // other tenants drain meanwhile (fair-shares.ts).
      const backlogWaitS = (admission.fair.completionCalls(flowOf(input.tenant), calls) - calls) / drain;
      const drainS = (calls + canaryCalls) / rate;
      const tailS = Math.max(0, graph.criticalPathCalls - 1) * callS;
      const wallS = backlogWaitS + drainS + tailS;
      if (tailS > drainS && graph.criticalPathCalls > 0) bottleneck = 'critical_path';

      const deadlineS = Math.min(input.timeoutS ?? Infinity, limits.requestDeadlineMs / 1000);
      const stepTokens =
        promptTokens === null || completionTokens === null ? null : promptTokens + completionTokens;
      const blocking = blockingLimits(admission, limits, input, budgetRemaining, stepTokens);
      // Admission admits a request while the backlog with it drains inside ADMIT_WITHIN of its deadline.
      if (wallS > ADMIT_WITHIN * deadlineS) blocking.push(bottleneck);
      return {
        rollouts,
        group_size: groupSize,
        requests: Math.ceil(rollouts / groupSize),
        graph: { name: graph.name, hash: graph.hash },
        calls: Math.round(calls),
        canary_calls: Math.round(canaryCalls),
        prompt_tokens: promptTokens,
        completion_tokens: completionTokens,
        predicted_wall_s: round1(wallS),
        deadline_s: round1(deadlineS),
        fits: blocking.length === 0,
        limiting: blocking[0] ?? bottleneck,
        blocking,
        calibrated: latencyMs !== undefined && byGraph.has(graph.hash) && capacity.certain,
        drain_calls_per_s: round1(drain),
        capacity: {
          source: capacity.source,
          upper_calls_per_s: round1(capacity.high),
          calibrated: capacity.certain,
        },
        call_latency_s: Math.round(callS * 1000) / 1000,
        calls_per_judgment: Math.round(perJudgment * 100) / 100,
        backlog_wait_s: round1(backlogWaitS),
        budget_remaining_tokens: budgetRemaining ?? null,
      };
    },
  };
}
