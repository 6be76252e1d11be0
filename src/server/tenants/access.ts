/**
 * The tenants of one app, built once by `buildApp`: the keyring (who a key is), the per-tenant state
 * (budgets, rates, fair-queue flows) and the request hook (scopes). `main.ts` builds the keyring itself to
 * reload it on SIGHUP and when the file changes; tests hand one in to reload it by hand.
 */
import type { FastifyRequest } from 'fastify';

import type { Config } from '../../config.js';
import { createLocalBudget } from '../../state/local.js';
import type { SharedState } from '../../state/types.js';
import type { TenantMetrics } from '../observe/metric-types.js';
import { createAuth, type Auth } from './auth.js';
import { createKeyring, type Keyring, type ReloadOutcome } from './keyring.js';
import { createTenants, type Tenants } from './tenants.js';

export interface Access {
  keyring: Keyring;
  tenants: Tenants;
  auth: Auth;
  /** Counts an answered request under its tenant (authenticated requests only). */
  count(request: FastifyRequest, route: string, status: number): void;
}

export interface AccessOptions {
  config: Config;
  /** Default: built from the config's REWARD_API_KEY and REWARD_KEYS. */
  keyring?: Keyring | undefined;
  state: SharedState;
  metrics: TenantMetrics;
  /** WORKERS: without Redis each worker enforces its share of the tenants' budgets and rates. */
  ways?: number | undefined;
  now: () => number;
  warn: (fields: Record<string, unknown>, message: string) => void;
}

export function createAccess(options: AccessOptions): Access {
  const { config } = options;
  const keyring = options.keyring ?? createKeyring({ apiKey: config.apiKey, keys: config.keys });
  const tenants = createTenants({
    keyring,
    fairQueuing: config.fairQueuing,
    cacheScope: config.cacheScope,
    budgetStore: options.state.budget ?? createLocalBudget(options.now),
    shared: options.state.kind === 'redis',
    buckets: options.state.buckets,
    ways: options.ways,
    cachedWeight: config.cachedTokenWeight,
    metrics: options.metrics,
    now: options.now,
    warn: options.warn,
  });
  const auth = createAuth({ keyring, tenants, warn: options.warn, now: options.now });
  const { metrics } = options;
  return {
    keyring,
    tenants,
    auth,
    count(request, route, status) {
      if (!auth.isAuthenticated(request)) return;
      metrics.requests.labels(metrics.label(auth.tenantOf(request).name), route, String(status)).inc();
    },
  };
}

/**
 * Logs and counts one reload of the keys file: `ok` with the number of tenants, or `invalid` with why
 * (the old keys keep serving). What SIGHUP and the file watch report to.
 */
export function reportReload(
  outcome: ReloadOutcome,
  metrics: TenantMetrics,
  log: {
    info: (fields: Record<string, unknown>, message: string) => void;
    warn: (fields: Record<string, unknown>, message: string) => void;
  },
): void {
  metrics.keyReloads.labels(outcome.ok ? 'ok' : 'invalid').inc();
  if (outcome.ok) log.info({ tenants: outcome.tenants }, 'keys file reloaded');
  else
    log.warn({ error: outcome.error }, `keys file not reloaded, the old keys keep serving: ${outcome.error}`);
}
