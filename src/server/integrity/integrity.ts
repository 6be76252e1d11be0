/**
 * Reward integrity during a run (docs/integrity.md): canaries, the quarantine they drive, audits of real
 * traffic and drift gauges, wired together. The judge service calls `onComputed` for every judgment it
 * computed (cache hits are no new evidence); that tick schedules canaries and audits, feeds the drift window
 * and remembers which replica produced which judgment.
 *
 * Canary outcomes go through the canary log (in-process, or one Redis stream for every server replica) into
 * the ledger; the ledger's transitions take a replica out of routing (`Backend.setQuarantined`) or put it
 * back, with a warning line carrying the evidence. On quarantine the real judgments the replica produced
 * since its last good canary (the last one that left its CUSUM at 0) are counted as suspect
 * (`reward_suspect_judgments_total`) and named in one `kind: "suspect"` transcript line.
 *
 * Doubt steers the canaries (`canary-schedule.ts`): a replica the ledger has `watching`, one the audits make
 * suspect, or a watching fleet statistic raises the canary rate to its ceiling, the extra canaries aimed at
 * the doubted replicas. The fleet reference is CANARY_REFERENCE (checked against the serving judge at
 * start-up) or the first canaries frozen, shared through the canary log so every process uses one.
 */
import { createHash } from 'node:crypto';

import { z } from 'zod';

import type { ReasoningFormat } from '../../judge/candidate.js';
import { allNodes, type CompiledGraph } from '../../judge/graph.js';
import type { Backend, JudgeObserver, Judgment, JudgmentInput, Router } from '../../judge/types.js';
import { exactInterval, type ExactInterval } from '../../math/binomial.js';
import { PROMPT_VERSION } from '../../roles/index.js';
import type { CanaryRow } from '../../settings/canary-dataset.js';
import {
  judgeMismatch,
  judgeRoutes,
  type CanaryJudge,
  type CanaryReference,
} from '../../settings/canary-reference.js';
import type { CanaryLog } from '../../state/canary-log.js';
import { createAuditor, type AuditSummary, type Auditor } from './audit.js';
import { createCanaryRunner, graphBackends, type CanaryRunner } from './canary.js';
import {
  createCanaryLedger,
  type CanaryEvent,
  type CanaryLedger,
  type FleetRecord,
  type FleetReference,
  type ReplicaRecord,
  type Transition,
} from './canary-ledger.js';
import { doubtOf, type Doubt } from './canary-schedule.js';
import { createDriftTracker, type DriftTracker } from './drift.js';
import type { DriftReading, IntegrityMetrics } from '../observe/metric-types.js';
import type { TranscriptSink } from '../observe/transcripts.js';

export interface IntegrityOptions {
  /** Canary rows; undefined or rate 0 = no canaries. */
  canaries: readonly CanaryRow[] | undefined;
  canaryRate: number;
  /** CANARY_BOOST: the canary rate's ceiling while in doubt, × canaryRate (default 1: none). */
  canaryBoost?: number | undefined;
  /** The configured (default) graph: what canaries judge. */
  graph: CompiledGraph;
  test: { margin: number; threshold: number; floor: number };
  /** The fleet-level test: threshold, CANARY_REFERENCE (or undefined: freeze `referenceSize` canaries). */
  fleet: { threshold: number; reference: CanaryReference | undefined; referenceSize: number };
  window: number;
  canaryMaxInflight: number;
  auditRate: number;
  auditGraph: CompiledGraph | undefined;
  auditMaxInflight: number;
  driftWindow: number;
  deadlineMs: number;
  limits: { minChars: number; maxChars: number };
  /** REASONING_FORMAT, as the judge service has it (default `auto`). */
  reasoningFormat?: ReasoningFormat | undefined;
  router: Router;
  observer: JudgeObserver;
  metrics: IntegrityMetrics;
  log: CanaryLog;
  transcripts?: TranscriptSink | undefined;
  warn(fields: Record<string, unknown>, message: string): void;
  now?: (() => number) | undefined;
}

