/**
 * What Admission (admission.ts) reads out of its state (admission-core.ts): its limits, run-slot counts,
 * backlog, held requests, the cost of work and the drain rate — for the gauges, plan.ts, the ops and tenants
 * routes, and its own decisions. Admission extends it with what it does (decide, hold, admit, run).
 */
import type { RewardError } from '../../errors.js';
import { AdmissionCore } from './admission-core.js';
import type { AdmissionOptions, WorkShape } from './admission-types.js';
import type { CapacityEstimate } from './capacity.js';
import type { FairShares } from './fair-shares.js';
import type { RunSlots } from './run-slots.js';

export class AdmissionReadings {
  readonly maxConcurrent: number;
  readonly maxQueued: number;
  readonly callSlots: number;
  readonly callRateLimit: number;
  /** Per-tenant backlogs and high-lane budgets (fair-shares.ts). */
  readonly fair: FairShares;
  readonly gate: (() => RewardError | undefined) | undefined;
  /** The state (admission-core.ts), for the decision and the tickets. */
  protected readonly core: AdmissionCore;

  constructor(options: AdmissionOptions) {
    const core = new AdmissionCore(options);
    this.core = core;
    this.maxConcurrent = core.maxConcurrent;
    this.maxQueued = core.maxQueued;
    this.callSlots = core.callSlots;
    this.callRateLimit = core.callRateLimit;
    this.fair = core.fair;
    this.gate = options.gate;
  }

  get running(): number {
    return this.core.slots.running;
  }

  get waiting(): number {
    return this.core.slots.waiting;
  }

  /** Expected backend calls of the admitted judgments that have not ended. */
  get backlogCalls(): number {
    return this.core.backlogCalls;
  }

  /** Expected calls per judgment of `graph`: measured (smoothed), else its static count; 0 when rejected. */
  costOf(graph: WorkShape): number {
    return this.core.costOf(graph);
  }

  /** Smoothed unloaded call latency, ms; undefined before any call finished unloaded (plan.ts). */
  callLatencyMs(): number | undefined {
    return this.core.calls.unloadedLatencyMs;
  }

  /**
   * Estimated drain rate in backend calls per second (> 0): the fleet's proven rate (capacity.ts; the
   * lower end while its capacity is still being measured), raised by a backlog measurement.
   */
  drainCallsPerS(): number {
    return this.core.drain().low;
  }

  /** The capacity estimate behind the drain rate (plan.ts shows it). */
  capacity(): CapacityEstimate & { low: number; high: number } {
    const d = this.core.drain();
    return { ...d.estimate, low: d.low, high: d.high, certain: d.certain };
  }

  /** A graph's drain rate in judgments per second. */
  drainJudgmentsPerS(graph: WorkShape): number {
    return this.drainCallsPerS() / Math.max(1, this.costOf(graph));
  }

  /** Seconds the admitted backlog needs at the current drain rate, within its deadlines (admission-core.ts). */
  predictedWaitS(): number {
    return this.core.predictedWaitS();
  }

  /** Requests held while the capacity is measured (hold.ts). */
  get held(): number {
    return this.core.holds.size;
  }

  /** Tenant flows holding or waiting for run slots (GET /v1/tenants). */
  runSlotFlows(): ReturnType<RunSlots['flows']> {
    return this.core.slots.flows();
  }
}
