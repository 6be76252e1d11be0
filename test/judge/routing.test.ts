import { describe, expect, it, vi } from 'vitest';
import { createRouter, type RouterOptions } from '../../src/judge/routing.js';
import {
  BackendSettings,
  loadRoutingFile,
  type BackendSettingsInput,
} from '../../src/settings/routing-file.js';
import type { Backend } from '../../src/judge/types.js';

const stub = (name: string): Backend => ({
  name,
  complete: () => Promise.reject(new Error('stub')),
});

const envDefault = BackendSettings.parse({ base_url: 'http://127.0.0.1:9/v1', model: 'env-model' });

/** A router whose backends are stubs named after their routing key. */
function router(file: unknown, defaultBackend: RouterOptions['default'] = envDefault) {
  const offline = vi.fn(() => stub('offline'));
  const created: string[] = [];
  const r = createRouter({
    default: defaultBackend,
    file: file === undefined ? undefined : loadRoutingFile(file),
    offline,
    createBackend: (_settings, name) => {
      created.push(name);
      return stub(name);
    },
  });
  return { r, offline, created };
}

const backend = (model: string, extra: Partial<BackendSettingsInput> = {}): BackendSettingsInput => ({
  base_url: 'http://127.0.0.1:8000/v1',
  model,
  ...extra,
});

describe('BackendSettings', () => {
  it('fills the documented defaults', () => {
    expect(envDefault).toEqual({
      base_url: 'http://127.0.0.1:9/v1',
      api_key: 'EMPTY',
      model: 'env-model',
      timeout_ms: 30_000,
      max_retries: 3,
      max_inflight: 256,
      response_format: 'json_schema',
      adaptive_inflight: false,
      engine_metrics: 'auto',
      engine_metrics_interval_ms: 100,
      engine_priority: 'off',
      replica_policy: 'affinity',
      prefix_stagger_ms: 50,
      routing_key_header: 'x-reward-routing-key',
      retry_budget: 0.2,
      schema_reprobe_ms: 60_000,
    });
  });
});

describe('loadRoutingFile', () => {
  const message = (json: unknown): string => {
    try {
      loadRoutingFile(json);
    } catch (error) {
      return (error as Error).message;
    }
    throw new Error('expected loadRoutingFile to throw');
  };

  it('names an invalid field by its path', () => {
    expect(message({ backends: { llama: { base_url: 'not a url', model: 'x' } } })).toContain(
      'backends.llama.base_url',
    );
    expect(message({ roles: { critic: { temperature: 3 } } })).toContain('roles.critic.temperature');
  });

  it('takes a backend’s replicas as base_urls, and exactly one of base_url / base_urls', () => {
    const urls = ['http://10.0.0.1:8000/v1', 'http://10.0.0.2:8000/v1'];
    const file = loadRoutingFile({ backends: { fleet: { base_urls: urls, model: 'x' } } });
    expect(file.backends['fleet']?.base_urls).toEqual(urls);
    expect(message({ backends: { fleet: { model: 'x' } } })).toContain(
      'exactly one of base_url and base_urls',
    );
    expect(message({ backends: { fleet: { base_url: urls[0], base_urls: urls, model: 'x' } } })).toContain(
      'exactly one',
    );
    expect(message({ backends: { fleet: { base_urls: [], model: 'x' } } })).toContain(
      'backends.fleet.base_urls',
    );
  });

  it('rejects unknown keys', () => {
    const text = message({ backends: { llama: { ...backend('x'), timeout: 5 } } });
    expect(text).toContain('timeout');
    expect(text).toContain('backends.llama');
  });

  it('rejects an override naming an unknown backend', () => {
    const text = message({ backends: { llama: backend('x') }, nodes: { a1: { backend: 'qwen' } } });
    expect(text).toContain('nodes.a1.backend');
    expect(text).toContain('unknown backend "qwen"');
    expect(message({ default: 'qwen' })).toContain('default');
  });

  it('reserves the names default and offline', () => {
    expect(message({ backends: { offline: backend('x') } })).toContain('backends.offline');
  });

  it('accepts an empty file', () => {
    expect(loadRoutingFile({})).toEqual({ backends: {}, roles: {}, nodes: {} });
  });
});

