/**
 * The live table of keys (REWARD_KEYS and REWARD_API_KEY): who a bearer token is. A presented token is
 * hashed with SHA-256, the digest looked up, and the stored digest compared with `timingSafeEqual`; the
 * server never holds a tenant's key, only its hash, and never logs either.
 *
 * `reload()` reads the keys file again (on SIGHUP, or when the file changes: `watch`). A file that does not
 * validate changes nothing: the old keys keep serving and the outcome says why. REWARD_API_KEY is the
 * tenant `default` with every scope; without any key every request is `default` (an open server).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { unwatchFile, watchFile, type Stats } from 'node:fs';

import { readKeysFile } from '../../config.js';
import { DEFAULT_TENANT, SCOPES, type Scope, type TenantKey } from '../../settings/keys-file.js';

/** A tenant as requests see it (the key's entry, its scopes as a set). */
export interface Tenant {
  readonly name: string;
  readonly scopes: ReadonlySet<Scope>;
  readonly weight: number;
  readonly maxPriority: 'normal' | 'high';
  readonly tokenBudget?: { readonly tokens: number; readonly windowS: number } | undefined;
  readonly rpm?: number | undefined;
}

export type ReloadOutcome = { ok: true; tenants: number } | { ok: false; error: string };

export interface Keyring {
  /** True without any key: every request is the `default` tenant, with every scope. */
  readonly open: boolean;
  /** The tenant of an `Authorization` header (`Bearer <key>`); undefined when missing or unknown. */
  authenticate(header: string | undefined): Tenant | undefined;
  /** Every tenant, REWARD_API_KEY's `default` included. */
  tenants(): readonly Tenant[];
  get(name: string): Tenant | undefined;
  /** Reads the keys file again; on failure the current keys stay (the outcome says why). */
  reload(): ReloadOutcome;
  /** Calls `listener` after every reload that changed the keys. */
  onChange(listener: () => void): void;
  /**
   * Reloads whenever the file's size, mtime or inode change, checked every `intervalMs` (a poll, so an
   * editor's rename and a Kubernetes Secret's symlink swap are seen too); `report` gets each outcome.
   * Returns the stop function. No-op without a keys file.
   */
  watch(intervalMs: number, report: (outcome: ReloadOutcome) => void): () => void;
}

export interface KeyringOptions {
  /** REWARD_API_KEY: the tenant `default`, every scope. */
  apiKey?: string | undefined;
  /** REWARD_KEYS as read at start-up (config.ts validated it). */
  keys?: { path: string; entries: readonly TenantKey[] } | undefined;
  /** Reads and validates the file (default `readKeysFile`); throws on an invalid one. */
  read?: ((path: string, apiKey: string | undefined) => readonly TenantKey[]) | undefined;
}

interface Entry {
  tenant: Tenant;
  digest: Buffer;
}

const digestOf = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest();

const toTenant = (k: TenantKey): Tenant => ({
  name: k.name,
  scopes: new Set(k.scopes),
  weight: k.weight,
  maxPriority: k.maxPriority,
  tokenBudget: k.tokenBudget,
  rpm: k.rpm,
});

/** REWARD_API_KEY's tenant, and the open server's. */
export const DEFAULT_TENANT_ENTRY: Tenant = Object.freeze({
  name: DEFAULT_TENANT,
  scopes: new Set(SCOPES),
  weight: 1,
  maxPriority: 'high',
});

/** The token of `Authorization: Bearer <token>` (scheme case-insensitive), else undefined. */
export function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined || !header.toLowerCase().startsWith('bearer ')) return undefined;
  const token = header.slice(7).trim();
  return token === '' ? undefined : token;
}

export function createKeyring(options: KeyringOptions): Keyring {
  const read = options.read ?? readKeysFile;
  const path = options.keys?.path;
  const open = options.apiKey === undefined && options.keys === undefined;
  const listeners: Array<() => void> = [];
  let byDigest = new Map<string, Entry>();
  let byName = new Map<string, Tenant>();

  const install = (entries: readonly TenantKey[]): void => {
    const digests = new Map<string, Entry>();
    const names = new Map<string, Tenant>();
    if (options.apiKey !== undefined) {
      const digest = digestOf(options.apiKey);
      digests.set(digest.toString('hex'), { tenant: DEFAULT_TENANT_ENTRY, digest });
      names.set(DEFAULT_TENANT, DEFAULT_TENANT_ENTRY);
    }
    for (const k of entries) {
      const tenant = toTenant(k);
      digests.set(k.sha256, { tenant, digest: Buffer.from(k.sha256, 'hex') });
      names.set(k.name, tenant);
    }
    if (open) names.set(DEFAULT_TENANT, DEFAULT_TENANT_ENTRY);
    byDigest = digests;
    byName = names;
  };
  install(options.keys?.entries ?? []);

  const reload = (): ReloadOutcome => {
    if (path === undefined) return { ok: false, error: 'no keys file (REWARD_KEYS is not set)' };
    let entries;
    try {
      entries = read(path, options.apiKey);
    } catch (err) {
      return { ok: false, error: err instanceof Error ? err.message : String(err) };
    }
    install(entries);
    for (const listener of listeners) listener();
    return { ok: true, tenants: byName.size };
  };

  return {
    open,
    authenticate(header) {
      if (open) return DEFAULT_TENANT_ENTRY;
      const token = bearerToken(header);
      if (token === undefined) return undefined;
      const digest = digestOf(token);
      const entry = byDigest.get(digest.toString('hex'));
      // The lookup found the digest; the comparison is constant-time all the same (equal lengths).
      if (entry === undefined || !timingSafeEqual(digest, entry.digest)) return undefined;
      return entry.tenant;
    },
    tenants: () => [...byName.values()],
    get: (name) => byName.get(name),
    reload,
    onChange(listener) {
      listeners.push(listener);
    },
    watch(intervalMs, report) {
      if (path === undefined) return () => undefined;
      const onStat = (curr: Stats, prev: Stats): void => {
        if (curr.mtimeMs === prev.mtimeMs && curr.size === prev.size && curr.ino === prev.ino) return;
        report(reload());
      };
      watchFile(path, { interval: intervalMs, persistent: false }, onStat);
      return () => unwatchFile(path, onStat);
    },
  };
}
