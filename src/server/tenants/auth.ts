/**
 * Who may call what: every route's scope (ROUTE_SCOPES), and the request hook that authenticates the bearer
 * key (`keyring.ts`), checks the route's scope, applies the tenant's request rate and remembers the
 * request's tenant for the routes (`tenantOf`). A missing or unknown key is `401 RW_UNAUTHORIZED`; a key
 * without the scope is `403 RW_FORBIDDEN` naming the scope; a refusal is logged by the key's name (never its
 * value), at most once per LOG_INTERVAL_MS per tenant and code, with the count since the last line.
 *
 * A route missing from the table needs `admin`, and `buildApp` refuses to register it (`assertScoped`): a
 * new route says who may call it before it serves.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

import { RewardError } from '../../errors.js';
import type { Scope } from '../../settings/keys-file.js';
import { DEFAULT_TENANT_ENTRY, type Keyring, type Tenant } from './keyring.js';
import type { Tenants } from './tenants.js';

/** `any`: every valid key. */
export type RouteScope = Scope | 'any';

/** Every route pattern and the scope it needs (`/healthz` is never authenticated). */
export const ROUTE_SCOPES: ReadonlyMap<string, RouteScope> = new Map<string, RouteScope>([
  ['/v1/reward', 'reward'],
  ['/v1/reward/batch', 'reward'],
  ['/v1/reward/group-mean', 'reward'],
  ['/v1/judge', 'reward'],
  ['/get_reward', 'reward'],
  ['/slime', 'reward'],
  ['/verify', 'reward'],
  ['/v1/rank', 'rank'],
  ['/v1/best-of-n', 'rank'],
  ['/get_reward/rank', 'rank'],
  ['/slime/rank', 'rank'],
  ['/v1/cancel', 'cancel'],
  ['/v1/plan', 'plan'],
  ['/v1/integrity', 'integrity'],
  ['/metrics', 'metrics'],
  ['/v1/tenants', 'admin'],
  ['/v1/graphs', 'any'],
  ['/v1/graphs/:name', 'any'],
  ['/readyz', 'any'],
]);

/**
 * Throws unless `route` is in ROUTE_SCOPES (or is /healthz): `buildApp` checks every route it registers, so
 * a route that does not say who may call it stops the server from being built.
 */
export function assertScoped(route: string): void {
  if (route !== '/healthz' && !ROUTE_SCOPES.has(route))
    throw new Error(`route ${route} has no scope in ROUTE_SCOPES (src/server/tenants/auth.ts)`);
}

/**
 * `assertScoped` on every route `app` registers until `end()`: `buildApp` checks its own routes. A route a
 * caller adds afterwards (an embedding server, a test) is not in the table: it needs `admin` (`scopeOf`).
 */
export function checkScopes(app: FastifyInstance): { end(): void } {
  let checking = true;
  app.addHook('onRoute', (route) => {
    if (checking) assertScoped(route.url);
  });
  return {
    end: () => {
      checking = false;
    },
  };
}

/** The scope `route` needs: its entry; `any` for an unmatched URL (it answers 404); else `admin`. */
export function scopeOf(route: string | undefined): RouteScope {
  if (route === undefined) return 'any';
  return ROUTE_SCOPES.get(route) ?? 'admin';
}

/** Routes whose requests count against a tenant's `rpm` (the ones that judge). */
const RATED: ReadonlySet<RouteScope> = new Set<RouteScope>(['reward', 'rank']);

const LOG_INTERVAL_MS = 10_000;

/** The tenant of each authorized request (requests are objects of one app each: one map serves all). */
const TENANT_OF = new WeakMap<FastifyRequest, Tenant>();

/** The tenant of an authorized request (`default` for one that was not authenticated: /healthz). */
export const tenantOf = (request: FastifyRequest): Tenant => TENANT_OF.get(request) ?? DEFAULT_TENANT_ENTRY;

export interface Auth {
  /** The onRequest step: authenticates, checks the scope and the rate; throws the refusal. */
  authorize(request: FastifyRequest, reply: FastifyReply, publicRoute: boolean): Promise<void>;
  /** The tenant of an authorized request (`default` for one that was not authenticated: /healthz). */
  tenantOf(request: FastifyRequest): Tenant;
  /** True once the request was authenticated (its tenant is counted in reward_tenant_requests_total). */
  isAuthenticated(request: FastifyRequest): boolean;
}

export interface AuthOptions {
  keyring: Keyring;
  tenants: Tenants;
  warn: (fields: Record<string, unknown>, message: string) => void;
  now?: (() => number) | undefined;
}

export function createAuth(options: AuthOptions): Auth {
  const { keyring, tenants } = options;
  const now = options.now ?? Date.now;
  const logged = new Map<string, { at: number; refused: number }>();

  /** One rate-limited warning per tenant and code. */
  const refused = (key: string, fields: Record<string, unknown>, message: string): void => {
    const seen = logged.get(key);
    if (seen !== undefined && now() - seen.at < LOG_INTERVAL_MS) {
      seen.refused += 1;
      return;
    }
    if (logged.size > 1024) logged.clear();
    logged.set(key, { at: now(), refused: 0 });
    options.warn({ ...fields, refused_since_last: seen?.refused ?? 0 }, message);
  };

  return {
    async authorize(request, reply, publicRoute) {
      const route = request.routeOptions.url;
      if (publicRoute) return;
      const tenant = keyring.authenticate(request.headers.authorization);
      if (tenant === undefined) {
        const missing = request.headers.authorization === undefined;
        refused(
          `401:${missing ? 'missing' : 'unknown'}`,
          { route: route ?? 'unmatched', key: missing ? 'missing' : 'unknown' },
          'request refused: missing or unknown key',
        );
        reply.header('www-authenticate', 'Bearer');
        throw new RewardError('RW_UNAUTHORIZED', 'missing or wrong bearer token (Authorization: Bearer …)');
      }
      const scope = scopeOf(route);
      if (scope !== 'any' && !tenant.scopes.has(scope)) {
        refused(
          `403:${tenant.name}:${scope}`,
          { tenant: tenant.name, route, scope },
          `key "${tenant.name}" refused: it lacks the scope "${scope}"`,
        );
        throw new RewardError('RW_FORBIDDEN', `this key (${tenant.name}) lacks the scope "${scope}"`, {
          details: { scope, tenant: tenant.name },
        });
      }
      TENANT_OF.set(request, tenant);
      if (!RATED.has(scope)) return;
      const limited = await tenants.admitRequest(tenant);
      if (limited !== undefined) throw limited;
    },
    tenantOf,
    isAuthenticated: (request) => TENANT_OF.has(request),
  };
}
