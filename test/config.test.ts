import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, describe, expect, it } from 'vitest';

import { ENV_VARIABLES, loadConfig } from '../src/config.js';
import { DEFAULT_CANDIDATE_LIMITS } from '../src/judge/degenerate.js';
import { DEFAULT_RETRY_POLICY } from '../src/judge/retry.js';
import { BACKEND_DEFAULTS } from '../src/settings/defaults.js';
import { BackendSettings } from '../src/settings/routing-file.js';

let dir: string | undefined;
afterEach(() => {
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

describe('loadConfig', () => {
  it('has the documented defaults and the offline backend when JUDGE_BASE_URL is unset', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      port: 8080,
      host: '127.0.0.1',
      logLevel: 'info',
      judge: { default: 'offline' },
      metricsPublic: false,
      defaultGraph: 'default',
      requestDeadlineMs: 110_000,
      maxQueuedJudgments: 32_768,
      idempotencyWindowMs: 600_000,
      idempotencyLingerMs: 30_000,
      maxConcurrentJudgments: 512,
      cacheSize: 10_000,
      maxCandidates: 1024,
      candidateLimits: { minChars: 20, maxChars: 8000 },
      bodyLimitBytes: 8_388_608,
      shutdownGraceMs: 30_000,
      recentWindow: 512,
    });
    expect(c.apiKey).toBeUndefined();
    expect(c.failureReward).toBeUndefined();
    expect(c.transcriptsPath).toBeUndefined();
    expect(c.judge.file).toBeUndefined();
  });

  it('builds the backend settings from JUDGE_* variables', () => {
    const c = loadConfig({
      JUDGE_BASE_URL: 'http://127.0.0.1:8000/v1',
      JUDGE_MODEL: 'qwen',
      JUDGE_API_KEY: 'k',
      JUDGE_TIMEOUT_MS: '5000',
      JUDGE_MAX_RETRIES: '1',
      JUDGE_MAX_INFLIGHT: '64',
      JUDGE_RPM: '600',
      JUDGE_RESPONSE_FORMAT: 'json_object',
    });
    expect(c.judge.default).toEqual({
      base_url: 'http://127.0.0.1:8000/v1',
      api_key: 'k',
      model: 'qwen',
      timeout_ms: 5000,
      max_retries: 1,
      max_inflight: 64,
      rpm: 600,
      tpm: undefined,
      response_format: 'json_object',
      adaptive_inflight: false,
      inflight_control: undefined,
      engine_metrics: 'auto',
      engine_metrics_interval_ms: 100,
      engine_priority: 'off',
      replica_policy: 'affinity',
      prefix_stagger_ms: 50,
      routing_key_header: 'x-reward-routing-key',
      context_tokens: undefined,
      retry_budget: 0.2,
      schema_reprobe_ms: 60_000,
    });
  });

  it('reads a comma-separated JUDGE_BASE_URL as replicas, and the fleet variables', () => {
    const c = loadConfig({
      JUDGE_BASE_URL: 'http://10.0.0.1:8000/v1, http://10.0.0.2:8000/v1',
      JUDGE_MODEL: 'qwen',
      JUDGE_ADAPTIVE_INFLIGHT: 'true',
      JUDGE_REPLICA_POLICY: 'round_robin',
      JUDGE_PREFIX_STAGGER_MS: '0',
      JUDGE_ROUTING_KEY_HEADER: 'X-Session-Id',
    });
    expect(c.judge.default).toMatchObject({
      base_urls: ['http://10.0.0.1:8000/v1', 'http://10.0.0.2:8000/v1'],
      adaptive_inflight: true,
      replica_policy: 'round_robin',
      prefix_stagger_ms: 0,
      routing_key_header: 'x-session-id',
    });
    expect(c.judge.default).not.toHaveProperty('base_url');
    const bad = (env: Record<string, string>) => () => loadConfig({ JUDGE_MODEL: 'm', ...env });
    expect(bad({ JUDGE_BASE_URL: 'http://a:1/v1,not a url' })).toThrow(/JUDGE_BASE_URL/);
    expect(bad({ JUDGE_BASE_URL: 'http://a:1/v1,http://a:1/v1' })).toThrow(/JUDGE_BASE_URL.*twice/);
    expect(bad({ JUDGE_BASE_URL: 'http://a:1/v1', JUDGE_ROUTING_KEY_HEADER: 'bad header' })).toThrow(
      /JUDGE_ROUTING_KEY_HEADER/,
    );
  });

  it('reads the in-flight control variables (issue 29), and refuses contradictions', () => {
    const c = loadConfig({
      JUDGE_BASE_URL: 'http://10.0.0.1:8000/v1,http://10.0.0.2:8000/v1',
      JUDGE_MODEL: 'qwen',
      JUDGE_INFLIGHT_CONTROL: 'fixed',
      JUDGE_ENGINE_METRICS: 'http://10.0.0.1:9000/metrics, http://10.0.0.2:9000/metrics',
      JUDGE_ENGINE_METRICS_INTERVAL_MS: '250',
      JUDGE_ENGINE_PRIORITY: 'vllm',
    });
    expect(c.judge.default).toMatchObject({
      inflight_control: 'fixed',
      engine_metrics: ['http://10.0.0.1:9000/metrics', 'http://10.0.0.2:9000/metrics'],
      engine_metrics_interval_ms: 250,
      engine_priority: 'vllm',
    });
    const bad = (env: Record<string, string>) => () =>
      loadConfig({ JUDGE_MODEL: 'm', JUDGE_BASE_URL: 'http://a:1/v1,http://b:1/v1', ...env });
    expect(bad({ JUDGE_ENGINE_METRICS: 'http://a:1/metrics' })).toThrow(
      /JUDGE_ENGINE_METRICS.*one per replica/,
    );
    expect(bad({ JUDGE_ENGINE_METRICS: 'nope,nope' })).toThrow(/JUDGE_ENGINE_METRICS/);
    expect(bad({ JUDGE_ADAPTIVE_INFLIGHT: 'true', JUDGE_INFLIGHT_CONTROL: 'engine' })).toThrow(
      /JUDGE_ADAPTIVE_INFLIGHT/,
    );
    expect(bad({ JUDGE_INFLIGHT_CONTROL: 'adaptive' })).toThrow(/JUDGE_INFLIGHT_CONTROL/);
    expect(bad({ JUDGE_ENGINE_PRIORITY: 'yes' })).toThrow(/JUDGE_ENGINE_PRIORITY/);
    expect(bad({ JUDGE_BASE_URL: 'http://a:1/v1', JUDGE_REPLICA_POLICY: 'random' })).toThrow(
      /JUDGE_REPLICA_POLICY/,
    );
  });

  it('coerces numbers and booleans, and treats empty values as unset', () => {
    const c = loadConfig({
      PORT: '0',
      METRICS_PUBLIC: 'true',
      FAILURE_REWARD: '0',
      REWARD_API_KEY: '',
      MAX_QUEUED_JUDGMENTS: '0',
      CACHE_SIZE: '0',
    });
    expect(c.port).toBe(0);
    expect(c.metricsPublic).toBe(true);
    expect(c.failureReward).toBe(0);
    expect(c.apiKey).toBeUndefined();
    expect(c.maxQueuedJudgments).toBe(0);
    expect(c.cacheSize).toBe(0);
    expect(loadConfig({ METRICS_PUBLIC: '0' }).metricsPublic).toBe(false);
  });

  it('refuses the removed MAX_QUEUE at start-up, naming its replacement', () => {
    expect(() => loadConfig({ MAX_QUEUE: '4096' })).toThrow(
      /MAX_QUEUE: no longer supported: admission is by predicted completion.*MAX_QUEUED_JUDGMENTS/,
    );
  });

  it('names every invalid variable', () => {
    let message = '';
    try {
      loadConfig({ PORT: 'eighty', MAX_QUEUED_JUDGMENTS: '-1', METRICS_PUBLIC: 'maybe' });
    } catch (err) {
      message = (err as Error).message;
    }
    for (const name of ['PORT', 'MAX_QUEUED_JUDGMENTS', 'METRICS_PUBLIC'])
      expect(message).toMatch(new RegExp(`^  ${name}: `, 'm'));
    expect(() => loadConfig({ JUDGE_BASE_URL: 'http://127.0.0.1:1/v1' })).toThrow(/JUDGE_MODEL/);
    expect(() => loadConfig({ JUDGE_BASE_URL: 'not a url', JUDGE_MODEL: 'm' })).toThrow(/JUDGE_BASE_URL/);
    expect(() => loadConfig({ MIN_CANDIDATE_CHARS: '100', MAX_CANDIDATE_CHARS: '50' })).toThrow(
      /MIN_CANDIDATE_CHARS/,
    );
    expect(() => loadConfig({ FAILURE_REWARD: 'none' })).toThrow(/FAILURE_REWARD/);
  });

  it('refuses JUDGE_MODEL without JUDGE_BASE_URL instead of running offline', () => {
    expect(() => loadConfig({ JUDGE_MODEL: 'qwen' })).toThrow(
      /JUDGE_BASE_URL: required when JUDGE_MODEL is set/,
    );
  });

  it('reads the judge context, retry budget and failure-warning settings', () => {
    const c = loadConfig({
      JUDGE_BASE_URL: 'http://127.0.0.1:1/v1',
      JUDGE_MODEL: 'm',
      JUDGE_CONTEXT_TOKENS: '4096',
      JUDGE_RETRY_BUDGET: '0.1',
      FAILURE_WARN_RATE: '0.2',
      FAILURE_WARN_INTERVAL_MS: '30000',
    });
    expect(c.judge.default).toMatchObject({ context_tokens: 4096, retry_budget: 0.1 });
    expect([c.failureWarnRate, c.failureWarnIntervalMs]).toEqual([0.2, 30_000]);
    expect(loadConfig({}).failureWarnRate).toBe(0.05);
    expect(() => loadConfig({ JUDGE_RETRY_BUDGET: '1.5' })).toThrow(/JUDGE_RETRY_BUDGET/);
    expect(() => loadConfig({ JUDGE_CONTEXT_TOKENS: '10' })).toThrow(/JUDGE_CONTEXT_TOKENS/);
  });

  it('refuses blank, hex and other odd numeric values instead of reading them as 0 or a surprise', () => {
    // Every variable whose schema says "must be a decimal" for 'x7' (so one added later joins these checks);
    // the known ones must be among them.
    const numeric = Object.keys(ENV_VARIABLES).filter((name) => {
      try {
        loadConfig({ [name]: 'x7' });
        return false;
      } catch (err) {
        return /must be a decimal/.test((err as Error).message);
      }
    });
    expect(numeric).toEqual(
      expect.arrayContaining([
        'PORT',
        'FAILURE_REWARD',
        'JUDGE_TIMEOUT_MS',
        'MAX_QUEUED_JUDGMENTS',
        'REQUEST_TIMEOUT_MS',
        'JUDGE_RETRY_BUDGET',
        'FAILURE_WARN_RATE',
      ]),
    );
    expect(numeric.length).toBeGreaterThanOrEqual(25);
    const odd = [
      ' ',
      '\t',
      '  8080 ',
      '0x10',
      '1e3',
      '+5',
      '1_000',
      '12abc',
      'Infinity',
      'NaN',
      '0b1',
      '１２',
    ];
    for (const name of numeric) {
      for (const value of odd) {
        expect(() => loadConfig({ [name]: value }), `${name}=${JSON.stringify(value)}`).toThrow(
          new RegExp(`^  ${name}: must be a decimal`, 'm'),
        );
      }
    }
    expect(() => loadConfig({ FAILURE_REWARD: ' ' })).toThrow(/FAILURE_REWARD: must be a decimal number/);
    // Plain decimals still work, and an empty value is still unset.
    expect(loadConfig({ FAILURE_REWARD: '-0.5' }).failureReward).toBe(-0.5);
    expect(loadConfig({ FAILURE_REWARD: '.5' }).failureReward).toBe(0.5);
    expect(loadConfig({ FAILURE_REWARD: '' }).failureReward).toBeUndefined();
    const judge = { JUDGE_BASE_URL: 'http://127.0.0.1:1/v1', JUDGE_MODEL: 'm' };
    expect(loadConfig({ ...judge, JUDGE_RETRY_BUDGET: '' }).judge.default).toMatchObject({
      retry_budget: 0.2,
    });
    expect(loadConfig({ FAILURE_WARN_RATE: '0.25' }).failureWarnRate).toBe(0.25);
    expect(loadConfig({ PORT: '' }).port).toBe(8080);
    expect(loadConfig({ PORT: '0' }).port).toBe(0);
  });

  it('reads and validates the routing file named by REWARD_CONFIG', () => {
    dir = mkdtempSync(join(tmpdir(), 'config-'));
    const good = join(dir, 'routing.json');
    writeFileSync(
      good,
      JSON.stringify({
        backends: { big: { base_url: 'http://127.0.0.1:9/v1', model: 'big-model' } },
        roles: { evaluator: { backend: 'big' } },
      }),
    );
    expect(loadConfig({ REWARD_CONFIG: good }).judge.file?.roles['evaluator']?.backend).toBe('big');
    const bad = join(dir, 'bad.json');
    const missing = join(dir, 'missing.json');
    writeFileSync(bad, JSON.stringify({ roles: { evaluator: { backend: 'nowhere' } } }));
    expect(() => loadConfig({ REWARD_CONFIG: bad })).toThrow(/nowhere/);
    expect(() => loadConfig({ REWARD_CONFIG: missing })).toThrow(/REWARD_CONFIG/);
  });

  it('gives the environment backend the same defaults as a routing-file backend and the engine', () => {
    const env = loadConfig({ JUDGE_BASE_URL: 'http://127.0.0.1:1/v1', JUDGE_MODEL: 'm' }).judge.default;
    expect(env).toEqual(BackendSettings.parse({ base_url: 'http://127.0.0.1:1/v1', model: 'm' }));
    expect(DEFAULT_RETRY_POLICY.maxRetries).toBe(BACKEND_DEFAULTS.maxRetries);
    expect(loadConfig({}).candidateLimits).toEqual(DEFAULT_CANDIDATE_LIMITS);
  });

  it('reads REASONING_FORMAT (default auto) and refuses an unknown format', () => {
    expect(loadConfig({}).reasoningFormat).toBe('auto');
    for (const f of ['think', 'harmony', 'none'] as const)
      expect(loadConfig({ REASONING_FORMAT: f }).reasoningFormat).toBe(f);
    expect(() => loadConfig({ REASONING_FORMAT: 'r1' })).toThrow(/REASONING_FORMAT/);
  });

  it('returns a deeply frozen value', () => {
    const c = loadConfig({});
    expect(Object.isFrozen(c)).toBe(true);
    expect(Object.isFrozen(c.candidateLimits)).toBe(true);
    expect(Object.isFrozen(c.judge)).toBe(true);
  });
});
