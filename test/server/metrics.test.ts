import { describe, expect, it } from 'vitest';

import { getPreset } from '../../src/judge/presets.js';
import type { Judgment } from '../../src/judge/types.js';
import { createMetrics } from '../../src/server/observe/metrics.js';
import { candidate, GROUND_TRUTH, type Harness, useHarness } from './helpers.js';

const CALLS = getPreset('default')!.llmCallsPerJudgment;

/** DESIGN §7: every metric, with its type. */
const DESIGN_METRICS: Record<string, string> = {
  reward_requests_total: 'counter',
  reward_request_duration_seconds: 'histogram',
  reward_judgments_total: 'counter',
  reward_judgment_duration_seconds: 'histogram',
  reward_llm_calls_total: 'counter',
  reward_llm_call_duration_seconds: 'histogram',
  reward_llm_tokens_total: 'counter',
  reward_cache_lookups_total: 'counter',
  reward_inflight_judgments: 'gauge',
  reward_queue_depth: 'gauge',
  reward_recent_mean: 'gauge',
};

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** A strict parser of the Prometheus text format (0.0.4): throws on any line it does not understand. */
function parseExposition(text: string): { types: Map<string, string>; samples: Sample[] } {
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  // Values as Go's strconv.ParseFloat reads them (Prometheus' own parser): NaN / Inf in any case.
  const sampleRe = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (-?(?:[0-9.e+-]+|nan|[+-]?inf))(?: -?\d+)?$/i;
  const labelRe = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)/y;
  for (const line of text.split('\n')) {
    if (line === '') continue;
    if (line.startsWith('# HELP ')) continue;
    if (line.startsWith('# TYPE ')) {
      const [, , name, type] = line.split(' ');
      types.set(name!, type!);
      continue;
    }
    const m = sampleRe.exec(line);
    if (m === null) throw new Error(`not a Prometheus sample line: ${line}`);
    const labels: Record<string, string> = {};
    const body = m[2] ?? '';
    labelRe.lastIndex = 0;
    while (labelRe.lastIndex < body.length) {
      const l = labelRe.exec(body);
      if (l === null) throw new Error(`bad labels in: ${line}`);
      labels[l[1]!] = l[2]!;
    }
    const raw = m[3]!.toLowerCase();
    const value =
      raw === 'nan' ? NaN : raw.endsWith('inf') ? (raw.startsWith('-') ? -Infinity : Infinity) : Number(raw);
    if (Number.isNaN(value) && raw !== 'nan') throw new Error(`bad value in: ${line}`);
    samples.push({ name: m[1]!, labels, value });
  }
  return { types, samples };
}

function value(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  return samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}

const harness = useHarness();

async function scrape(harness: Harness) {
  const res = await harness.app.inject({ method: 'GET', url: '/metrics' });
  expect(res.statusCode).toBe(200);
  expect(res.headers['content-type']).toContain('text/plain');
  return { text: res.body, ...parseExposition(res.body) };
}

