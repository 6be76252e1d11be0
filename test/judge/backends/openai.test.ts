import { afterEach, describe, expect, it } from 'vitest';
import { RewardError } from '../../../src/errors.js';
import {
  createOpenAICompatibleBackend,
  type OpenAICompatibleBackendOptions,
} from '../../../src/judge/backends/openai.js';
import { BackendSettings, type BackendSettingsInput } from '../../../src/settings/routing-file.js';
import type { Backend, LlmRequest } from '../../../src/judge/types.js';
import {
  openaiContextOverflow,
  startFakeOpenAI,
  universalReply,
  type FakeOpenAI,
  type FakeReply,
} from '../../fakes/openai.js';

const SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['stance', 'confidence'],
  properties: { stance: { type: 'string', enum: ['match', 'no_match'] }, confidence: { type: 'number' } },
};

const request = (over: Partial<LlmRequest> = {}): LlmRequest => ({
  role: 'analyst',
  nodeId: 'a1',
  model: 'judge-7b',
  messages: [
    { role: 'system', content: 'You are the Analyst. Answer in JSON.' },
    { role: 'user', content: 'Compare these ideas.' },
  ],
  schemaName: 'analyst',
  jsonSchema: SCHEMA,
  context: {
    question: 'q',
    candidate: 'c',
    groundTruth: 'g',
    nonce: 'n0nce',
    round: 1,
    rounds: 1,
    node: { id: 'a1' },
    visible: [],
  },
  ...over,
});

const MATCH: FakeReply = { kind: 'json', body: universalReply('match', 0.8) };

let fake: FakeOpenAI | undefined;
let backend: Backend | undefined;
afterEach(async () => {
  await backend?.close?.();
  await fake?.close();
  backend = undefined;
  fake = undefined;
});

/** Records requested backoff sleeps and returns at once (no real waiting in tests). */
function instantSleep() {
  const sleeps: number[] = [];
  return {
    sleeps,
    sleep: async (ms: number, signal: AbortSignal) => {
      sleeps.push(ms);
      await Promise.resolve();
      signal.throwIfAborted();
    },
  };
}

async function setup(
  fakeOptions: Parameters<typeof startFakeOpenAI>[0],
  settings: Partial<BackendSettingsInput> = {},
  options: OpenAICompatibleBackendOptions = {},
) {
  fake = await startFakeOpenAI(fakeOptions);
  const timing = instantSleep();
  backend = createOpenAICompatibleBackend(
    BackendSettings.parse({ base_url: fake.baseURL, model: 'judge-7b', api_key: 'sk-test', ...settings }),
    { random: () => 0.5, sleep: timing.sleep, ...options },
  );
  return { fake, backend, sleeps: timing.sleeps };
}

const call = (
  b: Backend,
  over: Partial<LlmRequest> = {},
  signal = new AbortController().signal,
  deadlineMs = 10_000,
) => b.complete(request(over), { signal, deadline: Date.now() + deadlineMs });

async function failure(promise: Promise<unknown>): Promise<RewardError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(RewardError);
  return error as RewardError;
}

