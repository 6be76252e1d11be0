/**
 * What a serving engine says about its own load, read from its Prometheus `/metrics`: how many sequences it
 * decodes now (its batch), how many wait in its own queue, and how full its KV cache is. The in-flight limit
 * (inflight-control.ts) keeps the batch full and that queue near empty from these numbers.
 *
 * Names, as the engines publish them (checked against their sources; every series of a name is summed, so
 * data-parallel engines and several served models add up, except KV use, whose largest value counts):
 *
 * | engine     | batch (running)              | its queue (waiting)          | KV use (0–1)                                             |
 * | ---------- | ---------------------------- | ---------------------------- | -------------------------------------------------------- |
 * | vLLM       | `vllm:num_requests_running`  | `vllm:num_requests_waiting`  | `vllm:kv_cache_usage_perc` (before 0.9: `vllm:gpu_cache_usage_perc`) |
 * | SGLang     | `sglang:num_running_reqs`    | `sglang:num_queue_reqs`      | `sglang:token_usage`                                     |
 * | llama.cpp  | `llamacpp:requests_processing` | `llamacpp:requests_deferred` | `llamacpp:kv_cache_usage_ratio` (older builds only)     |
 *
 * vLLM's `vllm:request_queue_time_seconds` histogram (its `_sum` and `_count`) is read too: the time
 * requests spent in the engine's queue, reported by the engine itself.
 *
 * The scraper polls one URL every `intervalMs` (a reading older than `staleMs` is not used), with a
 * timeout and a body cap. A URL that answers without a known family (an OpenAI-style API: 404, or a text
 * without these names) is `none` at once; one that does not answer (not up yet, or our own start-up kept
 * the event loop busy past the timeout) is probed PROBE_ATTEMPTS times before it is `none`. A `none` URL
 * is probed again every PROBE_RETRY_MS; one that stops answering after it did keeps being polled with a
 * capped backoff (its readings go stale meanwhile).
 */
import { Pool } from 'undici';

export type EngineKind = 'vllm' | 'sglang' | 'llamacpp';

/** One reading of an engine's load. */
export interface EngineReading {
  kind: EngineKind;
  /** Sequences in the engine's batch now. */
  running: number;
  /** Requests waiting in the engine's own queue. */
  waiting: number;
  /** KV-cache use, 0–1; undefined when the engine does not publish it. */
  kvUsage: number | undefined;
  /** vLLM's queue-time histogram, cumulative (`_sum` seconds, `_count`); undefined elsewhere. */
  queueTime: { sumS: number; count: number } | undefined;
  /** When the scrape was sent (epoch ms): the reading describes the engine at about this time or later. */
  requestedAt: number;
  /** When its answer was read (epoch ms). */
  at: number;
}

interface Family {
  kind: EngineKind;
  running: string;
  waiting: string;
  /** KV-use names, the preferred one first. */
  kv: readonly string[];
  queueTime?: string | undefined;
}

const FAMILIES: readonly Family[] = [
  {
    kind: 'vllm',
    running: 'vllm:num_requests_running',
    waiting: 'vllm:num_requests_waiting',
    kv: ['vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc'],
    queueTime: 'vllm:request_queue_time_seconds',
  },
  {
    kind: 'sglang',
    running: 'sglang:num_running_reqs',
    waiting: 'sglang:num_queue_reqs',
    kv: ['sglang:token_usage'],
  },
  {
    kind: 'llamacpp',
    running: 'llamacpp:requests_processing',
    waiting: 'llamacpp:requests_deferred',
    kv: ['llamacpp:kv_cache_usage_ratio'],
  },
];

/** The sample lines of one metric name, summed (and their largest value), from Prometheus text. */
interface Totals {
  sum: Map<string, number>;
  max: Map<string, number>;
}

