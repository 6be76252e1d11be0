/**
 * The keys file (REWARD_KEYS): one entry per tenant — a training run, an evaluation job, an operator — with
 * the SHA-256 of its bearer key (never the key itself), its scopes, its fair-share weight and optional
 * limits. A leaf (zod only): config.ts reads and validates it at start-up, and the server the same way
 * (`readKeysFile`) on every reload.
 *
 * ```json
 * {"keys": [{"name": "run-a", "sha256": "<64 hex>", "scopes": ["reward", "cancel"], "weight": 1,
 *            "token_budget": 50000000, "budget_window_s": 86400, "rpm": 12000, "max_priority": "normal"}]}
 * ```
 */
import { z } from 'zod';

/**
 * What a key may do. `reward`: the judging routes and the trainer adapters; `rank`: the ranking routes and
 * their group adapters; `cancel`: POST /v1/cancel (its own tenant's work); `plan`: POST /v1/plan;
 * `integrity`: GET /v1/integrity; `metrics`: GET /metrics; `admin`: GET /v1/tenants and cancelling another
 * tenant's work. Every valid key may read /readyz and /v1/graphs.
 */
export const SCOPES = ['reward', 'rank', 'cancel', 'plan', 'integrity', 'metrics', 'admin'] as const;
export const Scope = z.enum(SCOPES);
export type Scope = z.infer<typeof Scope>;

/** The tenant of REWARD_API_KEY (every scope), and of every request on a server without keys. */
export const DEFAULT_TENANT = 'default';

/** A tenant's name is a metrics label value and a log field: short, plain, never a secret. */
export const TenantName = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/, {
  error: 'must be 1-63 characters: letters, digits, ".", "_" or "-", starting with a letter or digit',
});

const KeyEntry = z
  .strictObject({
    name: TenantName,
    /** Hex SHA-256 of the bearer key (`npm run keys -- hash`). */
    sha256: z
      .string()
      .regex(/^[0-9a-fA-F]{64}$/, { error: 'must be the 64 hex digits of the key’s SHA-256' })
      .transform((h) => h.toLowerCase()),
    scopes: z
      .array(Scope)
      .min(1)
      .refine((s) => new Set(s).size === s.length, { error: 'lists a scope twice' }),
    /** Fair share against the other tenants (fair-queue.ts). */
    weight: z.number().positive().max(1000).default(1),
    /** Judge tokens per `budget_window_s` (like JUDGE_TOKEN_BUDGET, for this tenant alone). */
    token_budget: z.number().int().positive().optional(),
    budget_window_s: z.number().int().positive().max(31_536_000).optional(),
    /** Requests per minute on the judging and ranking routes (a burst of one minute's worth). */
    rpm: z.number().int().positive().optional(),
    /** The highest priority lane its requests may use; `high` above it is served as `normal`. */
    max_priority: z.enum(['normal', 'high']).default('normal'),
  })
  .superRefine((k, ctx) => {
    if (k.budget_window_s !== undefined && k.token_budget === undefined)
      ctx.addIssue({ code: 'custom', path: ['budget_window_s'], message: 'needs token_budget' });
  });

const KeysFileSchema = z
  .strictObject({ keys: z.array(KeyEntry).min(1, { error: 'lists no key' }).max(1024) })
  .superRefine((f, ctx) => {
    const names = new Set<string>();
    const hashes = new Set<string>();
    for (const [i, k] of f.keys.entries()) {
      if (names.has(k.name))
        ctx.addIssue({ code: 'custom', path: ['keys', i, 'name'], message: `"${k.name}" is listed twice` });
      if (hashes.has(k.sha256))
        ctx.addIssue({
          code: 'custom',
          path: ['keys', i, 'sha256'],
          message: 'the same key is listed twice',
        });
      names.add(k.name);
      hashes.add(k.sha256);
    }
  });

/** One tenant's key as the server uses it. */
export interface TenantKey {
  name: string;
  /** Lower-case hex SHA-256 of the bearer key. */
  sha256: string;
  scopes: readonly Scope[];
  weight: number;
  /** Its own token budget per window (tokens, seconds); undefined = none. */
  tokenBudget?: { tokens: number; windowS: number } | undefined;
  rpm?: number | undefined;
  maxPriority: 'normal' | 'high';
}

/** Default budget window of a key with `token_budget` and no `budget_window_s`: a day. */
export const DEFAULT_BUDGET_WINDOW_S = 86_400;

/** Validates a parsed keys file; throws an Error naming every problem (path: message). */
export function parseKeysFile(json: unknown): TenantKey[] {
  const parsed = KeysFileSchema.safeParse(json);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `${i.path.join('.') || '(file)'}: ${i.message}`);
    throw new Error(lines.join('; '));
  }
  return parsed.data.keys.map((k) => ({
    name: k.name,
    sha256: k.sha256,
    scopes: k.scopes,
    weight: k.weight,
    tokenBudget:
      k.token_budget === undefined
        ? undefined
        : { tokens: k.token_budget, windowS: k.budget_window_s ?? DEFAULT_BUDGET_WINDOW_S },
    rpm: k.rpm,
    maxPriority: k.max_priority,
  }));
}