describe('createOpenAICompatibleBackend: requests', () => {
  it('parses a valid reply with usage and model', async () => {
    const { backend: b, fake: f } = await setup({ script: [MATCH] });
    const reply = await call(b);
    expect(JSON.parse(reply.text)).toMatchObject({ stance: 'match', confidence: 0.8 });
    expect(reply.model).toBe('judge-7b');
    expect(reply.attempts).toBe(1);
    const promptChars = request().messages.reduce((n, m) => n + m.content.length, 0);
    expect(reply.promptTokens).toBe(Math.ceil(promptChars / 4)); // the fake's usage
    expect(f.calls).toHaveLength(1);
    expect(reply.completionTokens).toBeGreaterThan(10);
    expect(reply.latencyMs).toBeGreaterThan(0);
  });

  it('sends a strict json_schema response_format named after the schema, with sampling fields', async () => {
    const { backend: b, fake: f } = await setup({ script: [MATCH] });
    await call(b, { temperature: 0.7, topP: 0.9, maxTokens: 256, seed: 42 });
    const [recorded] = f.calls;
    expect(recorded?.path).toBe('/v1/chat/completions');
    expect(recorded?.headers.authorization).toBe('Bearer sk-test');
    expect(recorded?.body).toEqual({
      model: 'judge-7b',
      messages: request().messages,
      response_format: {
        type: 'json_schema',
        json_schema: { name: 'analyst', strict: true, schema: SCHEMA },
      },
      seed: 42,
      temperature: 0.7,
      top_p: 0.9,
      max_tokens: 256,
    });
  });

  it('omits unset sampling fields', async () => {
    const { backend: b, fake: f } = await setup({ script: [MATCH] });
    await call(b);
    expect(Object.keys(f.calls[0]!.body).sort()).toEqual(['messages', 'model', 'response_format']);
  });

  it('sends json_object with the schema in the system prompt when configured', async () => {
    const { backend: b, fake: f } = await setup({ script: [MATCH] }, { response_format: 'json_object' });
    await call(b);
    const body = f.calls[0]!.body;
    expect(body.response_format).toEqual({ type: 'json_object' });
    expect(body.messages?.[0]?.content).toContain('You are the Analyst.');
    expect(body.messages?.[0]?.content).toContain(JSON.stringify(SCHEMA));
    expect(body.messages?.[1]).toEqual(request().messages[1]);
  });

  it('falls back to json_object once on a 400 about response_format, and remembers it', async () => {
    const reject400: FakeReply = {
      kind: 'status',
      status: 400,
      body: {
        error: { message: "Unsupported response_format type 'json_schema'", type: 'invalid_request_error' },
      },
    };
    const { backend: b, fake: f, sleeps } = await setup({ script: [reject400, MATCH, MATCH] });
    const first = await call(b);
    expect(first.attempts).toBe(1);
    await call(b);
    expect(f.calls.map((c) => c.body.response_format?.type)).toEqual([
      'json_schema',
      'json_object',
      'json_object',
    ]);
    expect(sleeps).toEqual([]);
  });
});

describe('createOpenAICompatibleBackend: retries and failures', () => {
  it('retries a 500 and succeeds on the second attempt', async () => {
    const { backend: b, fake: f, sleeps } = await setup({ script: [{ kind: 'status', status: 500 }, MATCH] });
    const reply = await call(b);
    expect(reply.attempts).toBe(2);
    expect(f.calls).toHaveLength(2);
    expect(sleeps).toEqual([125]); // 0.5 × 250 ms base
  });

  it('honours Retry-After on a 429', async () => {
    const { backend: b, sleeps } = await setup({
      script: [{ kind: 'status', status: 429, retryAfter: '1' }, MATCH],
    });
    expect((await call(b)).attempts).toBe(2);
    expect(sleeps).toEqual([1_000]);
  });

  it('retries a reset connection', async () => {
    const { backend: b } = await setup({ script: [{ kind: 'reset' }, MATCH] });
    expect((await call(b)).attempts).toBe(2);
  });

  it('fails with RW_JUDGE_UNAVAILABLE after max_retries + 1 attempts of 503', async () => {
    const {
      backend: b,
      fake: f,
      sleeps,
    } = await setup({ fallback: { kind: 'status', status: 503 } }, { max_retries: 3 });
    const error = await failure(call(b));
    expect(error.code).toBe('RW_JUDGE_UNAVAILABLE');
    expect(error.message).toContain('HTTP 503');
    expect(error.details).toMatchObject({ attempts: 4, status: 503 });
    expect(f.calls).toHaveLength(4);
    expect(sleeps).toEqual([125, 250, 500]);
  });

  it('does not retry another 4xx and names the status', async () => {
    const { backend: b, fake: f } = await setup({
      script: [{ kind: 'status', status: 401, body: { error: { message: 'Incorrect API key' } } }],
    });
    const error = await failure(call(b));
    expect(error.code).toBe('RW_JUDGE_UNAVAILABLE');
    expect(error.message).toContain('HTTP 401');
    expect(error.message).toContain('Incorrect API key');
    expect(f.calls).toHaveLength(1);
  });

  it('maps a hung backend to RW_JUDGE_TIMEOUT after timeout_ms', async () => {
    const { backend: b, fake: f } = await setup(
      { script: [{ kind: 'hang' }] },
      { timeout_ms: 200, max_retries: 0 },
    );
    const t0 = performance.now();
    const error = await failure(call(b));
    const elapsed = performance.now() - t0;
    expect(error.code).toBe('RW_JUDGE_TIMEOUT');
    expect(elapsed).toBeGreaterThanOrEqual(190);
    expect(elapsed).toBeLessThan(1_500);
    await f.waitForIdle();
    expect(f.calls[0]?.outcome).toBe('client_closed');
  });

  it('clips the attempt timeout to the deadline', async () => {
    const { backend: b } = await setup({ script: [{ kind: 'hang' }] }, { timeout_ms: 30_000 });
    const t0 = performance.now();
    const error = await failure(call(b, {}, new AbortController().signal, 200));
    expect(error.code).toBe('RW_JUDGE_TIMEOUT');
    expect(performance.now() - t0).toBeLessThan(1_500);
  });

  it('gives up before the deadline instead of backing off past it', async () => {
    const { backend: b, fake: f } = await setup(
      { fallback: { kind: 'status', status: 503 } },
      { max_retries: 5 },
      { random: () => 0.99, backoff: { baseDelayMs: 5_000, maxDelayMs: 5_000 }, sleep: undefined },
    );
    const t0 = performance.now();
    const error = await failure(call(b, {}, new AbortController().signal, 1_000));
    expect(performance.now() - t0).toBeLessThan(900);
    expect(error.code).toBe('RW_JUDGE_UNAVAILABLE');
    expect(error.message).toContain('deadline');
    expect(f.calls).toHaveLength(1);
  });

  it('maps missing or empty content to RW_JUDGE_UNPARSABLE without retrying', async () => {
    const { backend: b, fake: f } = await setup({
      script: [
        { kind: 'text', text: '' },
        { kind: 'text', text: null, finishReason: 'content_filter' },
      ],
    });
    expect((await failure(call(b))).code).toBe('RW_JUDGE_UNPARSABLE');
    const filtered = await failure(call(b));
    expect(filtered.code).toBe('RW_JUDGE_UNPARSABLE');
    expect(filtered.message).toContain('content_filter');
    expect(f.calls).toHaveLength(2);
  });

  it('returns invalid JSON content as text (the executor validates it)', async () => {
    const { backend: b } = await setup({ script: [{ kind: 'text', text: 'I think it matches.' }] });
    expect((await call(b)).text).toBe('I think it matches.');
  });

  it('maps a refused connection to RW_JUDGE_UNAVAILABLE', async () => {
    const { backend: b, fake: f } = await setup({}, { max_retries: 1 });
    await f.close();
    fake = undefined;
    const error = await failure(call(b));
    expect(error.code).toBe('RW_JUDGE_UNAVAILABLE');
    expect(error.message).toContain('ECONNREFUSED');
  });
});

