/**
 * The scrape-time gauges' callbacks (metrics.ts names and describes each): a gauge per row of a source read
 * at every scrape, its series reset and set again, so a replica or graph gone from the source leaves no
 * stale series.
 */
import { Gauge, type Registry } from 'prom-client';

import type { ReplicaSnapshot } from '../../judge/types.js';
import type { DriftReading } from './metric-types.js';

/** Registers a gauge per backend and replica, set from each snapshot at every scrape. */
export function replicaGauges(
  registers: Registry[],
  snapshots: () => ReplicaSnapshot[],
): (name: string, help: string, read: (r: ReplicaSnapshot) => number) => void {
  return (name, help, read) => {
    new Gauge({
      name,
      help,
      labelNames: ['backend', 'replica'] as const,
      registers,
      collect() {
        this.reset();
        for (const r of snapshots()) this.labels(r.backend, r.replica).set(read(r));
      },
    });
  };
}

/**
 * Registers a gauge of the engine's own numbers per backend and replica, from its last fresh /metrics
 * reading: no series without one.
 */
export function engineGauges(
  registers: Registry[],
  snapshots: () => ReplicaSnapshot[],
): (name: string, help: string, read: (r: ReplicaSnapshot) => number | undefined) => void {
  return (name, help, read) => {
    new Gauge({
      name,
      help,
      labelNames: ['backend', 'replica'] as const,
      // WORKERS>1: every worker reads the same engine.
      aggregator: 'max',
      registers,
      collect() {
        this.reset();
        for (const r of snapshots()) {
          const v = read(r);
          if (v !== undefined) this.labels(r.backend, r.replica).set(v);
        }
      },
    });
  };
}

/** Registers a drift gauge per graph, absent where its reading is null. */
export function driftGauges(
  registers: Registry[],
  driftSource: () => readonly DriftReading[],
): (name: string, help: string, read: (d: DriftReading) => number | null) => void {
  return (name, help, read) => {
    new Gauge({
      name,
      help,
      labelNames: ['graph'] as const,
      registers,
      collect() {
        this.reset();
        for (const d of driftSource()) {
          const value = read(d);
          if (value !== null) this.labels(d.graph).set(value);
        }
      },
    });
  };
}
