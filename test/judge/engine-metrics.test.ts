/**
 * Reading the engines' own load (src/judge/engine-metrics.ts): the names vLLM, SGLang and llama.cpp publish
 * (as their sources declare them), the Prometheus text format's corners, the scrape URL, and the scraper
 * against real HTTP servers on loopback.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

import { afterEach, describe, expect, it } from 'vitest';

import { createEngineScraper, engineMetricsUrl, parseEngineMetrics } from '../../src/judge/engine-metrics.js';
import { createBatchingEngine } from '../fakes/engine.js';

const times = { requestedAt: 1, at: 2 };

/** vLLM V1 (PrometheusStatLogger): labels model_name and engine; two data-parallel engines. */
const VLLM = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen2.5-7B-Instruct"} 32.0
vllm:num_requests_running{engine="1",model_name="Qwen/Qwen2.5-7B-Instruct"} 30.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen2.5-7B-Instruct"} 5.0
vllm:num_requests_waiting{engine="1",model_name="Qwen/Qwen2.5-7B-Instruct"} 0.0
# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.DEPRECATED: Use vllm:kv_cache_usage_perc instead.
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{engine="0",model_name="Qwen/Qwen2.5-7B-Instruct"} 0.1
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen2.5-7B-Instruct"} 0.42
vllm:kv_cache_usage_perc{engine="1",model_name="Qwen/Qwen2.5-7B-Instruct"} 0.61
# HELP vllm:request_queue_time_seconds Histogram of time spent in WAITING phase for request.
# TYPE vllm:request_queue_time_seconds histogram
vllm:request_queue_time_seconds_sum{engine="0",model_name="Qwen/Qwen2.5-7B-Instruct"} 12.5
vllm:request_queue_time_seconds_bucket{engine="0",le="0.3",model_name="Qwen/Qwen2.5-7B-Instruct"} 90.0
vllm:request_queue_time_seconds_bucket{engine="0",le="+Inf",model_name="Qwen/Qwen2.5-7B-Instruct"} 100.0
vllm:request_queue_time_seconds_count{engine="0",model_name="Qwen/Qwen2.5-7B-Instruct"} 100.0
vllm:request_queue_time_seconds_sum{engine="1",model_name="Qwen/Qwen2.5-7B-Instruct"} 2.5
vllm:request_queue_time_seconds_count{engine="1",model_name="Qwen/Qwen2.5-7B-Instruct"} 50.0
`;

describe('parseEngineMetrics', () => {
  it('reads vLLM: batch and queue summed over data-parallel engines, KV use at its fullest, queue time', () => {
    expect(parseEngineMetrics(VLLM, times)).toEqual({
      kind: 'vllm',
      running: 62,
      waiting: 5,
      kvUsage: 0.61,
      queueTime: { sumS: 15, count: 150 },
      ...times,
    });
  });

  it('reads a vLLM before 0.9 from vllm:gpu_cache_usage_perc', () => {
    const old = VLLM.split('\n')
      .filter((l) => !l.includes('kv_cache_usage_perc'))
      .join('\n');
    expect(parseEngineMetrics(old, times)).toMatchObject({ kind: 'vllm', kvUsage: 0.1 });
  });

  it('reads SGLang (sglang:num_running_reqs, sglang:num_queue_reqs, sglang:token_usage)', () => {
    const text = [
      '# HELP sglang:num_running_reqs The number of running requests.',
      '# TYPE sglang:num_running_reqs gauge',
      'sglang:num_running_reqs{engine_type="unified",model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="0"} 128.0',
      '# HELP sglang:num_queue_reqs The number of requests in the waiting queue.',
      '# TYPE sglang:num_queue_reqs gauge',
      'sglang:num_queue_reqs{engine_type="unified",model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="0"} 17.0',
      '# HELP sglang:token_usage The token usage.',
      '# TYPE sglang:token_usage gauge',
      'sglang:token_usage{engine_type="unified",model_name="meta-llama/Llama-3.1-8B-Instruct",pp_rank="0",tp_rank="0"} 0.28',
      'sglang:cache_hit_rate{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0075',
    ].join('\n');
    expect(parseEngineMetrics(text, times)).toEqual({
      kind: 'sglang',
      running: 128,
      waiting: 17,
      kvUsage: 0.28,
      queueTime: undefined,
      ...times,
    });
  });

  it('reads llama.cpp (llamacpp:requests_processing, llamacpp:requests_deferred; no KV gauge in current builds)', () => {
    const text = [
      '# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.',
      '# TYPE llamacpp:prompt_tokens_total counter',
      'llamacpp:prompt_tokens_total 33065',
      '# HELP llamacpp:requests_processing Number of requests processing.',
      '# TYPE llamacpp:requests_processing gauge',
      'llamacpp:requests_processing 4',
      '# HELP llamacpp:requests_deferred Number of requests deferred.',
      '# TYPE llamacpp:requests_deferred gauge',
      'llamacpp:requests_deferred 46',
    ].join('\n');
    expect(parseEngineMetrics(text, times)).toMatchObject({
      kind: 'llamacpp',
      running: 4,
      waiting: 46,
      kvUsage: undefined,
    });
  });

  it('survives the text format’s corners: quoted braces and quotes in labels, timestamps, NaN, CRLF', () => {
    const text = [
      'vllm:num_requests_running{model_name="a}b \\"c\\" d",engine="0"} 7 1700000000000\r',
      'vllm:num_requests_running{model_name="x"} NaN',
      'vllm:num_requests_waiting{model_name="a}b"} +Inf',
      'vllm:num_requests_waiting{model_name="x"}   3',
      '',
      '#vllm:num_requests_waiting 100',
    ].join('\n');
    expect(parseEngineMetrics(text, times)).toMatchObject({ running: 7, waiting: 3 });
  });

  it('is undefined for text without an engine family (an API’s 404 page, our own metrics, half a family)', () => {
    expect(parseEngineMetrics('reward_requests_total{route="/v1/reward"} 3\n', times)).toBeUndefined();
    expect(parseEngineMetrics('<html>404 page not found</html>', times)).toBeUndefined();
    expect(parseEngineMetrics('vllm:num_requests_running{engine="0"} 3\n', times)).toBeUndefined();
  });

  it('reads the fake engine of the test suite as vLLM', () => {
    // The first request starts the idle engine; the rest wait for its next step.
    const engine = createBatchingEngine({ slots: 4, stepMs: 1_000 });
    for (let i = 0; i < 6; i++) engine.submit(0, () => {});
    expect(parseEngineMetrics(engine.metrics('m'), times)).toMatchObject({
      kind: 'vllm',
      running: 1,
      waiting: 5,
    });
    engine.close();
  });
});

describe('engineMetricsUrl', () => {
  it('replaces a trailing /v1 with /metrics and keeps any path before it', () => {
    expect(engineMetricsUrl('http://10.0.0.1:8000/v1')).toBe('http://10.0.0.1:8000/metrics');
    expect(engineMetricsUrl('http://10.0.0.1:8000/v1/')).toBe('http://10.0.0.1:8000/metrics');
    expect(engineMetricsUrl('https://gw.example/llm/qwen/v1')).toBe('https://gw.example/llm/qwen/metrics');
    expect(engineMetricsUrl('http://127.0.0.1:8080')).toBe('http://127.0.0.1:8080/metrics');
    expect(engineMetricsUrl('http://h:1/v1?api-version=2024')).toBe('http://h:1/metrics');
  });
});

describe('createEngineScraper', () => {
  const servers: Server[] = [];
  const closers: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of closers.splice(0)) await c();
    for (const s of servers.splice(0)) await new Promise((r) => s.close(r));
  });

  async function serve(
    handler: (path: string) => { status: number; body: string } | 'hang',
  ): Promise<string> {
    const server = createServer((req, res) => {
      const answer = handler(req.url ?? '');
      if (answer === 'hang') return;
      res.writeHead(answer.status, { 'content-type': 'text/plain' });
      res.end(answer.body);
    });
    servers.push(server);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  const until = async (check: () => boolean, what: string): Promise<void> => {
    for (let i = 0; i < 200 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
    if (!check()) throw new Error(`timed out waiting for ${what}`);
  };

  it('reads an engine every interval; its readings go stale once it stops answering', async () => {
    let up = true;
    const base = await serve(() => (up ? { status: 200, body: VLLM } : 'hang'));
    const scraper = createEngineScraper({ url: `${base}/metrics`, intervalMs: 20, staleMs: 200 });
    closers.push(() => scraper.close());
    let readings = 0;
    scraper.subscribe((r) => {
      if (r !== undefined) readings += 1;
    });
    await until(() => readings >= 3, 'three readings');
    expect(scraper.state).toBe('engine');
    expect(scraper.kind).toBe('vllm');
    expect(scraper.fresh()).toMatchObject({ running: 62, waiting: 5 });
    up = false;
    await until(() => scraper.fresh() === undefined, 'a stale reading');
    expect(scraper.state).toBe('engine');
  });

  it('takes a 404 (an OpenAI-style API) for no engine metrics at once', async () => {
    const base = await serve(() => ({ status: 404, body: '{"error":"not found"}' }));
    const scraper = createEngineScraper({ url: `${base}/metrics`, intervalMs: 20 });
    closers.push(() => scraper.close());
    const states: Array<string | undefined> = [];
    scraper.subscribe((r) => states.push(r === undefined ? 'none' : r.kind));
    await until(() => scraper.state !== 'probing', 'the probe');
    expect(scraper.state).toBe('none');
    expect(states).toEqual(['none']);
    expect(scraper.fresh()).toBeUndefined();
  });

  it('keeps probing a URL that does not answer before giving up on it (an engine still starting)', async () => {
    // A port nobody listens on: connection refused, three times.
    const base = await serve(() => ({ status: 200, body: '' }));
    await new Promise((r) => servers.pop()?.close(r));
    const scraper = createEngineScraper({ url: `${base}/metrics`, intervalMs: 20 });
    closers.push(() => scraper.close());
    await new Promise((r) => setTimeout(r, 200));
    expect(scraper.state).toBe('probing');
    await until(() => scraper.state === 'none', 'the last probe');
  });
});
