/**
 * One replica of the OpenAI-compatible backend and what the backend asks of its replicas together: its
 * connection pool, in-flight limit (fixed, AIMD or engine-aware control), circuit breaker, response format
 * and attempt counts (createReplica); the wait for an open circuit (waitForReplica); reachability,
 * saturation, metrics snapshots and shutdown.
 */
import { Pool } from 'undici';

import {
  inflightControlOf,
  type BackendSettings,
  type InflightControl as InflightControlSetting,
} from '../../settings/routing-file.js';
import { createEngineScraper, engineMetricsUrl, type EngineScraper } from '../engine-metrics.js';
import { createInflightControl, type InflightControl } from '../inflight-control.js';
import { createLimiter, type Limiter } from '../limiter.js';
import { acquireLoopLag } from '../loop-lag.js';
import { createBreaker, type Breaker, type BreakerOptions, type ReplicaPicker } from '../replicas.js';
import { abortableSleep } from '../retry.js';
import type { ReplicaOutcome, ReplicaSnapshot } from '../types.js';
import { AttemptError, verdictOf } from './openai-errors.js';
import type { ReplicaFormat } from './response-format.js';

const PING_TIMEOUT_MS = 5_000;
const MAX_RESPONSE_BYTES = 16 * 1024 * 1024;
/** While every circuit is open: how often a half-open replica with a probe in flight is looked at, ms. */
const CIRCUIT_POLL_MS = 100;
const MIN_CIRCUIT_WAIT_MS = 5;

/** One replica: its connection pool, in-flight limit and its control, circuit breaker and attempt counts. */
export interface Replica {
  url: string;
  /** Metric label: host[:port], plus the path when two replicas share a host. */
  label: string;
  pool: Pool;
  chatPath: string;
  modelsPath: string;
  limiter: Limiter;
  /** How the limit is set: `engine` (control steers it), `fixed`, `aimd`. */
  mode: InflightControlSetting;
  /** The engine-aware control of the limit (mode `engine`). */
  control: InflightControl | undefined;
  breaker: Breaker;
  /** Calls routed here and waiting for a sibling's prefill (part of the picker's load). */
  pending: number;
  /** Out of real work (canary quarantine); still receives pinned calls. */
  quarantined: boolean;
  attempts: Map<ReplicaOutcome, number>;
  /** The response format this replica is sent (json_schema, or json_object after a refusal). */
  format: ReplicaFormat;
  /** It refused a request priority (`engine_priority` set, vLLM without priority scheduling): none is sent. */
  priorityRefused: boolean;
  /**
   * Records one attempt's end: counts, breaker, the limit's control. Call before releasing its slot.
   * `headersAt`: when its response headers arrived; `kind`: its role (latencies compare within a kind);
   * `input`: the input judged (inputKey), for the breaker.
   */
  settle(outcome: ReplicaOutcome, sentAt: number, headersAt?: number, kind?: string, input?: string): void;
  /** Stops the engine-metrics scraper. */
  close(): Promise<void>;
}

/** The replica's engine-metrics scraper, per `engine_metrics`; undefined when `off`. */
function scraperFor(url: string, index: number, settings: BackendSettings): EngineScraper | undefined {
  const setting = settings.engine_metrics;
  if (setting === 'off') return undefined;
  const metricsUrl = setting === 'auto' ? engineMetricsUrl(url) : setting[index];
  if (metricsUrl === undefined) return undefined;
  return createEngineScraper({
    url: metricsUrl,
    intervalMs: settings.engine_metrics_interval_ms,
    apiKey: settings.api_key,
  });
}

/**
 * Replica `index` of `all` (the backend's base URLs). Its pool holds `max_inflight` keep-alive connections
 * whose undici timeouts back up our per-attempt timer (`timeout_ms` + 5 s) and cap a body at 16 MiB; in mode
 * `engine` it starts an engine-metrics scraper and holds the event-loop lag monitor until `close()`.
 * `createFormat` builds its response format from its label.
 */
export function createReplica(
  url: string,
  index: number,
  all: readonly string[],
  settings: BackendSettings,
  breakerOptions: BreakerOptions | undefined,
  createFormat: (label: string) => ReplicaFormat,
): Replica {
  const base = new URL(url);
  const basePath = base.pathname.replace(/\/+$/, '');
  const sharedHost = all.some((other, i) => i !== index && new URL(other).host === base.host);
  const mode = inflightControlOf(settings);
  const scraper = mode === 'engine' ? scraperFor(url, index, settings) : undefined;
  const lag = mode === 'engine' ? acquireLoopLag() : undefined;
  const control =
    lag === undefined
      ? undefined
      : createInflightControl({
          ceiling: settings.max_inflight,
          scraper,
          lagMs: (from, to) => lag.maxLagMs(from, to),
        });
  const limiter = createLimiter({
    maxInflight: settings.max_inflight,
    adaptive: mode === 'aimd' ? {} : false,
    control,
  });
  const breaker = createBreaker(breakerOptions);
  const attempts = new Map<ReplicaOutcome, number>();
  const label = sharedHost ? `${base.host}${basePath}` : base.host;
  return {
    url,
    label,
    pool: new Pool(base.origin, {
      connections: settings.max_inflight,
      // Our per-attempt timer is the real limit; these only back it up.
      headersTimeout: settings.timeout_ms + 5_000,
      bodyTimeout: settings.timeout_ms + 5_000,
      // A chat completion is kilobytes; a runaway body must not exhaust memory.
      maxResponseSize: MAX_RESPONSE_BYTES,
    }),
    chatPath: `${basePath}/chat/completions${base.search}`,
    modelsPath: `${basePath}/models${base.search}`,
    limiter,
    mode,
    control,
    breaker,
    pending: 0,
    quarantined: false,
    attempts,
    format: createFormat(label),
    priorityRefused: false,
    settle(outcome, sentAt, headersAt, kind, input) {
      attempts.set(outcome, (attempts.get(outcome) ?? 0) + 1);
      breaker.settle(verdictOf(outcome), input);
      const latencyMs = Date.now() - sentAt;
      const served = outcome === 'ok' || outcome === 'unparsable';
      const overloaded = outcome === 'timeout' || outcome === 'http_429' || outcome === 'http_503';
      if (served || overloaded || control !== undefined) {
        limiter.observe({
          sentAt,
          latencyMs,
          overloaded,
          headersAt,
          result: served ? 'ok' : outcome === 'timeout' ? 'timeout' : 'other',
          kind,
        });
      }
    },
    async close() {
      lag?.release();
      await scraper?.close();
    },
  };
}

