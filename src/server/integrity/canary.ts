/**
 * Canary judgments: labelled rows (CANARY_DATASET) judged by the configured graph, interleaved with real
 * work at CANARY_RATE canaries per computed real judgment (up to CANARY_BOOST times that while a replica or
 * the fleet is under doubt). A canary is an ordinary judgment of that graph run outside the judge service:
 * no cache, no single-flight, no admission, never in a trainer's answer, in `reward_judgments_total` or in
 * `reward_recent_mean`. All its calls are pinned to one replica per backend (`CallOptions.pin`); which
 * replicas, and how many canaries are due, is `canary-schedule.ts`'s (the replicas in turn, extra ones aimed
 * at a doubted replica), so every replica of every backend a role uses is measured. At most `maxInflight`
 * canaries run at once; canaries due meanwhile wait for a free one (a burst of real work owes its
 * canaries), up to MAX_OWED; beyond that they are skipped (and counted).
 */
import type { ReasoningFormat } from '../../judge/candidate.js';
import { allNodes, type CompiledGraph } from '../../judge/graph.js';
import { runJudgment } from '../../judge/run.js';
import type { Backend, JudgeObserver, Judgment, Router } from '../../judge/types.js';
import type { CanaryRow } from '../../settings/canary-dataset.js';
import type { CanaryEvent, CanaryOutcome } from './canary-ledger.js';
import { createCanarySchedule, type Doubt, type ReplicaShare } from './canary-schedule.js';
import type { IntegrityMetrics } from '../observe/metric-types.js';

/** What a judgment run beside real work (a canary, an audit) runs with: outside the judge service. */
export interface BackgroundJudging {
  router: Router;
  /** Such judgments running at once at most. */
  maxInflight: number;
  /** Each one's deadline, ms from its start. */
  deadlineMs: number;
  limits: { minChars: number; maxChars: number };
  /** REASONING_FORMAT, as the judge service has it (default `auto`). */
  reasoningFormat?: ReasoningFormat | undefined;
  observer: JudgeObserver;
  metrics: IntegrityMetrics;
}

export interface CanaryRunnerOptions extends BackgroundJudging {
  rows: readonly CanaryRow[];
  /** Canaries per `tick` (one tick per computed real judgment). */
  rate: number;
  /** CANARY_BOOST: the rate's ceiling under doubt, as a multiple of `rate` (default 1: none). */
  boost?: number | undefined;
  /** The replicas (and whether the fleet) under doubt now (default: none). */
  doubt?: (() => Doubt) | undefined;
  graph: CompiledGraph;
  /** Hands the finished canary to the canary log (and so to every process's ledger). */
  publish(event: CanaryEvent): void;
  /** A canary whose judgment did not yield a verdict (logged by the caller, rate-limited). */
  onFailed?: ((event: CanaryEvent, judgment: Judgment) => void) | undefined;
  now?: (() => number) | undefined;
}

export interface CanaryRunner {
  /** One computed real judgment: runs the canaries now due. */
  tick(): void;
  /** Resolves when no canary is running (tests, shutdown). */
  idle(): Promise<void>;
  /** Aborts the canaries in flight; later ticks do nothing. */
  close(): void;
  /** Canaries per computed real judgment now (CANARY_RATE, or its ceiling while in doubt). */
  rate(): number;
  /** Each replica's share of the current canaries. */
  shares(): ReplicaShare[];
  readonly launched: number;
  /** Canaries aimed at a doubted replica, beyond the turns. */
  readonly targeted: number;
  readonly skipped: number;
  /** Canaries due but waiting for a free slot. */
  readonly owed: number;
}

/** The label of a backend's replicas: its replica labels, or its own name when it has none (offline). */
function replicaLabels(backend: Backend): string[] {
  const labels = backend.replicas?.().map((r) => r.replica) ?? [];
  return labels.length === 0 ? [backend.name] : labels;
}

/** The distinct backends the graph's LLM nodes route to, in node order. */
export function graphBackends(graph: CompiledGraph, router: Router): Backend[] {
  const seen = new Map<string, Backend>();
  for (const r of allNodes(graph)) {
    if (r.role.kind === 'local') continue;
    const backend = router.route(r.node).backend;
    if (!seen.has(backend.name)) seen.set(backend.name, backend);
  }
  return [...seen.values()];
}

/**
 * Each LLM member's stance with the replica that answered (the transcript's, else the backend's pin).
 * Shared with the auditor.
 */
export function memberStances(
  judgment: Judgment,
  router: Router,
  pins: ReadonlyMap<string, string>,
): CanaryEvent['members'] {
  const out: CanaryEvent['members'] = [];
  for (const m of judgment.transcript) {
    if (m.stance === null || m.model === 'local') continue;
    const backend = router.route({ id: m.nodeId, role: m.role }).backend.name;
    out.push({
      node: m.nodeId,
      role: m.role,
      backend,
      replica: m.replica ?? pins.get(backend) ?? backend,
      stance: m.stance,
    });
  }
  return out;
}

