/**
 * GET /healthz (alive), /readyz (backend reachable and not saturated: a default-graph judgment would be
 * admitted), /metrics (Prometheus text).
 */
import type { FastifyInstance } from 'fastify';

import type { Backend } from '../../../judge/types.js';
import type { ServerContext } from '../context.js';

const PING_TIMEOUT_MS = 2000;

async function reachable(backend: Backend): Promise<boolean> {
  if (backend.ping === undefined) return true;
  try {
    return await backend.ping(AbortSignal.timeout(PING_TIMEOUT_MS));
  } catch {
    return false;
  }
}

/** `{response_format: {replica: format}}` for backends with replicas (none for the offline backend). */
function responseFormats(backend: Backend): { response_format?: Record<string, string> } {
  const formats: Record<string, string> = {};
  let any = false;
  for (const r of backend.replicas?.() ?? []) {
    if (r.responseFormat === undefined) continue;
    formats[r.replica] = r.responseFormat;
    any = true;
  }
  return any ? { response_format: formats } : {};
}

/**
 * `{engine_gauges: {replica: trusted | distrusted}}` for replicas read through engine metrics: distrusted
 * while the engine's gauges contradict our own calls in flight (the replica is then steered from
 * completions: src/judge/inflight-control.ts).
 */
function engineGauges(backend: Backend): { engine_gauges?: Record<string, string> } {
  const gauges: Record<string, string> = {};
  let any = false;
  for (const r of backend.replicas?.() ?? []) {
    const gauge = r.control?.gauge;
    if (gauge === undefined) continue;
    gauges[r.replica] = gauge;
    any = true;
  }
  return any ? { engine_gauges: gauges } : {};
}

export function registerOpsRoutes(app: FastifyInstance, ctx: ServerContext): void {
  const { router, admission, metrics, lifecycle, state } = ctx;

  app.get('/healthz', () => ({ status: 'ok' }));

  app.get('/readyz', async (_request, reply) => {
    // Admission state first: the backend pings below may take up to PING_TIMEOUT_MS.
    const saturated = admission.saturated(ctx.defaultGraph.graph, ctx.config.requestDeadlineMs);
    const judgments = {
      running: admission.running,
      queued: admission.waiting,
      max_concurrent: admission.maxConcurrent,
      max_queued: admission.maxQueued,
      backlog_calls: Math.round(admission.backlogCalls),
      predicted_wait_s: Math.round(admission.predictedWaitS() * 10) / 10,
      drain_calls_per_s: Math.round(admission.drainCallsPerS()),
    };
    const backends = await Promise.all(
      router.backends().map(async (b) => ({
        name: b.name,
        reachable: await reachable(b),
        saturated: b.isSaturated?.() ?? false,
        // Per replica: json_schema, or json_object while it refuses the schema (docs/backends.md).
        ...responseFormats(b),
        ...engineGauges(b),
      })),
    );
    const ready = !lifecycle.closing && !saturated && backends.every((b) => b.reachable);
    reply.code(ready ? 200 : 503);
    return {
      ready,
      backend: router.name,
      shutting_down: lifecycle.closing,
      saturated,
      judgments,
      backends,
      // Degraded shared state keeps the server ready: it judges on local state (docs/scale-out.md).
      shared_state: state.status(),
      // JUDGE_TOKEN_BUDGET: an exhausted budget keeps the server ready (every replica shares it); it
      // refuses new work with 429 RW_BUDGET_EXHAUSTED.
      budget: ctx.budget?.status() ?? null,
      process: { pid: process.pid, worker: ctx.workerId ?? null },
    };
  });

  app.get('/metrics', async (_request, reply) => {
    const text = await ctx.metricsText();
    reply.header('content-type', metrics.registry.contentType);
    return text;
  });
}
