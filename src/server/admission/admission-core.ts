/**
 * The state Admission (admission.ts) is made of, shared by its parts: its limits, the run slots
 * (run-slots.ts), the admitted backlog (its total here, per tenant in fair-shares.ts), the held requests
 * (hold.ts), and the drain rate the backlog is measured against — the replicas' capacity (capacity.ts)
 * capped by the backend's RPM and raised by what this server measured while backlogged (backlog-drain.ts).
 *
 * A run-slot change, an ended ticket and a released hold reservation end in `changed`: the backlogged state
 * and the replicas are sampled, the held requests are decided again, and the new state is published
 * (`AdmissionOptions.onChange`); a finished backend call (`recordCall`) does the same short of publishing.
 * The decision (decide.ts) and the tickets (tickets.ts) read and change the state here; Admission holds it
 * (admission-readings.ts).
 *
 * A wait (Retry-After, the predicted-wait gauge) is the backlog at the drain rate, at most until the latest
 * deadline admitted work was given (`waitS`): by then all of it has finished or timed out, whatever the
 * rate. The rate during a storm is read from a transient — call latencies the storm itself inflated cut the
 * in-flight limit (256 → 16 in one run), which grows back within seconds — and Retry-After said 3× the real
 * wait on a quiet machine, 15× on a loaded one (test/slow/burst.test.ts); the deadlines are facts. (A flight
 * a later joiner moved past them, or work admitted without a decision, may still run then: its client is
 * refused again and told anew.)
 */
import { BacklogDrain } from './backlog-drain.js';
import { CapacityEstimator, drainRange, type CapacityEstimate } from './capacity.js';
import { FairShares } from './fair-shares.js';
import type { Flow } from '../../judge/fair-queue.js';
import { HoldQueue } from './hold.js';
import { RunSlots } from './run-slots.js';
import {
  COLD_CALL_MS,
  type AdmissionOptions,
  type AdmissionState,
  type WorkShape,
} from './admission-types.js';

/** The drain rate now, backend calls per second: its range (capacity.ts) and the estimate behind it. */
export interface DrainReading {
  /** The proven rate (the lower end while the capacity is still being measured), > 0. */
  low: number;
  high: number;
  certain: boolean;
  estimate: CapacityEstimate;
}

export class AdmissionCore {
  readonly maxConcurrent: number;
  readonly maxQueued: number;
  readonly callSlots: number;
  readonly callRateLimit: number;
  readonly now: () => number;
  /** Run slots; their waiters by lane, then by tenant flow (weighted fair queuing), then FIFO. */
  readonly slots: RunSlots;
  /** Per-tenant backlogs and high-lane budgets (fair-shares.ts). */
  readonly fair: FairShares;
  /** The drain measured while backlogged, the unloaded call latency, each graph's calls per judgment. */
  readonly calls = new BacklogDrain();
  readonly capacity: CapacityEstimator;
  readonly holds: HoldQueue;
  readonly #isBackendSaturated: () => boolean;
  readonly #onChange: ((state: AdmissionState) => void) | undefined;
  /** Expected calls of every admitted judgment that has not ended, and held requests' reservations. */
  #backlogCalls = 0;
  /** The latest deadline admitted work was given, epoch ms (`admittedUntil`). */
  #admittedUntil = -Infinity;

  constructor(options: AdmissionOptions) {
    this.maxConcurrent = options.maxConcurrent;
    this.maxQueued = options.maxQueued;
    this.callSlots = options.callSlots;
    this.callRateLimit = options.callRateLimit ?? Infinity;
    this.now = options.now ?? Date.now;
    this.#isBackendSaturated = options.isBackendSaturated ?? (() => false);
    this.#onChange = options.onChange;
    this.slots = new RunSlots(options.maxConcurrent, () => this.changed());
    this.fair = new FairShares(options.highShare ?? 0.1, this.now);
    this.capacity = new CapacityEstimator({
      replicas: options.replicas ?? (() => []),
      lagMs: options.lagMs,
      now: this.now,
    });
    this.holds = new HoldQueue((calls) => {
      this.#backlogCalls = Math.max(0, this.#backlogCalls + calls);
      if (calls < 0) this.changed();
    });
  }

  /** Expected backend calls of the admitted judgments that have not ended (and of held reservations). */
  get backlogCalls(): number {
    return this.#backlogCalls;
  }

  /** One admitted judgment's `cost` calls join the backlog, in `flow`'s too (fair-shares.ts). */
  add(flow: Flow, cost: number): void {
    this.#backlogCalls += cost;
    this.fair.add(flow, cost);
  }

  /** An admitted judgment's `cost` calls leave the backlog again (once it ended). */
  remove(flow: Flow, cost: number): void {
    this.#backlogCalls = Math.max(0, this.#backlogCalls - cost);
    this.fair.remove(flow, cost);
  }

  /** The drain rate now (see the file header). */
  drain(): DrainReading {
    const estimate = this.capacity.estimate(this.calls.unloadedLatencyMs ?? COLD_CALL_MS, this.callSlots);
    return { ...drainRange(estimate, this.calls.rate(this.now()), this.callRateLimit), estimate };
  }

  /** Expected calls per judgment of `graph`: measured (smoothed), else its static count; 0 when rejected. */
  costOf(graph: WorkShape): number {
    if (graph.rejected === true) return 0;
    return this.calls.callsPerJudgment(graph.hash) ?? graph.llmCallsPerJudgment;
  }

  /** Expected calls of the new judgments (one entry per judgment). */
  callsOf(graphs: readonly WorkShape[]): number {
    return graphs.reduce((sum, g) => sum + this.costOf(g), 0);
  }

  /** Seconds the admitted backlog needs at the proven drain rate (`waitS`). */
  predictedWaitS(): number {
    return this.waitS(this.#backlogCalls, this.drain().low);
  }

  /** Admitted work was given `deadline` (epoch ms): the backlog admitted so far has ended by the latest one. */
  admittedUntil(deadline: number): void {
    if (deadline > this.#admittedUntil) this.#admittedUntil = deadline;
  }

  /** Seconds until `backlogCalls` have drained at `drain` calls/s, at most until the latest admitted deadline. */
  waitS(backlogCalls: number, drain: number): number {
    const byDrain = backlogCalls / drain;
    const leftS = (this.#admittedUntil - this.now()) / 1000;
    return leftS > 0 ? Math.min(byDrain, leftS) : byDrain;
  }

  /** Samples the backlogged state (every call, admission and slot change); true when backlogged. */
  observe(now: number): boolean {
    const busy = this.slots.waiting > 0 || this.#isBackendSaturated();
    this.calls.observe(now, busy);
    return busy;
  }

  /** One backend call finished (any outcome): feeds the drain rate and, when unloaded, the call latency. */
  recordCall(latencyMs: number): void {
    const now = this.now();
    this.calls.record(now, latencyMs, this.observe(now));
    this.capacity.observe();
    this.holds.process();
  }

  /** After a run-slot change, an ended ticket or a released reservation (see the file header). */
  changed(): void {
    this.observe(this.now());
    this.capacity.observe();
    this.holds.process();
    if (this.#onChange === undefined) return;
    this.#onChange({
      running: this.slots.running,
      waiting: this.slots.waiting,
      predictedWaitS: this.predictedWaitS(),
      drainCallsPerS: this.drain().low,
      held: this.holds.size,
    });
  }
}
