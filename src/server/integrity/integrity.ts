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
 */
import { z } from 'zod';

import type { ReasoningFormat } from '../../judge/candidate.js';
import type { CompiledGraph } from '../../judge/graph.js';
import type { Backend, JudgeObserver, Judgment, JudgmentInput, Router } from '../../judge/types.js';
import { exactInterval, type ExactInterval } from '../../math/binomial.js';
import type { CanaryRow } from '../../settings/canary-dataset.js';
import type { CanaryLog } from '../../state/canary-log.js';
import { createAuditor, type AuditSummary, type Auditor } from './audit.js';
import { createCanaryRunner, graphBackends, type CanaryRunner } from './canary.js';
import {
  createCanaryLedger,
  type CanaryEvent,
  type CanaryLedger,
  type ReplicaRecord,
  type Transition,
} from './canary-ledger.js';
import { createDriftTracker, type DriftTracker } from './drift.js';
import type { DriftReading, IntegrityMetrics } from '../observe/metrics.js';
import type { TranscriptSink } from '../observe/transcripts.js';

export interface IntegrityOptions {
  /** Canary rows; undefined or rate 0 = no canaries. */
  canaries: readonly CanaryRow[] | undefined;
  canaryRate: number;
  /** The configured (default) graph: what canaries judge. */
  graph: CompiledGraph;
  test: { margin: number; threshold: number; floor: number };
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
    launched: number;
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
    replicas: Array<Record<string, unknown>>;
    members: Array<Record<string, unknown>>;
  };
  audit: AuditSummary & { enabled: boolean };
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
});

/** Parses a log entry back into an event; undefined when it is not one (another version's, corrupt). */
function toEvent(entry: string): CanaryEvent | undefined {
  try {
    const parsed = CanaryEventSchema.safeParse(JSON.parse(entry));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

export function createIntegrity(options: IntegrityOptions): Integrity {
  const now = options.now ?? Date.now;
  const { router, metrics } = options;
  const backends = new Map<string, Backend>(graphBackends(options.graph, router).map((b) => [b.name, b]));
  const ledger: CanaryLedger = createCanaryLedger({
    ...options.test,
    window: options.window,
    fleet: [...backends.values()].map((b) => ({
      backend: b.name,
      replicas: b.replicas?.().map((r) => r.replica) ?? [b.name],
    })),
  });
  const drift: DriftTracker = createDriftTracker(options.driftWindow);
  /** Per replica: real judgments since its last good canary, oldest first. */
  const produced = new Map<string, Array<{ at: number; id: string }>>();
  const overflow = new Map<string, number>();
  const suspects = new Map<string, number>();
  const key = (backend: string, replica: string): string => `${backend}\u0000${replica}`;

  const suspectLine = (rec: ReplicaRecord): void => {
    const k = key(rec.backend, rec.replica);
    const ids = produced.get(k) ?? [];
    const count = ids.length + (overflow.get(k) ?? 0);
    produced.delete(k);
    overflow.delete(k);
    suspects.set(k, (suspects.get(k) ?? 0) + count);
    if (count > 0) metrics.suspectJudgments.labels(rec.backend, rec.replica).inc(count);
    if (options.transcripts !== undefined && count > 0) {
      void options.transcripts.write({
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
  };

  const evidence = (rec: ReplicaRecord): Record<string, unknown> => {
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
      threshold: options.test.threshold,
    };
  };

  const onTransition = (t: Transition): void => {
    switch (t.kind) {
      case 'quarantined': {
        backends.get(t.record.backend)?.setQuarantined?.(t.record.replica, true);
        const k = key(t.record.backend, t.record.replica);
        const pending = (produced.get(k)?.length ?? 0) + (overflow.get(k) ?? 0);
        options.warn(
          { ...evidence(t.record), suspect_judgments: pending },
          `canaries: quarantining replica ${t.record.replica} of ${t.record.backend}: its canary accuracy is below the fleet's by more than the margin (sequential test); it gets canaries only until they pass`,
        );
        suspectLine(t.record);
        return;
      }
      case 'released':
        backends.get(t.record.backend)?.setQuarantined?.(t.record.replica, false);
        options.warn(
          evidence(t.record),
          `canaries: replica ${t.record.replica} of ${t.record.backend} passes its canaries again: back in routing`,
        );
        return;
      case 'good': {
        const k = key(t.record.backend, t.record.replica);
        const list = produced.get(k);
        const since = t.record.lastGoodAt ?? 0;
        if (list !== undefined) {
          let drop = 0;
          while (drop < list.length && (list[drop]?.at ?? 0) <= since) drop += 1;
          if (drop > 0) list.splice(0, drop);
        }
        overflow.delete(k);
        return;
      }
      case 'fleet_alert':
        metrics.canaryFleetAlert.set(t.alert ? 1 : 0);
        if (t.alert) {
          options.warn(
            { replicas: t.records.map(evidence) },
            'canaries: accuracy dropped on more replicas than may be quarantined (fleet-wide drop?): alerting, quarantining nothing more, serving on',
          );
        }
        return;
    }
  };

  options.log.subscribe((entry) => {
    const event = toEvent(entry);
    if (event === undefined) return;
    for (const t of ledger.apply(event)) onTransition(t);
  });

  const canaryOn = options.canaries !== undefined && options.canaries.length > 0 && options.canaryRate > 0;
  const runner: CanaryRunner | undefined = canaryOn
    ? createCanaryRunner({
        rows: options.canaries ?? [],
        rate: options.canaryRate,
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
    now,
  });

  const remember = (id: string, judgment: Judgment): void => {
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
  };

  return {
    onComputed(graphLabel, graph, input, id, judgment) {
      // Bookkeeping beside the judgment: it must never fail the judgment it watches.
      try {
        drift.record(graphLabel, input.candidate.length, judgment);
        if (canaryOn) remember(id, judgment);
        runner?.tick();
        auditor.consider(graph, input, judgment);
      } catch (err) {
        options.warn({ err }, 'integrity bookkeeping failed');
      }
    },
    drift: () => drift.readings(),
    report() {
      const replicas = ledger.replicas().map((rec) => ({
        ...evidence(rec),
        state: rec.state,
        quarantined_since: rec.quarantinedAt === null ? null : new Date(rec.quarantinedAt).toISOString(),
        last_good_canary: rec.lastGoodAt === null ? null : new Date(rec.lastGoodAt).toISOString(),
        suspect_judgments: suspects.get(key(rec.backend, rec.replica)) ?? 0,
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
      return {
        canaries: {
          enabled: canaryOn,
          rate: canaryOn ? options.canaryRate : 0,
          rows: options.canaries?.length ?? 0,
          graph: options.graph.name,
          shared: options.log.kind === 'redis',
          launched: runner?.launched ?? 0,
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
          replicas,
          members,
        },
        audit: { enabled: options.auditRate > 0, ...auditor.summary() },
        drift: drift.readings(),
      };
    },
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