describe('createOpenAICompatibleBackend: cancellation and limits', () => {
  it('cancels an in-flight call promptly on abort, closing the socket', async () => {
    const { backend: b, fake: f } = await setup({ script: [{ kind: 'hang' }] });
    const controller = new AbortController();
    const pending = failure(call(b, {}, controller.signal));
    await f.waitForCalls(1);
    const t0 = performance.now();
    controller.abort();
    const error = await pending;
    expect(performance.now() - t0).toBeLessThan(200);
    // The caller's abort is its own code, not a judge timeout.
    expect(error.code).toBe('RW_CLIENT_ABORTED');
    expect(error.message).toContain('aborted');
    await f.waitForIdle();
    expect(f.calls[0]?.outcome).toBe('client_closed');
  });

  it('rethrows a RewardError abort reason as is', async () => {
    const { backend: b, fake: f } = await setup({ script: [{ kind: 'hang' }] });
    const controller = new AbortController();
    const pending = failure(call(b, {}, controller.signal));
    await f.waitForCalls(1);
    const reason = new RewardError('RW_SHUTTING_DOWN', 'shutting down');
    controller.abort(reason);
    expect(await pending).toBe(reason);
  });

  it('makes no call on an already-aborted signal', async () => {
    const { backend: b, fake: f } = await setup({ script: [MATCH] });
    expect((await failure(call(b, {}, AbortSignal.abort()))).code).toBe('RW_CLIENT_ABORTED');
    expect(f.callCount).toBe(0);
  });

  it('keeps at most max_inflight calls open', async () => {
    const { backend: b, fake: f } = await setup({ latencyMs: 20, fallback: MATCH }, { max_inflight: 3 });
    const replies = await Promise.all(Array.from({ length: 20 }, () => call(b)));
    expect(replies).toHaveLength(20);
    expect(f.maxInflight).toBe(3);
  });

  it('reports saturation while calls queue for a slot', async () => {
    // No stagger: the second call must queue for the slot, not wait for its sibling's prefill.
    const { backend: b, fake: f } = await setup(
      { fallback: { kind: 'hang' } },
      { max_inflight: 1, prefix_stagger_ms: 0 },
    );
    const controller = new AbortController();
    const first = failure(call(b, {}, controller.signal));
    expect(b.isSaturated?.()).toBe(false);
    const second = failure(call(b, {}, controller.signal));
    await f.waitForCalls(1);
    expect(b.isSaturated?.()).toBe(true);
    controller.abort();
    await Promise.all([first, second]);
    expect(b.isSaturated?.()).toBe(false);
    expect(f.callCount).toBe(1);
  });

  it('waits for the RPM bucket between calls', async () => {
    // A stopped clock: the bucket refills by it, so the wait does not shrink with the time the first call
    // took (889 ms, not > 900, at load 5 with the wall clock).
    const clock = Date.now();
    const { backend: b, sleeps } = await setup({ fallback: MATCH }, { rpm: 60 }, { now: () => clock });
    await call(b);
    await call(b);
    expect(sleeps).toHaveLength(1);
    expect(sleeps[0]).toBeGreaterThan(900);
    expect(sleeps[0]).toBeLessThanOrEqual(1000);
  });

  it('fails with RW_JUDGE_TIMEOUT when the RPM bucket cannot admit before the deadline', async () => {
    const { backend: b, fake: f } = await setup({ fallback: MATCH }, { rpm: 1 });
    await call(b);
    const error = await failure(call(b, {}, new AbortController().signal, 5_000));
    expect(error.code).toBe('RW_JUDGE_TIMEOUT');
    expect(f.calls).toHaveLength(1);
  });
});

