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
 *
 * Here: the parts wired. Beside it: the shapes (`integrity-types.ts`), log entries read back
 * (`canary-events.ts`), the fleet reference and its judge (`fleet-reference.ts`), the ledger's transitions
 * acted on (`transitions.ts`), suspect judgments (`suspects.ts`) and the `GET /v1/integrity` body
 * (`integrity-report.ts`).
 */
import type { Backend } from '../../judge/types.js';
import { createAuditor, type Auditor } from './audit.js';
import { createCanaryRunner, graphBackends, type CanaryRunner } from './canary.js';
import { createCanaryLedger, type CanaryLedger } from './canary-ledger.js';
import { doubtOf, type Doubt } from './canary-schedule.js';
import { createDriftTracker, type DriftTracker } from './drift.js';
import type { Integrity, IntegrityOptions } from './integrity-types.js';
import { toEvent } from './canary-events.js';
import { checkReference, referenceSharing, servingJudge } from './fleet-reference.js';
import { integrityReport } from './integrity-report.js';
import { createSuspectTracker } from './suspects.js';
import { transitionHandler } from './transitions.js';

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
