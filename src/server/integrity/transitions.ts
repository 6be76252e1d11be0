/**
 * What a canary ledger transition does (integrity.ts): routing (quarantine and release), the warning lines,
 * suspect judgments, the fleet alert gauge, and a frozen reference shared.
 */
import type { Backend } from '../../judge/types.js';
import type { FleetRecord, FleetReference, Transition } from './canary-ledger.js';
import type { IntegrityOptions } from './integrity-types.js';
import { evidence, fleetReport } from './integrity-report.js';
import type { SuspectTracker } from './suspects.js';

/** What a ledger transition does: routing, the warning lines, suspect judgments, the fleet alert gauge. */
export function transitionHandler(
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
