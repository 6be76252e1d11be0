/**
 * Backend routing: which backend, model and sampling each graph node uses. The default backend comes from
 * the environment (or is `offline`); an optional routing file (REWARD_CONFIG) adds named backends and
 * per-role / per-node overrides, so a committee can mix model families.
 */
import {
  DEFAULT_BACKEND,
  OFFLINE_BACKEND,
  type BackendSettings,
  type RoutingFile,
} from '../settings/routing-file.js';
import { createOpenAICompatibleBackend } from './backends/openai.js';
import type { BucketStore } from '../state/types.js';
import type { Backend, Route, Router } from './types.js';

export interface RouterOptions {
  /** The environment's backend, or `offline` when no JUDGE_BASE_URL is set. */
  default: BackendSettings | 'offline';
  file?: RoutingFile | undefined;
  /** Builds the offline backend (injected; created at most once). */
  offline: () => Backend;
  /** Builds an OpenAI-compatible backend; default `createOpenAICompatibleBackend`. */
  createBackend?: ((settings: BackendSettings, name: string) => Backend) | undefined;
  /** RPM/TPM bucket store for the default `createBackend` (shared with REDIS_URL). */
  buckets?: BucketStore | undefined;
}

interface Target {
  backend: Backend;
  /** The backend's own model (`offline` for the offline backend). */
  model: string;
  offline: boolean;
  /** What the backend adds to every request (Route.backendRequest). */
  request?: Route['backendRequest'];
}

/** A backend's own request fields as a route carries them (and the judgment key hashes them). */
function backendRequestOf(settings: BackendSettings): Route['backendRequest'] {
  if (settings.reasoning_effort === undefined && settings.extra_body === undefined) return undefined;
  return {
    reasoningEffort: settings.reasoning_effort,
    extraBody: settings.extra_body === undefined ? undefined : JSON.stringify(settings.extra_body),
  };
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
    ((settings: BackendSettings, name: string) =>
      createOpenAICompatibleBackend(settings, { name, buckets: options.buckets }));
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
      made = {
        backend: create(settings, name),
        model: settings.model,
        offline: false,
        request: backendRequestOf(settings),
      };
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
        reasoningEffort: byNode?.reasoning_effort ?? byRole?.reasoning_effort,
        backendRequest: chosen.request,
      };
    },
    backends: () => [...used].map((t) => t.backend),
  };
}