/** The metric name of a sample line, and where its value starts; undefined for comments and blanks. */
function sampleOf(line: string): { name: string; value: number } | undefined {
  if (line === '' || line.startsWith('#')) return undefined;
  let i = 0;
  while (i < line.length && line[i] !== '{' && line[i] !== ' ' && line[i] !== '\t') i++;
  const name = line.slice(0, i);
  if (line[i] === '{') {
    // Label values are quoted and may hold `}` or escaped quotes.
    let quoted = false;
    for (i += 1; i < line.length; i++) {
      const c = line[i];
      if (quoted) {
        if (c === '\\') i++;
        else if (c === '"') quoted = false;
      } else if (c === '"') quoted = true;
      else if (c === '}') break;
    }
    i += 1;
  }
  while (i < line.length && (line[i] === ' ' || line[i] === '\t')) i++;
  let end = i;
  while (end < line.length && line[end] !== ' ' && line[end] !== '\t') end++;
  const value = Number(line.slice(i, end));
  return Number.isFinite(value) ? { name, value } : undefined;
}

const WANTED = new Set(
  FAMILIES.flatMap((f) => [
    f.running,
    f.waiting,
    ...f.kv,
    ...(f.queueTime === undefined ? [] : [`${f.queueTime}_sum`, `${f.queueTime}_count`]),
  ]),
);

/** Sums (and maxima) of the wanted names over Prometheus text exposition. */
function totals(text: string): Totals {
  const sum = new Map<string, number>();
  const max = new Map<string, number>();
  let start = 0;
  while (start < text.length) {
    let end = text.indexOf('\n', start);
    if (end < 0) end = text.length;
    // Cheap prefilter: every wanted name starts with one of these.
    const c = text.charCodeAt(start);
    if (c === 118 /* v */ || c === 115 /* s */ || c === 108 /* l */) {
      const sample = sampleOf(text.slice(start, end).trimEnd());
      if (sample !== undefined && WANTED.has(sample.name)) {
        sum.set(sample.name, (sum.get(sample.name) ?? 0) + sample.value);
        max.set(sample.name, Math.max(max.get(sample.name) ?? -Infinity, sample.value));
      }
    }
    start = end + 1;
  }
  return { sum, max };
}

/**
 * The engine's load in Prometheus `/metrics` text, or undefined when it publishes none of the known
 * families (both its running and its waiting gauge are needed). Times are the caller's.
 */
export function parseEngineMetrics(
  text: string,
  times: { requestedAt: number; at: number },
): EngineReading | undefined {
  const { sum, max } = totals(text);
  for (const family of FAMILIES) {
    const running = sum.get(family.running);
    const waiting = sum.get(family.waiting);
    if (running === undefined || waiting === undefined) continue;
    let kvUsage: number | undefined;
    for (const name of family.kv) {
      const v = max.get(name);
      if (v !== undefined) {
        kvUsage = Math.min(1, Math.max(0, v));
        break;
      }
    }
    const qSum = family.queueTime === undefined ? undefined : sum.get(`${family.queueTime}_sum`);
    const qCount = family.queueTime === undefined ? undefined : sum.get(`${family.queueTime}_count`);
    return {
      kind: family.kind,
      running: Math.max(0, running),
      waiting: Math.max(0, waiting),
      kvUsage,
      queueTime: qSum === undefined || qCount === undefined ? undefined : { sumS: qSum, count: qCount },
      ...times,
    };
  }
  return undefined;
}

/**
 * The scrape URL of an OpenAI-compatible base URL: its origin and path with a trailing `/v1` removed, then
 * `/metrics` (`http://h:8000/v1` → `http://h:8000/metrics`). vLLM, SGLang and llama.cpp serve `/metrics`
 * beside their `/v1` routes. The base URL's query is not carried over.
 */
export function engineMetricsUrl(baseUrl: string): string {
  const url = new URL(baseUrl);
  const path = url.pathname.replace(/\/+$/, '').replace(/\/v1$/, '');
  return `${url.origin}${path}/metrics`;
}

export type ScrapeState = 'probing' | 'engine' | 'none';

export interface EngineScraperOptions {
  url: string;
  /** Poll period, ms. */
  intervalMs: number;
  /** A reading older than this is not used, ms. Default max(1 000, 10 × intervalMs). */
  staleMs?: number | undefined;
  /** Sent as `Authorization: Bearer …` (vLLM's `--api-key` does not cover /metrics; some proxies do). */
  apiKey?: string | undefined;
  /** Clock (epoch ms). Default Date.now. */
  now?: (() => number) | undefined;
}

