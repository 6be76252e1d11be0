/** What the start-up log line says about the judge: where it is, what it runs, and how it is served. */
import type { Config } from '../../config.js';
import { replicaUrls, type BackendSettings } from '../../settings/routing-file.js';

export interface BackendDescription {
  name: string;
  /** Each replica's origin and path only: no user info, no query (either may carry a key). */
  urls: string[];
  model: string;
  response_format: string;
  max_inflight: number;
  context_tokens: number | 'unknown';
  /** Whether a real API key is sent (the default `EMPTY` is not a key). */
  api_key: 'set' | 'none';
}

/** A URL without secrets: user info dropped, a query replaced by `?…`. */
export function redactUrl(raw: string): string {
  const url = new URL(raw);
  return `${url.origin}${url.pathname}${url.search === '' ? '' : '?…'}`;
}

function describe(name: string, settings: BackendSettings): BackendDescription {
  return {
    name,
    urls: replicaUrls(settings).map(redactUrl),
    model: settings.model,
    response_format: settings.response_format,
    max_inflight: settings.max_inflight,
    context_tokens: settings.context_tokens ?? 'unknown',
    api_key: settings.api_key === '' || settings.api_key === 'EMPTY' ? 'none' : 'set',
  };
}

/**
 * Whether bearer auth is on, and by what: REWARD_API_KEY (the tenant `default`) and/or the keys file
 * REWARD_KEYS (its path and how many keys it holds). Either one turns auth on (tenants/keyring.ts).
 */
function authFields(config: Config): Record<string, unknown> {
  const keysFile = config.keys;
  if (config.apiKey === undefined && keysFile === undefined) return { auth: 'off' };
  return {
    auth: 'on',
    auth_keys: {
      api_key: config.apiKey === undefined ? 'none' : 'set',
      keys_file: keysFile === undefined ? 'off' : { path: keysFile.path, keys: keysFile.entries.length },
    },
  };
}

/** Fields of the `reward server listening` line. Never includes a key or a URL's credentials. */
export function startupFields(config: Config, routerName: string): Record<string, unknown> {
  const backends: BackendDescription[] = [];
  if (config.judge.default !== 'offline') backends.push(describe('default', config.judge.default));
  for (const [name, settings] of Object.entries(config.judge.file?.backends ?? {}))
    backends.push(describe(name, settings));
  return {
    backend: routerName,
    backends,
    ...authFields(config),
    transcripts: config.transcriptsPath ?? 'off',
    deadline_ms: config.requestDeadlineMs,
    // Reward integrity (docs/integrity.md): how many canary rows at what rate, and the audit share.
    canaries:
      config.integrity.canaries === undefined
        ? 'off'
        : { rows: config.integrity.canaries.length, rate: config.integrity.canaryRate },
    audit_rate: config.integrity.auditRate,
  };
}
