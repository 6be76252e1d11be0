/** The Registry every metric of an app is registered on, with prom-client's default process metrics. */
import { collectDefaultMetrics, Registry } from 'prom-client';

/**
 * prom-client's default gauges whose `_total` suffix breaks the Prometheus rule that only counters end in
 * `_total` (`promtool check metrics`). Each is the sum over `type` of the labelled gauge of the same name
 * without the suffix (`sum(nodejs_active_handles)`), so leaving them out loses nothing.
 */
const MISNAMED_DEFAULT_GAUGES = [
  'nodejs_active_handles_total',
  'nodejs_active_requests_total',
  'nodejs_active_resources_total',
];

/** A fresh Registry with prom-client's default process metrics (less the three misnamed ones). */
export function createRegistry(): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  for (const name of MISNAMED_DEFAULT_GAUGES) registry.removeSingleMetric(name);
  return registry;
}
