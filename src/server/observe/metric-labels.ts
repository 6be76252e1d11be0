/**
 * Bounded label values (DESIGN §7: never anything unbounded): a label's distinct values capped, the rest
 * reported as `other`, and a replica's in-flight control as one of four laws.
 */
import type { ReplicaSnapshot } from '../../judge/types.js';

/** Distinct model / role label values kept before the rest are reported as `other`. */
export const MAX_LABEL_VALUES = 32;

/** Tenant label values kept (REWARD_KEYS names; reloads can add some) before the rest are `other`. */
export const MAX_TENANT_LABELS = 256;

/** Caps the number of distinct values a label can take (a routing file or inline graph names models). */
export function boundedLabel(max: number): (value: string) => string {
  const seen = new Set<string>();
  return (value) => {
    if (seen.has(value)) return value;
    if (seen.size >= max) return 'other';
    seen.add(value);
    return value;
  };
}

/** The in-flight control of a replica, as a label (bounded). */
export const controlLaw = (r: ReplicaSnapshot): 'engine' | 'gradient' | 'fixed' | 'aimd' =>
  r.inflightControl === 'fixed' || r.inflightControl === 'aimd'
    ? r.inflightControl
    : (r.control?.law ?? 'gradient');

/** Label values capped per label (models, roles and backends come from config and inline graphs). */
export interface CallLabels {
  model: (value: string) => string;
  role: (value: string) => string;
  backend: (value: string) => string;
}
