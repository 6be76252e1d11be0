/**
 * The hooks `buildApp` (app.ts) registers before its routes, in this order: authentication and the
 * shutdown refusal (onRequest), `connection: close` while draining (onSend), request metrics and tenant
 * counts (onResponse), the 404 and error handlers, and the graceful shutdown (preClose, onClose). Also
 * `sendFailure`, the one way a failure is answered, which Fastify's own pre-routing errors use too.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

import { RewardError } from '../../errors.js';
import type { ServerContext } from './context.js';
import { toHttpFailure } from './http-errors.js';
import type { Metrics } from '../observe/metric-types.js';

function retryAfter(details: unknown): number | undefined {
  if (details === null || typeof details !== 'object') return undefined;
  const value: unknown = Reflect.get(details, 'retry_after_s');
  return typeof value === 'number' ? value : undefined;
}

/**
 * The one way a failure is answered: `{ code, message, details? }`, its status, and Retry-After; counted by
 * its code in `errors`.
 */
export function sendFailure(
  errors: Metrics['requestErrors'],
  err: unknown,
  request: FastifyRequest,
  reply: FastifyReply,
): void {
  const failure = toHttpFailure(err);
  errors.labels(request.routeOptions.url ?? 'unmatched', failure.body.code).inc();
  if (failure.body.code === 'RW_CLIENT_ABORTED') {
    // Nobody is listening: one info line, no stack, nothing sent.
    request.log.info(
      { method: request.method, url: request.url.slice(0, 200) },
      'client aborted mid-request',
    );
    return;
  }
  if (failure.internal) request.log.error({ err }, 'internal error');
  const seconds = retryAfter(failure.body.details);
  if (seconds !== undefined) reply.header('retry-after', String(seconds));
  void reply.code(failure.statusCode).send(failure.body);
}

/**
 * Closing the app starts a graceful shutdown: `ctx.lifecycle.closing` turns new requests away (503
 * RW_SHUTTING_DOWN), in-flight judgments and comparisons get SHUTDOWN_GRACE_MS, then they are aborted;
 * once the server has stopped, the budget and tenants close.
 */
export function registerAppHooks(app: FastifyInstance, ctx: ServerContext): void {
  const { config, metrics, access, service, comparisons, budget } = ctx;
  app.addHook('onRequest', async (request, reply) => {
    const route = request.routeOptions.url;
    if (route === '/healthz') return;
    if (ctx.lifecycle.closing) throw new RewardError('RW_SHUTTING_DOWN', 'server is shutting down');
    // 401 / 403 (scopes) / 429 (the tenant's rpm): tenants/auth.ts.
    await access.auth.authorize(request, reply, route === '/metrics' && config.metricsPublic);
  });

  // While draining, answer and hang up: a kept-alive idle socket would hold the server open past close().
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (ctx.lifecycle.closing) reply.header('connection', 'close');
    done(null, payload);
  });

  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url ?? 'unmatched';
    metrics.requests.labels(route, String(reply.statusCode)).inc();
    metrics.requestDuration.labels(route).observe(reply.elapsedTime / 1000);
    access.count(request, route, reply.statusCode);
    done();
  });

  app.setNotFoundHandler((request) => {
    throw new RewardError('RW_NOT_FOUND', `no route ${request.method} ${request.url.slice(0, 200)}`);
  });

  app.setErrorHandler((err, request, reply) => sendFailure(metrics.requestErrors, err, request, reply));

  let graceTimer: NodeJS.Timeout | undefined;
  app.addHook('preClose', (done) => {
    ctx.lifecycle.closing = true;
    graceTimer = setTimeout(() => {
      app.log.warn('shutdown grace period over: aborting judgments still in flight');
      service.abortAll();
      comparisons.abortAll();
    }, config.shutdownGraceMs);
    graceTimer.unref();
    done();
  });
  // Runs once the server has stopped (every connection ended): anything still in flight has no client left.
  app.addHook('onClose', (_instance, done) => {
    clearTimeout(graceTimer);
    budget?.close();
    access.tenants.close();
    service.abortAll();
    comparisons.abortAll();
    done();
  });
}
