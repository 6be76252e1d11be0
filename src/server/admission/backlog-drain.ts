/**
 * The calls this server completed per second while it stayed backlogged (judgments waiting for a run slot,
 * or a backend saturated): counted in SLOT_MS slots over the last DRAIN_WINDOW_MS, valid once the backlog
 * lasted MIN_BUSY_MS (an idle server measures its demand, not its capacity); the last one stands in for
 * LAST_DRAIN_TTL_MS once the backlog ended. It counts every backend's calls — a routing file's too — so it
 * raises the replicas' estimate (capacity.ts) where the fleet is larger than the default backend; it never
 * lowers it, being depressed by the pipeline filling at the start of a backlog. Also kept here: the
 * smoothed latency of calls that finished while the server was not backlogged (the unloaded latency), and
 * the smoothed calls per judgment of each graph.
 */
const SLOT_MS = 250;
const DRAIN_WINDOW_MS = 20_000;
const SLOTS = DRAIN_WINDOW_MS / SLOT_MS;
/** Backlogged time needed before a drain measurement counts. */
const MIN_BUSY_MS = 8000;
/** How long the last drain measurement stands in once the server is no longer backlogged. */
const LAST_DRAIN_TTL_MS = 600_000;
/** Smoothing of call latency and of calls per judgment. */
const EWMA_ALPHA = 0.1;
/** Graph hashes whose call cost is tracked (inline graphs are client-chosen); then the static count. */
const MAX_TRACKED_GRAPHS = 256;

const ewma = (prev: number | undefined, next: number): number =>
  prev === undefined ? next : prev + EWMA_ALPHA * (next - prev);

export class BacklogDrain {
  // Ring of SLOT_MS slots over DRAIN_WINDOW_MS: calls finished in each.
  readonly #slotCalls = new Float64Array(SLOTS);
  readonly #slotIndex = new Float64Array(SLOTS).fill(-1);
  /** Since when the server has been seen backlogged at every observation; undefined when not. */
  #busySince: number | undefined;
  /** The measurement at the end of the last backlog. */
  #last: { callsPerS: number; at: number } | undefined;
  #unloadedMs: number | undefined;
  readonly #callsPerJudgment = new Map<string, number>();

  /** Smoothed latency of calls that finished while not backlogged, ms; undefined before one. */
  get unloadedLatencyMs(): number | undefined {
    return this.#unloadedMs;
  }

  /** Samples whether the server is backlogged (every call, admission and slot change). */
  observe(now: number, busy: boolean): void {
    if (busy) {
      this.#busySince ??= now;
      return;
    }
    if (this.#busySince !== undefined) {
      const measured = this.#current(now);
      if (measured !== undefined) this.#last = { callsPerS: measured, at: now };
    }
    this.#busySince = undefined;
  }

  /**
   * One backend call finished after `latencyMs`; `busy`: the server was backlogged then (its latency then
   * includes its wait for a backend slot and the server's own stalls: not a service time).
   */
  record(now: number, latencyMs: number, busy: boolean): void {
    if (!busy && Number.isFinite(latencyMs) && latencyMs >= 0)
      this.#unloadedMs = ewma(this.#unloadedMs, latencyMs);
    const slot = Math.floor(now / SLOT_MS);
    const i = slot % SLOTS;
    if (this.#slotIndex[i] !== slot) {
      this.#slotIndex[i] = slot;
      this.#slotCalls[i] = 0;
    }
    this.#slotCalls[i] = (this.#slotCalls[i] ?? 0) + 1;
  }

  /** A graph's smoothed calls per judgment (of judgments that ran it); undefined before one. */
  callsPerJudgment(hash: string): number | undefined {
    return this.#callsPerJudgment.get(hash);
  }

  /** One judgment of graph `hash` ended after `calls` calls. */
  recordCost(hash: string, calls: number): void {
    const prev = this.#callsPerJudgment.get(hash);
    if (prev === undefined && this.#callsPerJudgment.size >= MAX_TRACKED_GRAPHS) return;
    this.#callsPerJudgment.set(hash, ewma(prev, calls));
  }

  /** Calls/s of the current backlog once long enough, else of the last one (within its TTL). */
  rate(now: number): number | undefined {
    const current = this.#current(now);
    if (current !== undefined) return current;
    return this.#last !== undefined && now - this.#last.at < LAST_DRAIN_TTL_MS
      ? this.#last.callsPerS
      : undefined;
  }

  /** Calls/s over the part of the window in which the server stayed backlogged, when long enough. */
  #current(now: number): number | undefined {
    if (this.#busySince === undefined) return undefined;
    // Whole slots only: from the first full slot after busySince to the slot now filling (excluded).
    const current = Math.floor(now / SLOT_MS);
    const first = Math.max(Math.floor(this.#busySince / SLOT_MS) + 1, current - SLOTS + 1);
    if ((current - first) * SLOT_MS < MIN_BUSY_MS) return undefined;
    let calls = 0;
    for (let slot = first; slot < current; slot++) {
      const i = slot % SLOTS;
      if (this.#slotIndex[i] === slot) calls += this.#slotCalls[i] ?? 0;
    }
    if (calls === 0) return undefined;
    return calls / (((current - first) * SLOT_MS) / 1000);
  }
}