describe('createOpenAICompatibleBackend: ping', () => {
  it('is true for a reachable backend and false for a closed port', async () => {
    const { backend: b, fake: f } = await setup({});
    expect(await b.ping?.(new AbortController().signal)).toBe(true);
    await f.close();
    fake = undefined;
    expect(await b.ping?.(new AbortController().signal)).toBe(false);
  });
});

describe('createOpenAICompatibleBackend: real inference-server behaviour', () => {
  const formats = (f: FakeOpenAI) => f.calls.map((c) => c.body.response_format?.type);

  it('retries a deterministic 500 (same body, same error) at most once', async () => {
    const { backend: b, fake: f } = await setup(
      { fallback: { kind: 'status', status: 500 } },
      { max_retries: 3, response_format: 'json_object' },
    );
    const error = await failure(call(b));
    expect(error.code).toBe('RW_JUDGE_UNAVAILABLE');
    expect(error.message).toContain('the same error repeated');
    expect(f.calls).toHaveLength(2);
  });

  it('keeps retrying 500s whose error differs (a transient failure), up to max_retries', async () => {
    const { backend: b, fake: f } = await setup(
      {
        fallback: (_body, c) => ({
          kind: 'status',
          status: 500,
          body: { error: { message: `worker ${c.index} crashed`, type: 'server_error' } },
        }),
      },
      { max_retries: 3, response_format: 'json_object' },
    );
    expect((await failure(call(b))).details).toMatchObject({ attempts: 4 });
    expect(f.calls).toHaveLength(4);
  });

  it("falls back to json_object on llama.cpp's 400 'JSON schema conversion failed', and remembers it", async () => {
    const fallbacks: number[] = [];
    const { backend: b, fake: f } = await setup(
      { rejectJsonSchema: 400, fallback: MATCH },
      {},
      { onResponseFormatSwitch: (e) => fallbacks.push(e.status ?? 0) },
    );
    expect((await call(b)).attempts).toBe(1);
    await call(b);
    expect(formats(f)).toEqual(['json_schema', 'json_object', 'json_object']);
    expect(fallbacks).toEqual([400]);
    expect(f.calls[1]?.body.messages?.[0]?.content).toContain('JSON Schema');
  });

  it("falls back on older llama.cpp's 500 schema failure once json_schema is refused again after a json_object probe", async () => {
    const { backend: b, fake: f } = await setup(
      { rejectJsonSchema: 500, fallback: MATCH },
      { max_retries: 3 },
    );
    const reply = await call(b);
    // One attempt: refused, probed as json_object (accepted), refused again word for word → switch.
    expect(reply.attempts).toBe(1);
    await call(b);
    expect(formats(f)).toEqual(['json_schema', 'json_object', 'json_schema', 'json_object']);
    expect(b.replicas?.()[0]?.responseFormat).toBe('json_object');
  });

  it('does not fall back on a 400 that names another parameter', async () => {
    const bad: FakeReply = {
      kind: 'status',
      status: 400,
      body: {
        error: { message: 'temperature out of range', type: 'invalid_request_error', param: 'temperature' },
      },
    };
    const { backend: b, fake: f } = await setup({ script: [bad], fallback: MATCH });
    expect((await failure(call(b))).code).toBe('RW_JUDGE_UNAVAILABLE');
    expect(f.calls).toHaveLength(1);
  });

  it('stays on json_schema when the json_object probe fails too (the 400 was not about the schema)', async () => {
    const bad: FakeReply = {
      kind: 'status',
      status: 400,
      body: { error: { message: 'bad', type: 'invalid_request_error' } },
    };
    const { backend: b, fake: f } = await setup({ script: [bad, bad, bad], fallback: MATCH });
    expect((await failure(call(b))).code).toBe('RW_JUDGE_UNAVAILABLE');
    // The same error again is not probed again: one wasted call per distinct error, not one per call.
    expect((await failure(call(b))).code).toBe('RW_JUDGE_UNAVAILABLE');
    await call(b);
    expect(formats(f)).toEqual(['json_schema', 'json_object', 'json_schema', 'json_schema']);
  });

  it("names llama.cpp's exceed_context_size_error RW_JUDGE_CONTEXT_OVERFLOW, never retries it, learns n_ctx", async () => {
    const { backend: b, fake: f } = await setup({ contextTokens: 10 }, { max_retries: 3 });
    expect(b.contextTokens?.()).toBeUndefined();
    const error = await failure(call(b));
    expect(error.code).toBe('RW_JUDGE_CONTEXT_OVERFLOW');
    expect(error.details).toMatchObject({ status: 400, type: 'exceed_context_size_error', n_ctx: 10 });
    expect(f.calls).toHaveLength(1);
    expect(b.contextTokens?.()).toBe(10);
  });

  it("names OpenAI's context_length_exceeded RW_JUDGE_CONTEXT_OVERFLOW", async () => {
    const { backend: b, fake: f } = await setup({ script: [openaiContextOverflow()] }, { max_retries: 3 });
    expect((await failure(call(b))).code).toBe('RW_JUDGE_CONTEXT_OVERFLOW');
    expect(f.calls).toHaveLength(1);
  });

  it('passes finish_reason through (length: cut at max_tokens)', async () => {
    const { backend: b } = await setup({
      script: [{ kind: 'budget', body: universalReply('match'), needTokens: 500 }],
    });
    const reply = await call(b, { maxTokens: 20 });
    expect(reply.finishReason).toBe('length');
    const full = JSON.stringify(universalReply('match'));
    expect(reply.text).toBe(full.slice(0, Math.floor((full.length * 20) / 500)));
    expect(reply.completionTokens).toBe(20);
  });

  it('keeps retries within the retry budget against a backend that always fails', async () => {
    const retries = { allowed: 0, denied: 0 };
    const { backend: b, fake: f } = await setup(
      { fallback: { kind: 'status', status: 503 } },
      { max_retries: 3, retry_budget: 0.2, response_format: 'json_object' },
      // A dead backend's calls wait once for the open circuit: 50 ms here, not the production 5 s.
      { breaker: { openMs: 50 } },
    );
    const observer = {
      onRetry: (e: { allowed: boolean }) => void (e.allowed ? retries.allowed++ : retries.denied++),
    };
    const calls = 100;
    const errors = await Promise.all(
      Array.from({ length: calls }, () =>
        failure(
          b.complete(request(), {
            signal: new AbortController().signal,
            deadline: Date.now() + 10_000,
            observer,
          }),
        ),
      ),
    );
    // Without a budget: 100 × 4 attempts. With it: ≤ 10 (floor) + 20 % of 100 retries in the window.
    expect(retries.allowed).toBeLessThanOrEqual(10 + 0.2 * calls);
    expect(retries.allowed).toBeGreaterThanOrEqual(10);
    expect(retries.denied).toBeGreaterThan(0);
    // An allowed retry may still send nothing: the replica's circuit breaker can be open by then.
    expect(f.calls.length).toBeGreaterThanOrEqual(calls);
    expect(f.calls.length).toBeLessThanOrEqual(calls + retries.allowed);
    expect(errors.filter((e) => e.message.includes('retry budget exhausted')).length).toBe(retries.denied);
  });
});