describe('createRouter', () => {
  it('routes everything to the default backend without a file', () => {
    const { r, created, offline } = router(undefined);
    const route = r.route({ id: 'a1', role: 'analyst' });
    expect(route.backend.name).toBe('default');
    expect(route.model).toBe('env-model');
    expect(route.temperature).toBeUndefined();
    expect(created).toEqual(['default']);
    expect(offline).not.toHaveBeenCalled();
    expect(r.name).toBe('openai-compatible');
  });

  it('resolves the model: node override, role override, node model, backend model', () => {
    const { r } = router({
      roles: { analyst: { model: 'role-model' } },
      nodes: { a1: { model: 'node-model' } },
    });
    expect(r.route({ id: 'a1', role: 'analyst', model: 'graph-model' }).model).toBe('node-model');
    expect(r.route({ id: 'a2', role: 'analyst', model: 'graph-model' }).model).toBe('role-model');
    expect(r.route({ id: 'c1', role: 'critic', model: 'graph-model' }).model).toBe('graph-model');
    expect(r.route({ id: 'c1', role: 'critic' }).model).toBe('env-model');
  });

  it('uses the routed backend and its model, and sampling from node then role overrides', () => {
    const { r } = router({
      backends: { qwen: backend('qwen-72b') },
      roles: { critic: { backend: 'qwen', temperature: 0.2, max_tokens: 512 } },
      nodes: { c2: { temperature: 0.9, top_p: 0.95 } },
    });
    const c1 = r.route({ id: 'c1', role: 'critic' });
    expect([c1.backend.name, c1.model, c1.temperature, c1.topP, c1.maxTokens]).toEqual([
      'qwen',
      'qwen-72b',
      0.2,
      undefined,
      512,
    ]);
    const c2 = r.route({ id: 'c2', role: 'critic' });
    expect([c2.backend.name, c2.temperature, c2.topP, c2.maxTokens]).toEqual(['qwen', 0.9, 0.95, 512]);
    expect(r.route({ id: 'e', role: 'evaluator' }).backend.name).toBe('default');
  });

  it('creates only referenced backends, each once', () => {
    const { r, created } = router({
      backends: { qwen: backend('q'), unused: backend('u') },
      roles: { critic: { backend: 'qwen' }, analyst: { backend: 'qwen' } },
    });
    expect(created.sort()).toEqual(['default', 'qwen']);
    expect(
      r
        .backends()
        .map((b) => b.name)
        .sort(),
    ).toEqual(['default', 'qwen']);
    expect(r.route({ id: 'x', role: 'critic' }).backend).toBe(r.route({ id: 'y', role: 'analyst' }).backend);
  });

  it('switches the default to a file backend', () => {
    const { r, created } = router({ backends: { qwen: backend('q') }, default: 'qwen' });
    expect(r.route({ id: 'a1', role: 'analyst' }).backend.name).toBe('qwen');
    expect(created).toEqual(['qwen']);
  });

  it('is offline when everything routes offline, with one offline backend', () => {
    const { r, offline, created } = router({ roles: { critic: { backend: 'offline' } } }, 'offline');
    expect(r.name).toBe('offline');
    expect(r.route({ id: 'c', role: 'critic' }).backend).toBe(r.route({ id: 'a', role: 'analyst' }).backend);
    expect(r.route({ id: 'a', role: 'analyst' }).model).toBe('offline');
    expect(offline).toHaveBeenCalledTimes(1);
    expect(created).toEqual([]);
    expect(r.backends()).toHaveLength(1);
  });

  it('is mixed when some roles route offline', () => {
    const { r } = router({ roles: { moderator: { backend: 'offline' } } });
    expect(r.name).toBe('mixed');
    expect(r.route({ id: 'm', role: 'moderator' }).backend.name).toBe('offline');
  });

  it('does not resolve prototype keys as overrides', () => {
    const { r } = router({ roles: { analyst: { model: 'role-model' } } });
    expect(r.route({ id: 'constructor', role: '__proto__' }).model).toBe('env-model');
    expect(r.route({ id: 'toString', role: 'constructor' }).backend.name).toBe('default');
  });
});
