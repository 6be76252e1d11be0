/**
 * What the server keeps per tenant (REWARD_KEYS, `keyring.ts`): the `TenantWork` its requests carry into
 * admission and the serving services (its fair-queue flow and weight, its lane cap, its cache scope, its
 * spend), its own token budget (`token_budget` per `budget_window_s`, counted like JUDGE_TOKEN_BUDGET and
 * shared through Redis the same way, under `tenant:<name>:`), its request rate (`rpm`, a token bucket in the
 * same store as the backends' RPM buckets: shared through Redis), and its metrics. Rebuilt from the keyring
 * after every reload: a tenant removed from the file keeps nothing; one whose budget changed starts a new
 * budget (the window's spend is kept in the store, so only the limit changes).
 */
import { RewardError } from '../../errors.js';
import type { BucketStore, BudgetStore } from '../../state/types.js';
import { callTokens, createTokenBudget, type BudgetStatus, type TokenBudget } from '../admission/budget.js';
import type { TenantWork } from '../admission/fair-shares.js';
import type { TenantMetrics } from '../observe/metric-types.js';
import type { Keyring, Tenant } from './keyring.js';

export interface TenantsOptions {
  keyring: Keyring;
  /** FAIR_QUEUING: tenants are their own flows (else one shared flow, first come first served). */
  fairQueuing: boolean;
  /** CACHE_SCOPE. */
  cacheScope: 'shared' | 'tenant';
  /** Where the tenants' budget counters live (the server's budget store: local or Redis). */
  budgetStore: BudgetStore;
  /** True when `budgetStore` and `buckets` are shared with other processes (REDIS_URL). */
  shared: boolean;
  /** The RPM buckets' store (the backends' one: local or Redis). */
  buckets: BucketStore;
  /** Without shared state, each of `ways` workers enforces 1/ways of every budget and RPM. Default 1. */
  ways?: number | undefined;
  /** CACHED_TOKEN_WEIGHT. */
  cachedWeight: number;
  metrics: TenantMetrics;
  now?: (() => number) | undefined;
  warn?: ((fields: Record<string, unknown>, message: string) => void) | undefined;
}

/** A tenant as GET /v1/tenants shows it. */
export interface TenantStatus {
  name: string;
  scopes: string[];
  weight: number;
  /** Its guaranteed part of the server (weight / Σ weights of the keys that judge). */
  fraction: number;
  max_priority: 'normal' | 'high';
  rpm: number | null;
  budget: BudgetStatus | null;
}

export interface Tenants {
  /** What a request of the tenant named `name` carries into admission and the services. */
  work(name: string): TenantWork;
  /** The tenant's request rate (`rpm`): undefined when this request fits, else its 429 RW_RATE_LIMITED. */
  admitRequest(tenant: Tenant): Promise<RewardError | undefined>;
  /** Its token budget; undefined without one. */
  budget(name: string): TokenBudget | undefined;
  status(): TenantStatus[];
  close(): void;
}

const judges = (t: Tenant): boolean => t.scopes.has('reward') || t.scopes.has('rank');

export function createTenants(options: TenantsOptions): Tenants {
  const { keyring, metrics } = options;
  const ways = options.shared ? 1 : Math.max(1, options.ways ?? 1);
  const budgets = new Map<string, { spec: string; budget: TokenBudget }>();
  let works = new Map<string, TenantWork>();
  let judgingWeight = 1;

  const budgetFor = (t: Tenant): TokenBudget | undefined => {
    if (t.tokenBudget === undefined) return undefined;
    const tokens = Math.max(1, Math.floor(t.tokenBudget.tokens / ways));
    const spec = `${tokens}/${t.tokenBudget.windowS}`;
    const have = budgets.get(t.name);
    if (have?.spec === spec) return have.budget;
    have?.budget.close();
    const label = metrics.label(t.name);
    metrics.budgetLimitTokens.labels(label).set(tokens);
    const budget = createTokenBudget({
      tokens,
      windowS: t.tokenBudget.windowS,
      cachedWeight: options.cachedWeight,
      store: options.budgetStore,
      shared: options.shared,
      now: options.now,
      warn: options.warn === undefined ? undefined : (f, m) => options.warn?.({ ...f, tenant: t.name }, m),
      onRemaining: (left) => metrics.budgetRemainingTokens.labels(label).set(left),
      key: `tenant:${t.name}:`,
      label: `the token_budget of tenant ${t.name}`,
    });
    budgets.set(t.name, { spec, budget });
    return budget;
  };

  const rebuild = (): void => {
    const tenants = keyring.tenants();
    judgingWeight = tenants.filter(judges).reduce((sum, t) => sum + t.weight, 0) || 1;
    const next = new Map<string, TenantWork>();
    for (const t of tenants) {
      const budget = budgetFor(t);
      const tokens = metrics.tokens.labels(metrics.label(t.name));
      const reasoning = metrics.reasoningTokens.labels(metrics.label(t.name));
      next.set(t.name, {
        flow: options.fairQueuing ? { name: t.name, weight: t.weight } : undefined,
        fraction: options.fairQueuing ? Math.min(1, t.weight / judgingWeight) : 1,
        maxPriority: t.maxPriority,
        gate: budget === undefined ? undefined : () => budget.gate(),
        onCall: (event) => {
          const spent = callTokens(event, options.cachedWeight);
          if (spent > 0) tokens.inc(spent);
          if ((event.reasoningTokens ?? 0) > 0) reasoning.inc(event.reasoningTokens);
          budget?.record(event);
        },
        cacheScope: options.cacheScope === 'tenant' ? t.name : undefined,
      });
    }
    for (const [name, b] of budgets) {
      if (keyring.get(name)?.tokenBudget !== undefined) continue;
      b.budget.close();
      budgets.delete(name);
    }
    works = next;
  };
  rebuild();
  keyring.onChange(rebuild);

  return {
    work: (name) => works.get(name) ?? {},
    async admitRequest(tenant) {
      if (tenant.rpm === undefined) return undefined;
      const rpm = tenant.rpm / ways;
      const spec = { name: `tenant:${tenant.name}:rpm`, capacity: Math.max(1, rpm), perMs: rpm / 60_000 };
      const reservation = await options.buckets.take([{ ...spec, cost: 1 }], 0);
      if (reservation.taken) return undefined;
      const retryAfterS = Math.max(1, Math.ceil(reservation.waitMs / 1000));
      return new RewardError(
        'RW_RATE_LIMITED',
        `tenant ${tenant.name} is over its rpm (${tenant.rpm} requests per minute): retry after ${retryAfterS} s`,
        { details: { retry_after_s: retryAfterS, tenant: tenant.name, rpm: tenant.rpm } },
      );
    },
    budget: (name) => budgets.get(name)?.budget,
    status: () =>
      keyring.tenants().map((t) => ({
        name: t.name,
        scopes: [...t.scopes],
        weight: t.weight,
        fraction: judges(t) ? Math.round((1000 * t.weight) / judgingWeight) / 1000 : 0,
        max_priority: t.maxPriority,
        rpm: t.rpm ?? null,
        budget: budgets.get(t.name)?.budget.status() ?? null,
      })),
    close() {
      for (const b of budgets.values()) b.budget.close();
      budgets.clear();
    },
  };
}