export interface Integrity {
  /** A judgment the service computed (not a cache hit) under its graph label. */
  onComputed(
    graphLabel: string,
    graph: CompiledGraph,
    input: JudgmentInput,
    id: string,
    judgment: Judgment,
  ): void;
  /** The `GET /v1/integrity` body. */
  report(): IntegrityReport;
  drift(): DriftReading[];
  /** What runs beside real work per computed judgment now: the canary rate and the graph it judges (/v1/plan). */
  background(): { rate: number; graph: CompiledGraph };
  /** Resolves when no canary or audit started here is running. */
  idle(): Promise<void>;
  close(): Promise<void>;
}

export interface IntegrityReport {
  canaries: {
    enabled: boolean;
    rate: number;
    rows: number;
    graph: string;
    shared: boolean;
    /** Canaries per computed judgment now: `rate`, or up to `ceiling` while a replica or the fleet is in doubt. */
    effective_rate: number;
    ceiling: number;
    launched: number;
    /** Canaries aimed at a doubted replica beyond its turn. */
    targeted: number;
    skipped: number;
    owed: number;
    applied: number;
    sequential_test: {
      kind: 'cusum';
      margin: number;
      threshold: number;
      error_floor: number;
      window: number;
    };
    fleet_alert: boolean;
    fleet: Record<string, unknown>;
    replicas: Array<Record<string, unknown>>;
    members: Array<Record<string, unknown>>;
  };
  audit: AuditSummary & { enabled: boolean; replicas: Array<Record<string, unknown>> };
  drift: DriftReading[];
}

/** Judgment ids kept per replica for the suspect line (more are counted, not named). */
const MAX_SUSPECT_IDS = 10_000;

const round = (x: number | null, digits = 4): number | null =>
  x === null ? null : Math.round(x * 10 ** digits) / 10 ** digits;

const interval = (i: ExactInterval): { rate: number | null; ci95: [number | null, number | null] } => ({
  rate: round(i.rate),
  ci95: [round(i.lo), round(i.hi)],
});

const Verdict = z.enum(['match', 'no_match']);
/** A log entry as the ledger needs it (Redis is a boundary: entries are validated, not trusted). */
const CanaryEventSchema = z.object({
  at: z.number(),
  row: z.string(),
  label: Verdict,
  verdict: Verdict.nullable(),
  outcome: z.enum(['correct', 'wrong', 'failed']),
  pins: z.array(z.object({ backend: z.string(), replica: z.string() })),
  members: z.array(
    z.object({
      node: z.string(),
      role: z.string(),
      backend: z.string(),
      replica: z.string(),
      stance: Verdict,
    }),
  ),
  targeted: z.boolean().optional(),
});

/** A shared frozen reference (the canary log's), validated like an entry. */
const FleetReferenceSchema = z.object({
  source: z.literal('frozen'),
  n: z.number().int().min(1),
  wrong: z.number().int().min(0),
});

/** The serving judge as a reference file names it (graph, prompt version, every LLM node's route). */
export function servingJudge(graph: CompiledGraph, router: Router): CanaryJudge {
  const nodes = allNodes(graph)
    .filter((r) => r.role.kind === 'llm')
    .map((r) => {
      const route = router.route(r.node);
      return { id: r.node.id, backend: route.backend.name, model: route.model };
    });
  return {
    graph: { name: graph.name, hash: graph.hash },
    prompt_version: PROMPT_VERSION,
    routes: judgeRoutes(nodes),
  };
}