/** A seeded Fisher–Yates order of 0..n-1 (mulberry32), so rows come round evenly. */
function order(n: number, seed: number): number[] {
  const out = Array.from({ length: n }, (_, i) => i);
  let state = seed >>> 0;
  const rng = (): number => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(rng() * (i + 1));
    const a = out[i] ?? 0;
    out[i] = out[j] ?? 0;
    out[j] = a;
  }
  return out;
}

/** Canaries owed while `maxInflight` run, per in-flight slot; more are skipped. */
const MAX_OWED_PER_SLOT = 64;

export function createCanaryRunner(options: CanaryRunnerOptions): CanaryRunner {
  const now = options.now ?? Date.now;
  const { rows, graph, router, metrics } = options;
  const doubt = options.doubt ?? (() => ({ replicas: [], fleet: false }));
  const rowOrder = order(rows.length, 0x5eed ^ process.pid);
  const controller = new AbortController();
  const running = new Set<Promise<void>>();
  const schedule = createCanarySchedule({
    rate: options.rate,
    boost: options.boost ?? 1,
    backends: () => graphBackends(graph, router).map((b) => ({ name: b.name, replicas: replicaLabels(b) })),
  });
  let launched = 0;
  let targeted = 0;
  let skipped = 0;

  const outcomeOf = (judgment: Judgment, row: CanaryRow): CanaryOutcome => {
    if (judgment.status !== 'ok' || judgment.verdict === null) return 'failed';
    return judgment.verdict === row.label ? 'correct' : 'wrong';
  };

  const runOne = async (row: CanaryRow, pins: Map<string, string>, aimed: boolean): Promise<void> => {
    const judgment = await runJudgment(
      graph,
      { question: row.question, candidate: row.candidate, groundTruth: row.groundTruth },
      {
        router,
        deadline: now() + options.deadlineMs,
        signal: controller.signal,
        observer: options.observer,
        limits: options.limits,
        reasoningFormat: options.reasoningFormat,
        pin: pins,
      },
    );
    if (controller.signal.aborted) return;
    const outcome = outcomeOf(judgment, row);
    const event: CanaryEvent = {
      at: now(),
      row: row.id,
      label: row.label,
      verdict: judgment.verdict,
      outcome,
      pins: [...pins].map(([backend, replica]) => ({ backend, replica })),
      members: outcome === 'failed' ? [] : memberStances(judgment, router, pins),
      ...(aimed ? { targeted: true } : {}),
    };
    for (const p of event.pins) metrics.canaryJudgments.labels(p.backend, p.replica, outcome).inc();
    for (const m of event.members) {
      metrics.canaryMemberStances
        .labels(m.node, m.role, row.label, m.stance === row.label ? 'correct' : 'wrong')
        .inc();
    }
    if (outcome === 'failed') options.onFailed?.(event, judgment);
    options.publish(event);
  };

  /** Starts the canaries now due, as far as slots allow; the rest stay owed (bounded). */
  const pump = (): void => {
    const maxOwed = MAX_OWED_PER_SLOT * options.maxInflight;
    if (schedule.due > maxOwed) skipped += schedule.skip(schedule.due - maxOwed);
    while (schedule.due >= 1 && running.size < options.maxInflight && !controller.signal.aborted) {
      if (!launch()) break;
    }
  };

  const launch = (): boolean => {
    // Rows advance once per round of the replica combinations (the schedule's slot), so a set whose size is
    // a multiple of the replica count cannot give each replica a fixed subset of rows.
    const planned = schedule.next(doubt());
    if (planned === undefined) return false;
    const row = rows[rowOrder[planned.slot % rowOrder.length] ?? 0];
    if (row === undefined) return false;
    launched += 1;
    if (planned.targeted) targeted += 1;
    const task: Promise<void> = runOne(row, planned.pins, planned.targeted)
      // runJudgment answers failures as judgments; anything thrown here is a bug in this file's callers.
      .catch(() => undefined)
      .finally(() => {
        running.delete(task);
        pump();
      });
    running.add(task);
    return true;
  };

  return {
    tick() {
      if (controller.signal.aborted || options.rate <= 0) return;
      schedule.tick(doubt());
      pump();
    },
    async idle() {
      for (let i = 0; i < 1000 && running.size > 0; i++) await Promise.all(running);
    },
    close() {
      controller.abort(new Error('canaries stopped'));
    },
    rate: () => (options.rate <= 0 ? 0 : schedule.rate(doubt())),
    shares: () => schedule.shares(doubt()),
    get launched() {
      return launched;
    },
    get targeted() {
      return targeted;
    },
    get skipped() {
      return skipped;
    },
    get owed() {
      return schedule.due;
    },
  };
}
