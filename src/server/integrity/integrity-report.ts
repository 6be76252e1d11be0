/**
 * The replicas' canary evidence, the fleet test and audits as `GET /v1/integrity` and the warning lines
 * show them.
 */
import { exactInterval, type ExactInterval } from '../../math/binomial.js';
import type { CanaryReference } from '../../settings/canary-reference.js';
import type { Auditor } from './audit.js';
import type { CanaryRunner } from './canary.js';
import type { CanaryLedger, FleetRecord, ReplicaRecord } from './canary-ledger.js';
import type { DriftTracker } from './drift.js';
import type { IntegrityOptions, IntegrityReport } from './integrity-types.js';
import { replicaKey, type SuspectTracker } from './suspects.js';

const round = (x: number | null, digits = 4): number | null =>
  x === null ? null : Math.round(x * 10 ** digits) / 10 ** digits;

const interval = (i: ExactInterval): { rate: number | null; ci95: [number | null, number | null] } => ({
  rate: round(i.rate),
  ci95: [round(i.lo), round(i.hi)],
});

/** A replica's canary evidence, as the warning lines and `GET /v1/integrity` show it. */
export function evidence(rec: ReplicaRecord, threshold: number): Record<string, unknown> {
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
export function fleetReport(
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

/** The `GET /v1/integrity` body from the parts' current state. */
export function integrityReport(
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
  const shares = new Map((runner?.shares() ?? []).map((x) => [replicaKey(x.backend, x.replica), x.share]));
  const replicas = ledger.replicas().map((rec) => ({
    ...evidence(rec, options.test.threshold),
    state: rec.state,
    canary_share: round(shares.get(replicaKey(rec.backend, rec.replica)) ?? null),
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