export interface EngineScraper {
  readonly url: string;
  /** `probing` until the first answer, `engine` once a known family was read, `none` when never. */
  readonly state: ScrapeState;
  /** The engine kind once known. */
  readonly kind: EngineKind | undefined;
  /** The latest reading when it is not older than `staleMs`; else undefined. */
  fresh(): EngineReading | undefined;
  /** Called with every new reading, and once when the state leaves `probing`. */
  subscribe(listener: (reading: EngineReading | undefined) => void): void;
  close(): Promise<void>;
}

/** How often a URL that never published engine metrics is probed again, ms. */
const PROBE_RETRY_MS = 30_000;
/** Probes without an answer before a URL is taken for one without metrics. */
const PROBE_ATTEMPTS = 3;
/** Longest pause between polls of an engine that stopped answering, ms. */
const MAX_BACKOFF_MS = 5_000;
/** A metrics body larger than this is not read (vLLM's is tens of kB; many LoRA adapters add more). */
const MAX_BODY_BYTES = 8 * 1024 * 1024;

/** Polls an engine's /metrics; see the module comment. Timers are unref'd. */
export function createEngineScraper(options: EngineScraperOptions): EngineScraper {
  const now = options.now ?? Date.now;
  const intervalMs = Math.max(10, options.intervalMs);
  const staleMs = options.staleMs ?? Math.max(1_000, 10 * intervalMs);
  const timeoutMs = Math.max(2_000, Math.min(5_000, 10 * intervalMs));
  const target = new URL(options.url);
  const pool = new Pool(target.origin, {
    connections: 1,
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
    maxResponseSize: MAX_BODY_BYTES,
  });
  const headers: Record<string, string> = { accept: 'text/plain' };
  if (options.apiKey !== undefined) headers['authorization'] = `Bearer ${options.apiKey}`;
  const listeners: Array<(reading: EngineReading | undefined) => void> = [];
  let state: ScrapeState = 'probing';
  let kind: EngineKind | undefined;
  let latest: EngineReading | undefined;
  let failures = 0;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  let inflight: AbortController | undefined;

  const emit = (reading: EngineReading | undefined): void => {
    for (const listener of listeners) listener(reading);
  };

  /** A reading; `answered`: the URL answered (a status), even without engine metrics. */
  const scrape = async (): Promise<{ reading: EngineReading | undefined; answered: boolean }> => {
    const controller = new AbortController();
    inflight = controller;
    const cut = setTimeout(() => controller.abort(), timeoutMs);
    const requestedAt = now();
    try {
      const res = await pool.request({
        method: 'GET',
        path: `${target.pathname}${target.search}`,
        headers,
        signal: controller.signal,
      });
      if (res.statusCode !== 200) {
        await res.body.dump();
        return { reading: undefined, answered: true };
      }
      const text = await res.body.text();
      return { reading: parseEngineMetrics(text, { requestedAt, at: now() }), answered: true };
    } catch {
      return { reading: undefined, answered: false };
    } finally {
      clearTimeout(cut);
      inflight = undefined;
    }
  };

  const schedule = (ms: number): void => {
    if (closed) return;
    timer = setTimeout(() => void tick(), ms);
    timer.unref();
  };

  const tick = async (): Promise<void> => {
    const { reading, answered } = await scrape();
    if (closed) return;
    if (reading !== undefined) {
      failures = 0;
      state = 'engine';
      kind = reading.kind;
      latest = reading;
      emit(reading);
      schedule(intervalMs);
      return;
    }
    failures += 1;
    if (state === 'probing') {
      if (!answered && failures < PROBE_ATTEMPTS) {
        schedule(Math.min(MAX_BACKOFF_MS, 500 * failures));
        return;
      }
      state = 'none';
      emit(undefined);
    }
    if (state === 'none') schedule(PROBE_RETRY_MS);
    else schedule(Math.min(MAX_BACKOFF_MS, intervalMs * 2 ** Math.min(failures, 8)));
  };

  void tick();

  return {
    url: options.url,
    get state() {
      return state;
    },
    get kind() {
      return kind;
    },
    fresh() {
      return latest !== undefined && now() - latest.at <= staleMs ? latest : undefined;
    },
    subscribe(listener) {
      listeners.push(listener);
    },
    async close() {
      closed = true;
      if (timer !== undefined) clearTimeout(timer);
      inflight?.abort();
      await pool.destroy();
    },
  };
}