/** What waitForReplica needs of the backend. */
export interface CircuitWait {
  /** The backend's name, for the error. */
  name: string;
  replicas: readonly Replica[];
  picker: ReplicaPicker;
  /** The longest open circuit a call waits for, ms. */
  maxCircuitWaitMs: number;
}

/**
 * The replica for the next attempt. While every circuit is open, a call waits — once, without spending
 * an attempt — for the first replica to take calls again, if that is before the deadline and within the
 * breaker's first open period (a circuit open longer has failed its probes: the backend is down, and
 * calls fail at once as before). A burst of calls that hung together times out together and opens a lone
 * replica's circuit: their retries spent every attempt against it within a second and failed (issue 23).
 * Throws a `connection` AttemptError when it does not wait; rejects with the abort error on `signal`.
 * `circuit.waited` is set once the call has waited.
 */
export async function waitForReplica(
  backend: CircuitWait,
  key: string,
  avoid: number | undefined,
  signal: AbortSignal,
  deadline: number,
  circuit: { waited: boolean },
): Promise<number> {
  let slept = false;
  try {
    for (;;) {
      const index = backend.picker.pick(key, avoid);
      if (index !== undefined) return index;
      let waitMs = Infinity;
      // A half-open replica whose probe is in flight is looked at again shortly.
      for (const r of backend.replicas) waitMs = Math.min(waitMs, r.breaker.waitMs?.() ?? CIRCUIT_POLL_MS);
      waitMs = Math.max(MIN_CIRCUIT_WAIT_MS, waitMs);
      if (circuit.waited || waitMs > backend.maxCircuitWaitMs || Date.now() + waitMs >= deadline) {
        throw new AttemptError('connection', `every replica of ${backend.name} has an open circuit`);
      }
      slept = true;
      await abortableSleep(waitMs, signal);
    }
  } finally {
    if (slept) circuit.waited = true;
  }
}

/**
 * Whether the replica answers `GET /models` with a 2xx within min(`timeoutMs`, 5 s). Never rejects: a
 * timeout, connection error or abort of `signal` is `false`.
 */
export async function pingReplica(
  replica: Replica,
  headers: Record<string, string>,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<boolean> {
  const controller = new AbortController();
  const onAbort = (): void => controller.abort(signal.reason);
  signal.addEventListener('abort', onAbort, { once: true });
  const timer = setTimeout(() => controller.abort(), Math.min(timeoutMs, PING_TIMEOUT_MS));
  try {
    const res = await replica.pool.request({
      method: 'GET',
      path: replica.modelsPath,
      headers,
      signal: controller.signal,
    });
    await res.body.dump();
    return res.statusCode >= 200 && res.statusCode < 300;
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
    signal.removeEventListener('abort', onAbort);
  }
}

/** Every replica with a closed (or probing) circuit is at its limit with calls queued. */
export function allSaturated(replicas: readonly Replica[]): boolean {
  // Quarantined replicas take no real work, unless no other one is available (as in the picker).
  const available = replicas.filter((r) => r.breaker.available());
  const serving = available.filter((r) => !r.quarantined);
  const usable = serving.length > 0 ? serving : available;
  return (
    usable.length === 0 || usable.every((r) => r.limiter.inflight >= r.limiter.limit && r.limiter.waiting > 0)
  );
}

/** The replica's state for metrics, under the backend's name (maps copied: later attempts don't show). */
export function snapshotOf(backend: string, r: Replica): ReplicaSnapshot {
  return {
    backend,
    replica: r.label,
    state: r.breaker.state,
    inflight: r.limiter.inflight,
    waiting: r.limiter.waiting,
    limit: r.limiter.limit,
    maxInflight: r.limiter.maxInflight,
    attempts: new Map(r.attempts),
    circuitOpens: r.breaker.opens,
    responseFormat: r.format.mode,
    responseFormatSwitches: new Map(r.format.switches),
    quarantined: r.quarantined,
    inflightControl: r.mode,
    control: r.control?.snapshot(),
  };
}

/** Stops the replica's scraper and closes its pool; calls still in flight are cut (they'd hold it open). */
export async function closeReplica(r: Replica): Promise<void> {
  await r.close();
  await (r.limiter.inflight === 0 ? r.pool.close() : r.pool.destroy());
}
