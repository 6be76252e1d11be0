/**
 * Suspect judgments (docs/integrity.md): per replica, the real judgments it produced since its last good
 * canary; on quarantine they are counted (`reward_suspect_judgments_total`) and named in one `kind: "suspect"`
 * transcript line.
 */
import type { Judgment, Router } from '../../judge/types.js';
import type { ReplicaRecord } from './canary-ledger.js';
import type { IntegrityMetrics } from '../observe/metric-types.js';
import type { TranscriptSink } from '../observe/transcripts.js';

/** Judgment ids kept per replica for the suspect line (more are counted, not named). */
const MAX_SUSPECT_IDS = 10_000;

/** Per replica: the real judgments it produced since its last good canary (named when it is quarantined). */
export function createSuspectTracker(
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
        const k = replicaKey(backend, m.replica);
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
      const k = replicaKey(rec.backend, rec.replica);
      return (produced.get(k)?.length ?? 0) + (overflow.get(k) ?? 0);
    },
    /** A good canary: the judgments before it are cleared. */
    cleared(rec: ReplicaRecord): void {
      const k = replicaKey(rec.backend, rec.replica);
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
      const k = replicaKey(rec.backend, rec.replica);
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
    flagged: (rec: ReplicaRecord): number => suspects.get(replicaKey(rec.backend, rec.replica)) ?? 0,
  };
}

export const replicaKey = (backend: string, replica: string): string => `${backend}\u0000${replica}`;

export type SuspectTracker = ReturnType<typeof createSuspectTracker>;
