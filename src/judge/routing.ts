/**
 * Backend routing: which backend, model and sampling each graph node uses. The default backend comes from
 * the environment (or is `offline`); an optional routing file (REWARD_CONFIG) adds named backends and
 * per-role / per-node overrides, so a committee can mix model families.
 */
import { z } from 'zod';
import { createOpenAIBackend } from './client.js';
import type { Backend, Route, Router } from './types.js';

export const BackendSettings = z.strictObject({
  base_url: z.url(),
  api_key: z.string().default('EMPTY'),
  model: z.string().min(1),
  /** Per HTTP attempt, ms (clipped to the judgment's deadline). */
  timeout_ms: z.number().int().positive().default(30_000),
  max_retries: z.number().int().min(0).max(10).default(3),
  max_inflight: z.number().int().positive().default(256),
  rpm: z.number().int().positive().optional(),
  tpm: z.number().int().positive().optional(),
  response_format: z.enum(['json_schema', 'json_object']).default('json_schema'),
});
export type BackendSettings = z.infer<typeof BackendSettings>;
export type BackendSettingsInput = z.input<typeof BackendSettings>;

const RouteOverride = z.strictObject({
  /** A key of `backends`, or `default` / `offline`. */
  backend: z.string().min(1).optional(),
  model: z.string().min(1).optional(),
  temperature: z.number().min(0).max(2).optional(),
  top_p: z.number().gt(0).max(1).optional(),
  max_tokens: z.number().int().min(16).max(32_768).optional(),
});
export type RouteOverride = z.infer<typeof RouteOverride>;

/** Backend names that a routing file may reference but not define. */
const DEFAULT_BACKEND = 'default';
const OFFLINE_BACKEND = 'offline';
const RESERVED = new Set([DEFAULT_BACKEND, OFFLINE_BACKEND]);

export const RoutingFile = z
  .strictObject({
    backends: z.record(z.string().min(1), BackendSettings).default({}),
    /** Backend for nodes without a `backend` override (default: the environment's backend). */
    default: z.string().min(1).optional(),
    roles: z.record(z.string().min(1), RouteOverride).default({}),
    nodes: z.record(z.string().min(1), RouteOverride).default({}),
  })
  .superRefine((file, ctx) => {
    const defined = new Set(Object.keys(file.backends));
    for (const name of defined) {
      if (RESERVED.has(name)) {
        ctx.addIssue({
          code: 'custom',
          path: ['backends', name],
          message: `"${name}" is reserved; pick another name`,
        });
      }
    }
    const known = (name: string): boolean => defined.has(name) || RESERVED.has(name);
    if (file.default !== undefined && !known(file.default)) {
      ctx.addIssue({ code: 'custom', path: ['default'], message: `unknown backend "${file.default}"` });
    }
    for (const section of ['roles', 'nodes'] as const) {
      for (const [key, override] of Object.entries(file[section])) {
        if (override.backend !== undefined && !known(override.backend)) {
          ctx.addIssue({
            code: 'custom',
            path: [section, key, 'backend'],
            message: `unknown backend "${override.backend}" (defined: ${[...defined, ...RESERVED].join(', ')})`,
          });
        }
      }
    }
  });
export type RoutingFile = z.infer<typeof RoutingFile>;

/** Validates a parsed routing file; throws an Error whose message names each offending field. */
export function loadRoutingFile(json: unknown): RoutingFile {
  const result = RoutingFile.safeParse(json);
  if (!result.success) throw new Error(`invalid routing config:\n${z.prettifyError(result.error)}`);
  return result.data;
}

export interface RouterOptions {
  /** The environment's backend, or `offline` when no JUDGE_BASE_URL is set. */
  default: BackendSettings | 'offline';
  file?: RoutingFile | undefined;
  /** Builds the offline backend (injected; created at most once). */
  offline: () => Backend;
  /** Builds an OpenAI-compatible backend; default `createOpenAIBackend`. */
  createBackend?: ((settings: BackendSettings, name: string) => Backend) | undefined;
}

interface Target {
  backend: Backend;
  /** The backend's own model (`offline` for the offline backend). */
  model: string;
  offline: boolean;
}

/**
 * Resolution for a node: its node-id override, then its role override, then the node's own `model`, then
 * the resolved backend's model. Sampling fields come from the node override, then the role override
 * (the executor falls back to the graph node's own values). Only referenced backends are created.
 */
export function createRouter(options: RouterOptions): Router {
  const file = options.file;
  const create =
    options.createBackend ??
    ((settings: BackendSettings, name: string) => createOpenAIBackend(settings, { name }));
  const targets = new Map<string, Target>();
  const fileBackends = new Map(Object.entries(file?.backends ?? {}));

  const target = (name: string): Target => {
    const existing = targets.get(name);
    if (existing !== undefined) return existing;
    let made: Target;
    const settings = name === DEFAULT_BACKEND ? options.default : fileBackends.get(name);
    if (name === OFFLINE_BACKEND || settings === 'offline') {
      const shared = targets.get(OFFLINE_BACKEND) ?? {
        backend: options.offline(),
        model: 'offline',
        offline: true,
      };
      targets.set(OFFLINE_BACKEND, shared);
      made = shared;
    } else if (settings === undefined) {
      // loadRoutingFile rejects unknown names; this guards a RoutingFile built without it.
      throw new Error(`unknown backend "${name}"`);
    } else {
      made = { backend: create(settings, name), model: settings.model, offline: false };
    }
    targets.set(name, made);
    return made;
  };

  const defaultTarget = target(file?.default ?? DEFAULT_BACKEND);
  const roleOverrides = new Map(Object.entries(file?.roles ?? {}));
  const nodeOverrides = new Map(Object.entries(file?.nodes ?? {}));
  for (const override of [...roleOverrides.values(), ...nodeOverrides.values()]) {
    if (override.backend !== undefined) target(override.backend);
  }

  const used = new Set(targets.values());
  const allOffline = [...used].every((t) => t.offline);
  const noneOffline = [...used].every((t) => !t.offline);
  const name = allOffline ? 'offline' : noneOffline ? 'openai-compatible' : 'mixed';

  return {
    name,
    route(node): Route {
      const byNode = nodeOverrides.get(node.id);
      const byRole = roleOverrides.get(node.role);
      const backendName = byNode?.backend ?? byRole?.backend;
      const chosen = backendName === undefined ? defaultTarget : target(backendName);
      return {
        backend: chosen.backend,
        model: byNode?.model ?? byRole?.model ?? node.model ?? chosen.model,
        temperature: byNode?.temperature ?? byRole?.temperature,
        topP: byNode?.top_p ?? byRole?.top_p,
        maxTokens: byNode?.max_tokens ?? byRole?.max_tokens,
      };
    },
    backends: () => [...used].map((t) => t.backend),
  };
}