/** Parses a log entry back into an event; undefined when it is not one (another version's, corrupt). */
function toEvent(entry: string): CanaryEvent | undefined {
  try {
    const parsed = CanaryEventSchema.safeParse(JSON.parse(entry));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** Per replica: the real judgments it produced since its last good canary (named when it is quarantined). */
function createSuspectTracker(
  router: Router,
  metrics: IntegrityMetrics,
  transcripts: TranscriptSink | undefined,
  now: () => number,
) {
  const produced = new Map<string, Array<{ at: number; id: string }>>();
  const overflow = new Map<string, number>();
  const suspects = new Map<string, number>();
  return {
    /** A computed real judgment: remembered against every replica that answered in it. */
    remember(id: string, judgment: Judgment): void {
      const at = now();
      const seen = new Set<string>();
      for (const m of judgment.transcript) {
        if (m.replica === undefined) continue;
        const backend = router.route({ id: m.nodeId, role: m.role }).backend.name;
        const k = key(backend, m.replica);
        if (seen.has(k)) continue;
        seen.add(k);
        let list = produced.get(k);
        if (list === undefined) {
          list = [];
          produced.set(k, list);
        }
        if (list.length < MAX_SUSPECT_IDS) list.push({ at, id });
        else overflow.set(k, (overflow.get(k) ?? 0) + 1);
      }
    },
    pending(rec: ReplicaRecord): number {
      const k = key(rec.backend, rec.replica);
      return (produced.get(k)?.length ?? 0) + (overflow.get(k) ?? 0);
    },
    /** A good canary: the judgments before it are cleared. */
    cleared(rec: ReplicaRecord): void {
      const k = key(rec.backend, rec.replica);
      const list = produced.get(k);
      const since = rec.lastGoodAt ?? 0;
      if (list !== undefined) {
        let drop = 0;
        while (drop < list.length && (list[drop]?.at ?? 0) <= since) drop += 1;
        if (drop > 0) list.splice(0, drop);
      }
      overflow.delete(k);
    },
    /** Quarantine: the pending judgments become suspect (counted, and named in one transcript line). */
    flag(rec: ReplicaRecord): void {
      const k = key(rec.backend, rec.replica);
      const ids = produced.get(k) ?? [];
      const count = ids.length + (overflow.get(k) ?? 0);
      produced.delete(k);
      overflow.delete(k);
      suspects.set(k, (suspects.get(k) ?? 0) + count);
      if (count > 0) metrics.suspectJudgments.labels(rec.backend, rec.replica).inc(count);
      if (transcripts !== undefined && count > 0) {
        void transcripts.write({
          kind: 'suspect',
          time: new Date(now()).toISOString(),
          backend: rec.backend,
          replica: rec.replica,
          reason: 'replica quarantined by the canaries',
          since: rec.lastGoodAt === null ? null : new Date(rec.lastGoodAt).toISOString(),
          count,
          judgment_ids: ids.map((j) => j.id),
        });
      }
    },
    flagged: (rec: ReplicaRecord): number => suspects.get(key(rec.backend, rec.replica)) ?? 0,
  };
}

const key = (backend: string, replica: string): string => `${backend}\u0000${replica}`;

/** A replica's canary evidence, as the warning lines and `GET /v1/integrity` show it. */
function evidence(rec: ReplicaRecord, threshold: number): Record<string, unknown> {
  const decided = rec.correct + rec.wrong;
  const acc = exactInterval(rec.correct, decided);
  return {
    backend: rec.backend,
    replica: rec.replica,
    canaries: decided + rec.failed,
    correct: rec.correct,
    wrong: rec.wrong,
    errors: rec.failed,
    accuracy: round(acc.rate),
    accuracy_ci95: [round(acc.lo), round(acc.hi)],
    reference_accuracy: rec.referenceError === null ? null : round(1 - rec.referenceError),
    cusum: round(rec.s),
    threshold,
  };
}

/** The fleet test as `GET /v1/integrity` shows it: the reference (source, value, interval) and the statistic. */
function fleetReport(
  fleet: FleetRecord,
  options: IntegrityOptions['fleet'],
  file: CanaryReference | undefined,
): Record<string, unknown> {
  const ref = fleet.reference;
  const refAcc = ref === null ? null : exactInterval(ref.n - ref.wrong, ref.n);
  const since = exactInterval(fleet.tested - fleet.wrong, fleet.tested);
  return {
    state: fleet.state,
    reference:
      ref === null
        ? { source: 'frozen', canaries: fleet.collected.n, of: options.referenceSize, accuracy: null }
        : {
            source: ref.source,
            ...(ref.source === 'file' && file !== undefined
              ? { path: file.path, per_row: file.per_row }
              : {}),
            canaries: ref.n,
            accuracy: round(refAcc?.rate ?? null),
            accuracy_ci95: [round(refAcc?.lo ?? null), round(refAcc?.hi ?? null)],
            // What the test assumes: the lower end of the reference's one-sided 90 % interval (floored).
            tested_accuracy: fleet.q0 === null ? null : round(1 - fleet.q0),
          },
    canaries: fleet.tested,
    accuracy: round(since.rate),
    accuracy_ci95: [round(since.lo), round(since.hi)],
    cusum: round(fleet.cusum.s),
    release: round(fleet.cusum.r),
    threshold: options.threshold,
  };
}

/** The shared name of a frozen reference: the same judge, canary set and size make the same reference. */
function referenceName(judge: CanaryJudge, rows: readonly CanaryRow[], size: number): string {
  const h = createHash('sha256');
  h.update(JSON.stringify(judge));
  for (const r of rows) h.update(`|${r.id}`);
  h.update(`|${size}`);
  return h.digest('hex').slice(0, 16);
}

type SuspectTracker = ReturnType<typeof createSuspectTracker>;

/** A CANARY_REFERENCE measured on another judge (graph, prompt version, model) is refused at start-up. */
function checkReference(file: CanaryReference | undefined, judge: CanaryJudge): void {
  if (file === undefined) return;
  const mismatch = judgeMismatch(file.judge, judge);
  if (mismatch === undefined) return;
  throw new Error(
    `CANARY_REFERENCE ${file.path} is not of this judge: ${mismatch}; write it again with \`npm run ablate -- --canary-reference\` against this judge`,
  );
}

/** The ledger over the canaried graph's backends and their replicas, with the fleet test's reference. */
function ledgerFor(options: IntegrityOptions, backends: ReadonlyMap<string, Backend>): CanaryLedger {
  return createCanaryLedger({
    ...options.test,
    window: options.window,
    fleet: [...backends.values()].map((b) => ({
      backend: b.name,
      replicas: b.replicas?.().map((r) => r.replica) ?? [b.name],
    })),
    fleetTest: {
      threshold: options.fleet.threshold,
      reference: options.fleet.reference,
      referenceSize: options.fleet.referenceSize,
    },
  });
}

/**
 * A frozen reference shared through the canary log: the first process to freeze one stores it under a
 * name of the judge, the canary set and the size; every process adopts the stored one (REDIS_URL).
 */
function referenceSharing(options: IntegrityOptions, ledger: CanaryLedger, judge: CanaryJudge) {
  const name = referenceName(judge, options.canaries ?? [], options.fleet.referenceSize);
  const adopt = (stored: string | undefined): void => {
    if (stored === undefined) return;
    try {
      const parsed = FleetReferenceSchema.safeParse(JSON.parse(stored));
      if (parsed.success) ledger.adoptReference(parsed.data);
    } catch {
      // Not a reference (another version's): this process keeps its own.
    }
  };
  return {
    /** Adopts one another process stored (call after subscribing: the replay comes first). */
    readStored(): void {
      if (options.fleet.reference === undefined) void options.log.readReference(name).then(adopt);
    },
    share(reference: FleetReference): void {
      void options.log.shareReference(name, JSON.stringify(reference)).then(adopt);
    },
  };
}

/** What a ledger transition does: routing, the warning lines, suspect judgments, the fleet alert gauge. */
function transitionHandler(
  options: IntegrityOptions,
  backends: ReadonlyMap<string, Backend>,
  suspects: SuspectTracker,
  share: (reference: FleetReference) => void,
): (t: Transition) => void {
  const threshold = options.test.threshold;
  const fleet = (f: FleetRecord): Record<string, unknown> =>
    fleetReport(f, options.fleet, options.fleet.reference);
  return (t) => {
    switch (t.kind) {
      case 'quarantined':
        backends.get(t.record.backend)?.setQuarantined?.(t.record.replica, true);
        options.warn(
          { ...evidence(t.record, threshold), suspect_judgments: suspects.pending(t.record) },
          `canaries: quarantining replica ${t.record.replica} of ${t.record.backend}: its canary accuracy is below the fleet's by more than the margin (sequential test); it gets canaries only until they pass`,
        );
        suspects.flag(t.record);
        return;
      case 'released':
        backends.get(t.record.backend)?.setQuarantined?.(t.record.replica, false);
        options.warn(
          evidence(t.record, threshold),
          `canaries: replica ${t.record.replica} of ${t.record.backend} passes its canaries again: back in routing`,
        );
        return;
      case 'good':
        suspects.cleared(t.record);
        return;
      case 'fleet_test':
        // The fleet alert (below) carries it; a cleared pooled test is one line.
        if (!t.alarmed) {
          options.warn(
            { fleet: fleet(t.fleet) },
            'canaries: the pooled canary accuracy of the fleet is back at its reference',
          );
        }
        return;
      case 'reference_frozen':
        // The first process to freeze one shares it; the others adopt it (REDIS_URL).
        share(t.reference);
        return;
      case 'fleet_alert':
        options.metrics.canaryFleetAlert.set(t.alert ? 1 : 0);
        if (t.alert) {
          options.warn(
            { fleet: fleet(t.fleet), replicas: t.records.map((r) => evidence(r, threshold)) },
            t.fleet.cusum.alarmed
              ? 'canaries: the pooled canary accuracy of the whole fleet dropped below its reference by more than the margin (a fleet-wide drop: judge model, chat template, prompt?): alerting, quarantining nothing for it, serving on'
              : 'canaries: accuracy dropped on more replicas than may be quarantined (fleet-wide drop?): alerting, quarantining nothing more, serving on',
          );
        }
        return;
    }
  };
}

/** The `GET /v1/integrity` body from the parts' current state. */
function integrityReport(
  options: IntegrityOptions,
  parts: {
    canaryOn: boolean;
    ledger: CanaryLedger;
    runner: CanaryRunner | undefined;
    auditor: Auditor;
    suspects: SuspectTracker;
    drift: DriftTracker;
  },
): IntegrityReport {
  const { canaryOn, ledger, runner, auditor, suspects } = parts;
  const shares = new Map((runner?.shares() ?? []).map((x) => [key(x.backend, x.replica), x.share]));
  const replicas = ledger.replicas().map((rec) => ({
    ...evidence(rec, options.test.threshold),
    state: rec.state,
    canary_share: round(shares.get(key(rec.backend, rec.replica)) ?? null),
    quarantined_since: rec.quarantinedAt === null ? null : new Date(rec.quarantinedAt).toISOString(),
    last_good_canary: rec.lastGoodAt === null ? null : new Date(rec.lastGoodAt).toISOString(),
    suspect_judgments: suspects.flagged(rec),
  }));
  const members = ledger.members().map((m) => ({
    node: m.node,
    role: m.role,
    backend: m.backend,
    replica: m.replica,
    canaries: m.positives.n + m.negatives.n,
    accuracy: interval(
      exactInterval(m.positives.correct + m.negatives.correct, m.positives.n + m.negatives.n),
    ),
    tpr: { n: m.positives.n, ...interval(exactInterval(m.positives.correct, m.positives.n)) },
    tnr: { n: m.negatives.n, ...interval(exactInterval(m.negatives.correct, m.negatives.n)) },
  }));
  const rate = canaryOn ? options.canaryRate : 0;
  return {
    canaries: {
      enabled: canaryOn,
      rate,
      effective_rate: round(runner?.rate() ?? 0) ?? 0,
      ceiling: round(rate * Math.max(1, options.canaryBoost ?? 1)) ?? 0,
      rows: options.canaries?.length ?? 0,
      graph: options.graph.name,
      shared: options.log.kind === 'redis',
      launched: runner?.launched ?? 0,
      targeted: runner?.targeted ?? 0,
      skipped: runner?.skipped ?? 0,
      owed: runner?.owed ?? 0,
      applied: ledger.events,
      sequential_test: {
        kind: 'cusum',
        margin: options.test.margin,
        threshold: options.test.threshold,
        error_floor: options.test.floor,
        window: options.window,
      },
      fleet_alert: ledger.fleetAlert,
      fleet: fleetReport(ledger.fleet(), options.fleet, options.fleet.reference),
      replicas,
      members,
    },
    audit: {
      enabled: options.auditRate > 0,
      ...auditor.summary(),
      replicas: auditor.evidence.records().map((r) => ({
        backend: r.backend,
        replica: r.replica,
        audits: r.audits,
        disagreements: r.disagreements,
        peer_disagreement: round(r.peerRate),
        cusum: round(r.s),
        suspect: r.suspect,
      })),
    },
    drift: parts.drift.readings(),
  };
}

/** The canary runner (undefined without canaries) and the auditor, steered by the ledger's doubt. */
function createWorkers(
  options: IntegrityOptions,
  ledger: CanaryLedger,
  canaryOn: boolean,
  now: () => number,
) {
  const { router, metrics } = options;
  const auditor: Auditor = createAuditor({
    rate: options.auditRate,
    graph: options.auditGraph,
    router,
    maxInflight: options.auditMaxInflight,
    deadlineMs: options.deadlineMs,
    limits: options.limits,
    reasoningFormat: options.reasoningFormat,
    observer: options.observer,
    metrics,
    window: options.driftWindow,
    evidence: { ...options.test, window: options.window },
    now,
  });
  const doubt = (): Doubt => doubtOf(ledger.replicas(), ledger.fleet().state, auditor.evidence.suspects());
  const runner: CanaryRunner | undefined = canaryOn
    ? createCanaryRunner({
        rows: options.canaries ?? [],
        rate: options.canaryRate,
        boost: options.canaryBoost,
        doubt,
        graph: options.graph,
        router,
        maxInflight: options.canaryMaxInflight,
        deadlineMs: options.deadlineMs,
        limits: options.limits,
        reasoningFormat: options.reasoningFormat,
        observer: options.observer,
        metrics,
        publish: (event) => void options.log.append(JSON.stringify(event)),
        now,
      })
    : undefined;
  return { auditor, runner };
}

/**
 * Without CANARY_REFERENCE the fleet test has no reference until the first canaries are frozen: one line
 * at start-up says for how long, and that a fleet-wide drop before then is inside the reference.
 */
function warnFrozen(options: IntegrityOptions): void {
  const size = options.fleet.referenceSize;
  const judgments = Math.ceil(size / options.canaryRate);
  options.warn(
    { reference_size: size, judgments },
    `canaries: no CANARY_REFERENCE: the fleet test freezes the first ${size} pooled canaries as its reference (~${judgments} computed judgments); a fleet-wide drop before then is part of the reference and is not alerted. Write one before training with \`npm run ablate -- --dataset CANARY_DATASET --canary-reference FILE\``,
  );
}

export function createIntegrity(options: IntegrityOptions): Integrity {
  const now = options.now ?? Date.now;
  const { router, metrics } = options;
  const judge = servingJudge(options.graph, router);
  checkReference(options.fleet.reference, judge);
  const backends = new Map<string, Backend>(graphBackends(options.graph, router).map((b) => [b.name, b]));
  const ledger = ledgerFor(options, backends);
  const sharing = referenceSharing(options, ledger, judge);
  const drift: DriftTracker = createDriftTracker(options.driftWindow);
  const suspects = createSuspectTracker(router, metrics, options.transcripts, now);
  const onTransition = transitionHandler(options, backends, suspects, (r) => sharing.share(r));
  options.log.subscribe((entry) => {
    const event = toEvent(entry);
    if (event === undefined) return;
    for (const t of ledger.apply(event)) onTransition(t);
  });
  sharing.readStored();

  const canaryOn = options.canaries !== undefined && options.canaries.length > 0 && options.canaryRate > 0;
  const { auditor, runner } = createWorkers(options, ledger, canaryOn, now);
  if (canaryOn && options.fleet.reference === undefined) warnFrozen(options);
  metrics.watchCanaries(() => ({
    rate: runner?.rate() ?? 0,
    shares: runner?.shares() ?? [],
    fleetCusum: ledger.fleet().reference === null ? null : ledger.fleet().cusum.s,
  }));

  return {
    onComputed(graphLabel, graph, input, id, judgment) {
      // Bookkeeping beside the judgment: it must never fail the judgment it watches.
      try {
        drift.record(graphLabel, input.candidate.length, judgment);
        if (canaryOn) suspects.remember(id, judgment);
        runner?.tick();
        auditor.consider(graph, input, judgment);
      } catch (err) {
        options.warn({ err }, 'integrity bookkeeping failed');
      }
    },
    drift: () => drift.readings(),
    report: () => integrityReport(options, { canaryOn, ledger, runner, auditor, suspects, drift }),
    background: () => ({ rate: runner?.rate() ?? 0, graph: options.graph }),
    async idle() {
      await Promise.all([runner?.idle(), auditor.idle()]);
    },
    async close() {
      runner?.close();
      auditor.close();
      await Promise.all([runner?.idle(), auditor.idle()]);
      await options.log.close();
    },
  };
}
