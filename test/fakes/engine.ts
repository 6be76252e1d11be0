/**
 * A continuous-batching engine for the fake OpenAI server (`startFakeOpenAI({ engine })`), shaped like vLLM
 * or SGLang serving one model:
 *
 * - at most `slots` sequences decode at once (`--max-num-seqs`); the rest wait in the engine's own queue
 *   (FIFO, or by request `priority` — lower first, as vLLM's `--scheduling-policy priority` — when
 *   `priorityScheduling` is on; without it a non-zero `priority` is refused with vLLM's 400);
 * - the engine runs in iterations: each decodes one token of every running sequence and lasts
 *   `stepMs × (1 + slowdown × (b − 1) / (slots − 1))` for a batch of b (a larger batch is slower per step,
 *   faster per sequence); a sequence finishes after `tokens` iterations; waiting requests join the batch
 *   at an iteration's boundary (or at once when the engine is idle);
 * - `/metrics` publishes vLLM's names: `vllm:num_requests_running`, `vllm:num_requests_waiting`,
 *   `vllm:kv_cache_usage_perc` (0.6 × running ÷ slots: the batch bound binds first), the `vllm:request_queue_time_seconds` histogram and
 *   `vllm:request_success_total`.
 *
 * Its timing is its own: iterations chain on one timer, so a process that shares the event loop with
 * the engine delays it. Tests that measure time run it in its own process (engine-server.ts).
 */

export interface EngineOptions {
  /** Sequences decoded at once (vLLM `--max-num-seqs`). */
  slots: number;
  /** One iteration with a batch of one, ms. */
  stepMs: number;
  /** Extra iteration time at a full batch, as a share of `stepMs` (0.5: 1.5 × at full batch). Default 0.5. */
  slowdown?: number | undefined;
  /** Iterations (decoded tokens) per request. Default 8. */
  tokens?: number | undefined;
  /** Order the queue by request `priority` (lower first); without it a non-zero priority is a 400. */
  priorityScheduling?: boolean | undefined;
  /**
   * `/metrics` reports 0 running and 0 waiting whatever the engine holds (another process's exporter, a
   * router in front of several engines, a stale gauge: issue 38 item 10). Default false.
   */
  lyingGauges?: boolean | undefined;
}

/** What the engine did, for a test's bounds. */
export interface EngineStats {
  /** Requests finished. */
  completed: number;
  /** Iterations run, and the sequence-iterations they decoded. */
  iterations: number;
  sequenceSteps: number;
  /** Largest queue seen. */
  maxWaiting: number;
  /** Largest batch seen. */
  maxRunning: number;
  /** Time with at least one sequence running, ms. */
  busyMs: number;
  /**
   * The engine's own bound for the work it did, ms: the time its iterations would have taken had every
   * one run a full batch — each iteration's measured duration × (its batch ÷ slots) × (a full batch's step
   * ÷ its batch's step). Measured, so an engine process slowed by a busy machine has a longer bound too.
   */
  boundMs: number;
}

interface Sequence {
  left: number;
  priority: number;
  seq: number;
  arrivedAt: number;
  done: () => void;
}

export interface BatchingEngine {
  /** Queues one request; `done` runs when its last token is decoded. Returns a cancel function. */
  submit(priority: number, done: () => void): () => void;
  /** The refusal for a request, as vLLM answers it; undefined when it is accepted. */
  refuse(priority: number): { status: number; body: unknown } | undefined;
  /** Prometheus text with vLLM's names. */
  metrics(modelName: string): string;
  stats(): EngineStats;
  resetStats(): void;
  close(): void;
}

const QUEUE_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80];