describe('GET /metrics', () => {
  it('exposes every DESIGN §7 metric with its type, plus default process metrics', async () => {
    const h = await harness();
    const { types } = await scrape(h);
    for (const [name, type] of Object.entries(DESIGN_METRICS)) expect(types.get(name), name).toBe(type);
    expect(types.has('process_cpu_user_seconds_total')).toBe(true);
    expect(types.has('nodejs_eventloop_lag_seconds')).toBe(true);
  });

  it('moves counters as requests are served and never labels by request text', async () => {
    const h = await harness();
    const secret = 'ZQXJSECRETMARKER';
    const before = await scrape(h);
    const res = await h.app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: {
        question: `question ${secret}`,
        ground_truth: `${GROUND_TRUTH} ${secret}`,
        candidates: [
          `${candidate(0, true)} ${secret}`,
          candidate(1, false),
          candidate(1, false),
          'Thought process:',
        ],
        request_id: secret,
      },
    });
    expect(res.statusCode).toBe(200);
    await h.app.inject({ method: 'POST', url: `/v1/graphs/${secret}` });
    const after = await scrape(h);
    const s = after.samples;

    expect(value(s, 'reward_requests_total', { route: '/v1/reward', code: '200' })).toBe(
      value(before.samples, 'reward_requests_total', { route: '/v1/reward', code: '200' }) + 1,
    );
    expect(value(s, 'reward_request_duration_seconds_count', { route: '/v1/reward' })).toBe(1);
    expect(value(s, 'reward_judgments_total', { graph: 'analysts-2', status: 'ok', verdict: 'match' })).toBe(
      1,
    );
    expect(
      value(s, 'reward_judgments_total', { graph: 'analysts-2', status: 'ok', verdict: 'no_match' }),
    ).toBe(1);
    expect(value(s, 'reward_judgments_total', { graph: 'analysts-2', status: 'rejected_input' })).toBe(1);
    expect(value(s, 'reward_judgment_duration_seconds_count', { graph: 'analysts-2' })).toBe(3);
    expect(value(s, 'reward_llm_calls_total', { outcome: 'ok' })).toBe(2 * CALLS);
    expect(value(s, 'reward_llm_calls_total', { role: 'analyst', model: 'fake-model' })).toBe(4);
    expect(value(s, 'reward_llm_call_duration_seconds_count', { role: 'evaluator' })).toBe(2);
    expect(value(s, 'reward_llm_tokens_total', { kind: 'prompt' })).toBeGreaterThan(0);
    expect(value(s, 'reward_llm_tokens_total', { kind: 'completion' })).toBeGreaterThan(0);
    expect(value(s, 'reward_cache_lookups_total', { result: 'miss' })).toBe(3);
    expect(value(s, 'reward_cache_lookups_total', { result: 'coalesced' })).toBe(1);
    expect(value(s, 'reward_recent_mean', { graph: 'analysts-2' })).toBeCloseTo(1 / 3);
    expect(value(s, 'reward_inflight_judgments')).toBe(0);
    expect(value(s, 'reward_queue_depth')).toBe(0);
    // Unmatched routes are one label value, not the URL.
    expect(value(s, 'reward_requests_total', { route: 'unmatched', code: '404' })).toBe(1);
    expect(value(s, 'reward_request_errors_total', { route: 'unmatched', code: 'RW_NOT_FOUND' })).toBe(1);

    expect(after.text).not.toContain(secret);
    const labelValues = new Set(s.flatMap((x) => Object.values(x.labels)));
    for (const v of labelValues) expect(v.length).toBeLessThan(64);
  });

  it('counts error answers by RW_* code, which the HTTP status alone does not tell apart', async () => {
    const h = await harness();
    const getReward = (payload: object) => h.app.inject({ method: 'POST', url: '/get_reward', payload });
    const mismatch = await getReward({
      query: [`<|im_start|>user\nsomething else<|im_end|>\n${candidate(0)}`],
      prompts: ['<|im_start|>user\nthe prompt<|im_end|>\n'],
      labels: [GROUND_TRUTH],
    });
    expect(mismatch.statusCode).toBe(400);
    expect(mismatch.json().code).toBe('RW_PROMPT_MISMATCH');
    expect((await getReward({ query: 'not a list' })).statusCode).toBe(400);
    const { samples } = await scrape(h);
    const errors = (code: string) =>
      value(samples, 'reward_request_errors_total', { route: '/get_reward', code });
    expect(errors('RW_PROMPT_MISMATCH')).toBe(1);
    expect(errors('RW_BAD_REQUEST')).toBe(1);
    expect(value(samples, 'reward_requests_total', { route: '/get_reward', code: '400' })).toBe(2);
  });

  it('counts failed LLM calls by error code', async () => {
    const h = await harness();
    h.fake.setScript([], { kind: 'status', status: 500 });
    await h.app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: { ground_truth: GROUND_TRUTH, candidates: [candidate(0)], graph: 'single-judge' },
    });
    const { samples } = await scrape(h);
    expect(value(samples, 'reward_llm_calls_total', { role: 'judge', outcome: 'RW_JUDGE_UNAVAILABLE' })).toBe(
      1,
    );
    expect(
      value(samples, 'reward_judgments_total', {
        graph: 'single-judge',
        status: 'judge_error',
        verdict: 'none',
      }),
    ).toBe(1);
  });
});

describe('createMetrics', () => {
  it('gives every app its own registry', async () => {
    const a = createMetrics();
    const b = createMetrics();
    a.requests.labels('/x', '200').inc();
    expect((await b.requests.get()).values).toHaveLength(0);
  });

  it('caps the distinct model label values', async () => {
    const m = createMetrics();
    for (let i = 0; i < 100; i++) {
      m.observeCall({
        role: 'judge',
        model: `model-${i}`,
        backend: 'default',
        outcome: 'ok',
        latencyMs: 1,
        promptTokens: 1,
        completionTokens: 1,
        cachedPromptTokens: null,
      });
    }
    const models = new Set((await m.llmCalls.get()).values.map((v) => v.labels.model));
    expect(models.size).toBeLessThanOrEqual(33);
    expect(models.has('other')).toBe(true);
  });

  it('keeps reward_recent_mean over the last RECENT_WINDOW rewards only', async () => {
    const m = createMetrics({ recentWindow: 4 });
    const judgment = (reward: 0 | 1 | null) =>
      ({
        status: reward === null ? 'judge_error' : 'ok',
        verdict: null,
        reward,
        latencyMs: 1,
      }) as unknown as Judgment;
    for (const r of [1, 1, 1, 1, 0, 0, null, 0] as const) m.observeJudgment('vote-3', judgment(r));
    // The window holds [1, 0, 0, 0]; the failure is not a reward.
    expect((await m.recentMean.get()).values[0]?.value).toBe(0.25);
  });
});