export function createBatchingEngine(options: EngineOptions): BatchingEngine {
  const { slots, stepMs } = options;
  const slowdown = options.slowdown ?? 0.5;
  const tokens = options.tokens ?? 8;
  const stepOf = (batch: number): number =>
    stepMs * (1 + (slots > 1 ? (slowdown * (batch - 1)) / (slots - 1) : 0));
  const running = new Set<Sequence>();
  const waiting: Sequence[] = [];
  let seq = 0;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  let stepStartedAt = 0;
  const queueCounts = new Array<number>(QUEUE_BUCKETS.length).fill(0);
  let queueSum = 0;
  let queueCount = 0;
  let success = 0;
  let stats: EngineStats = emptyStats();

  function emptyStats(): EngineStats {
    return {
      completed: 0,
      iterations: 0,
      sequenceSteps: 0,
      maxWaiting: 0,
      maxRunning: 0,
      busyMs: 0,
      boundMs: 0,
    };
  }

  const admit = (): void => {
    if (options.priorityScheduling === true) waiting.sort((a, b) => a.priority - b.priority || a.seq - b.seq);
    while (running.size < slots && waiting.length > 0) {
      const next = waiting.shift();
      if (next === undefined) break;
      const queuedS = (performance.now() - next.arrivedAt) / 1000;
      queueSum += queuedS;
      queueCount += 1;
      for (let i = 0; i < QUEUE_BUCKETS.length; i++)
        if (queuedS <= (QUEUE_BUCKETS[i] ?? 0)) queueCounts[i]! += 1;
      running.add(next);
    }
    stats.maxRunning = Math.max(stats.maxRunning, running.size);
  };

  const iterate = (): void => {
    timer = undefined;
    if (closed) return;
    const batch = running.size;
    stats.iterations += 1;
    stats.sequenceSteps += batch;
    const elapsed = performance.now() - stepStartedAt;
    stats.busyMs += elapsed;
    stats.boundMs += ((elapsed * batch) / slots) * (stepOf(slots) / stepOf(batch));
    for (const s of [...running]) {
      s.left -= 1;
      if (s.left <= 0) {
        running.delete(s);
        success += 1;
        stats.completed += 1;
        s.done();
      }
    }
    admit();
    schedule();
  };

  const schedule = (): void => {
    if (timer !== undefined || running.size === 0 || closed) return;
    stepStartedAt = performance.now();
    timer = setTimeout(iterate, stepOf(running.size));
  };

  return {
    submit(priority, done) {
      const s: Sequence = { left: tokens, priority, seq: seq++, arrivedAt: performance.now(), done };
      waiting.push(s);
      // An idle engine starts at once; a busy one takes new requests at its next iteration boundary.
      if (timer === undefined) admit();
      stats.maxWaiting = Math.max(stats.maxWaiting, waiting.length);
      schedule();
      return () => {
        const at = waiting.indexOf(s);
        if (at >= 0) waiting.splice(at, 1);
        // vLLM aborts a request whose client went away, running or not.
        running.delete(s);
      };
    },
    refuse(priority) {
      if (priority === 0 || options.priorityScheduling === true) return undefined;
      return {
        status: 400,
        body: {
          object: 'error',
          message: `Got priority ${priority} but Priority scheduling is not enabled.`,
          type: 'BadRequestError',
          param: null,
          code: 400,
        },
      };
    },
    metrics(modelName) {
      const labels = `model_name="${modelName}",engine="0"`;
      const lines = [
        '# HELP vllm:num_requests_running Number of requests in model execution batches.',
        '# TYPE vllm:num_requests_running gauge',
        `vllm:num_requests_running{${labels}} ${options.lyingGauges === true ? 0 : running.size}.0`,
        '# HELP vllm:num_requests_waiting Number of requests waiting to be processed.',
        '# TYPE vllm:num_requests_waiting gauge',
        `vllm:num_requests_waiting{${labels}} ${options.lyingGauges === true ? 0 : waiting.length}.0`,
        '# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.',
        '# TYPE vllm:kv_cache_usage_perc gauge',
        // The batch bound (`--max-num-seqs`) binds before the KV cache here: each sequence takes 0.6 / slots.
        `vllm:kv_cache_usage_perc{${labels}} ${(0.6 * running.size) / slots}`,
        '# HELP vllm:request_success_total Count of successfully processed requests.',
        '# TYPE vllm:request_success_total counter',
        `vllm:request_success_total{${labels},finished_reason="stop"} ${success}.0`,
        '# HELP vllm:request_queue_time_seconds Histogram of time spent in WAITING phase for request.',
        '# TYPE vllm:request_queue_time_seconds histogram',
        `vllm:request_queue_time_seconds_sum{${labels}} ${queueSum}`,
        ...QUEUE_BUCKETS.map(
          (le, i) => `vllm:request_queue_time_seconds_bucket{${labels},le="${le}"} ${queueCounts[i] ?? 0}.0`,
        ),
        `vllm:request_queue_time_seconds_bucket{${labels},le="+Inf"} ${queueCount}.0`,
        `vllm:request_queue_time_seconds_count{${labels}} ${queueCount}.0`,
      ];
      return `${lines.join('\n')}\n`;
    },
    stats: () => ({ ...stats }),
    resetStats() {
      stats = emptyStats();
    },
    close() {
      closed = true;
      if (timer !== undefined) clearTimeout(timer);
      running.clear();
      waiting.length = 0;
    },
  };
}
