/**
 * Issue 23: json_schema → json_object only on evidence that the schema itself is refused, per replica, and
 * not forever. Every test runs the real transport against the scripted fake over loopback HTTP.
 */
import { afterEach, describe, expect, it } from 'vitest';

import { RewardError } from '../../../src/errors.js';
import {
  createOpenAICompatibleBackend,
  type OpenAICompatibleBackendOptions,
} from '../../../src/judge/backends/openai.js';
import type { ResponseFormatSwitch } from '../../../src/judge/backends/response-format.js';
import { createOfflineBackend } from '../../../src/judge/backends/offline.js';
import { createRouter } from '../../../src/judge/routing.js';
import type { Backend, LlmRequest } from '../../../src/judge/types.js';
import {
  BackendSettings,
  loadRoutingFile,
  type BackendSettingsInput,
} from '../../../src/settings/routing-file.js';
import {
  llamaJsonSchemaUnsupported,
  llamaSchemaFailed,
  startFakeOpenAI,
  universalReply,
  type FakeChatRequest,
  type FakeOpenAI,
  type FakeOpenAIOptions,
  type FakeReply,
  type RecordedCall,
} from '../../fakes/openai.js';

const SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['stance', 'confidence'],
  properties: { stance: { type: 'string', enum: ['match', 'no_match'] }, confidence: { type: 'number' } },
};

const request = (groundTruth = 'g'): LlmRequest => ({
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
    groundTruth,
    nonce: 'n0nce',
    round: 1,
    rounds: 1,
    node: { id: 'a1' },
    visible: [],
  },
});

const MATCH: FakeReply = { kind: 'json', body: universalReply('match', 0.8) };
/** The fake's stock 500: the same body every time, as a real engine's repeated error (an OOM) would be. */
const FAIL_500: FakeReply = { kind: 'status', status: 500 };

const fakes: FakeOpenAI[] = [];
let backend: Backend | undefined;
afterEach(async () => {
  await backend?.close?.();
  backend = undefined;
  await Promise.all(fakes.splice(0).map((f) => f.close()));
});

async function fake(options: FakeOpenAIOptions): Promise<FakeOpenAI> {
  const f = await startFakeOpenAI(options);
  fakes.push(f);
  return f;
}

interface Setup {
  backend: Backend;
  switches: ResponseFormatSwitch[];
  clock: { now: number };
}

function connect(
  urls: string[],
  settings: Partial<BackendSettingsInput> = {},
  options: OpenAICompatibleBackendOptions = {},
): Setup {
  const switches: ResponseFormatSwitch[] = [];
  const clock = { now: Date.now() };
  backend = createOpenAICompatibleBackend(
    BackendSettings.parse({
      ...(urls.length === 1 ? { base_url: urls[0] } : { base_urls: urls }),
      model: 'judge-7b',
      max_retries: 3,
      ...settings,
    }),
    {
      random: () => 0.5,
      sleep: async (_ms, signal) => {
        await Promise.resolve();
        signal.throwIfAborted();
      },
      now: () => clock.now,
      onResponseFormatSwitch: (e) => switches.push(e),
      ...options,
    },
  );
  return { backend, switches, clock };
}

const call = (b: Backend, groundTruth?: string) =>
  b.complete(request(groundTruth), { signal: new AbortController().signal, deadline: Date.now() + 10_000 });

const formats = (f: FakeOpenAI) => f.calls.map((c) => c.body.response_format?.type);
const mode = (b: Backend, i = 0) => b.replicas?.()[i]?.responseFormat;
const isSchema = (body: FakeChatRequest) => body.response_format?.type === 'json_schema';

describe('json_schema stays on through server faults', () => {
  it('a transient 500 is retried as json_schema: no probe, no switch', async () => {
    const f = await fake({ script: [FAIL_500], fallback: MATCH });
    const { backend: b, switches } = connect([f.baseURL]);
    expect((await call(b)).attempts).toBe(2);
    await call(b);
    expect(formats(f)).toEqual(['json_schema', 'json_schema', 'json_schema']);
    expect(mode(b)).toBe('json_schema');
    expect(switches).toEqual([]);
  });

  it('a burst of identical 500s (a deterministic-looking engine error) never sends json_object', async () => {
    // 12 identical 500s, then the engine recovers. Before issue 23 the second identical 500 of a call
    // triggered a json_object probe, its success switched the backend for good.
    const f = await fake({ script: Array.from({ length: 12 }, () => FAIL_500), fallback: MATCH });
    // The breaker would open after 5 failures and hide the burst from the transport: keep it closed.
    const { backend: b, switches } = connect(
      [f.baseURL],
      {},
      { breaker: { failureThreshold: 1000, minSamples: 1000 } },
    );
    const outcomes: string[] = [];
    for (let i = 0; i < 8; i++) {
      outcomes.push(
        await call(b).then(
          () => 'ok',
          (e: unknown) => (e instanceof RewardError ? e.code : 'other'),
        ),
      );
    }
    expect(outcomes).toContain('RW_JUDGE_UNAVAILABLE');
    expect(outcomes.at(-1)).toBe('ok');
    expect(formats(f).every((t) => t === 'json_schema')).toBe(true);
    expect(f.calls.length).toBeGreaterThan(12);
    expect(mode(b)).toBe('json_schema');
    expect(switches).toEqual([]);
    expect(b.replicas?.()[0]?.responseFormatSwitches?.size).toBe(0);
  });

  it('429s (with and without Retry-After) never probe json_object', async () => {
    const f = await fake({
      script: [
        { kind: 'status', status: 429, retryAfter: '0' },
        { kind: 'status', status: 429 },
      ],
      fallback: MATCH,
    });
    const { backend: b, switches } = connect([f.baseURL]);
    expect((await call(b)).attempts).toBe(3);
    expect(formats(f)).toEqual(['json_schema', 'json_schema', 'json_schema']);
    expect(switches).toEqual([]);
  });

  it('a 500 naming the schema that a second json_schema request does not repeat switches nothing', async () => {
    // Suspect (names json_schema), json_object probe accepted, but json_schema is then accepted: transient.
    const f = await fake({ script: [llamaSchemaFailed(500), MATCH, MATCH], fallback: MATCH });
    const { backend: b, switches } = connect([f.baseURL]);
    expect((await call(b)).attempts).toBe(1);
    await call(b);
    expect(formats(f)).toEqual(['json_schema', 'json_object', 'json_schema', 'json_schema']);
    expect(mode(b)).toBe('json_schema');
    expect(switches).toEqual([]);
  });

  it('a 400 that names nothing switches only if json_schema is refused again after the probe', async () => {
    const bad: FakeReply = {
      kind: 'status',
      status: 400,
      body: { error: { message: 'bad request', type: 'invalid_request_error' } },
    };
    const f = await fake({ script: [bad, MATCH, MATCH, bad, MATCH, bad], fallback: MATCH });
    const { backend: b, switches } = connect([f.baseURL]);
    await call(b); // bad → probe ok → json_schema ok: stays
    expect(mode(b)).toBe('json_schema');
    await call(b); // bad → probe ok → bad again: switched
    expect(mode(b)).toBe('json_object');
    expect(formats(f)).toEqual([
      'json_schema',
      'json_object',
      'json_schema',
      'json_schema',
      'json_object',
      'json_schema',
    ]);
    expect(switches).toHaveLength(1);
    expect(switches[0]?.evidence).toContain('refused twice');
  });
});

describe('a real schema refusal', () => {
  it("llama.cpp's 400 switches the replica that refuses it; the other replica stays on json_schema", async () => {
    const refusing = await fake({ rejectJsonSchema: 400, fallback: MATCH });
    const healthy = await fake({ fallback: MATCH });
    const { backend: b, switches } = connect([refusing.baseURL, healthy.baseURL], {
      replica_policy: 'round_robin',
    });
    for (let i = 0; i < 6; i++) expect((await call(b, `g${i}`)).attempts).toBe(1);
    const [first, second] = b.replicas?.() ?? [];
    expect(first?.responseFormat).toBe('json_object');
    expect(second?.responseFormat).toBe('json_schema');
    expect(first?.responseFormatSwitches?.get('json_object')).toBe(1);
    expect(second?.responseFormatSwitches?.size).toBe(0);
    // The refusing replica got json_schema once, then json_object; the healthy one only json_schema.
    expect(formats(refusing)).toEqual(['json_schema', 'json_object', 'json_object', 'json_object']);
    expect(formats(healthy)).toEqual(['json_schema', 'json_schema', 'json_schema']);
    // Told once, with its evidence.
    expect(switches).toHaveLength(1);
    expect(switches[0]).toMatchObject({
      replica: new URL(refusing.baseURL).host,
      from: 'json_schema',
      to: 'json_object',
      status: 400,
      reprobeInMs: 60_000,
    });
    expect(switches[0]?.evidence).toContain('JSON schema conversion failed');
  });

  it("llama.cpp's old 500 'response_format type must be one of…' switches after probe + repeated refusal", async () => {
    const f = await fake({
      fallback: (body) => (isSchema(body) ? llamaJsonSchemaUnsupported() : MATCH),
    });
    const { backend: b, switches } = connect([f.baseURL]);
    expect((await call(b)).attempts).toBe(1);
    await call(b);
    expect(formats(f)).toEqual(['json_schema', 'json_object', 'json_schema', 'json_object']);
    expect(switches).toHaveLength(1);
    expect(switches[0]).toMatchObject({ to: 'json_object', status: 500 });
  });

  it('is re-probed after schema_reprobe_ms and switched back once the replica accepts json_schema', async () => {
    let refuse = true;
    const f = await fake({
      fallback: (body) => (refuse && isSchema(body) ? llamaSchemaFailed(400) : MATCH),
    });
    const { backend: b, switches, clock } = connect([f.baseURL], { schema_reprobe_ms: 30_000 });
    await call(b);
    expect(mode(b)).toBe('json_object');
    clock.now += 29_000;
    await call(b); // within the fallback period: json_object
    clock.now += 2_000;
    // Re-probe while still refused: json_schema refused, answered as json_object in the same attempt.
    expect((await call(b)).attempts).toBe(1);
    expect(mode(b)).toBe('json_object');
    await call(b); // the next re-probe is 30 s away again
    expect(formats(f)).toEqual([
      'json_schema',
      'json_object',
      'json_object',
      'json_schema',
      'json_object',
      'json_object',
    ]);
    expect(switches.map((s) => s.to)).toEqual(['json_object']);

    refuse = false;
    clock.now += 30_000;
    await call(b); // re-probe accepted
    expect(mode(b)).toBe('json_schema');
    await call(b);
    expect(formats(f).slice(6)).toEqual(['json_schema', 'json_schema']);
    expect(switches.map((s) => s.to)).toEqual(['json_object', 'json_schema']);
    expect(switches[1]?.evidence).toContain('re-probe accepted');
    const counts = b.replicas?.()[0]?.responseFormatSwitches;
    expect(counts?.get('json_object')).toBe(1);
    expect(counts?.get('json_schema')).toBe(1);
  });

  it('a re-probe that meets a 500 is inconclusive: the next attempt re-probes', async () => {
    let schema: 'refuse' | 'fail' | 'accept' = 'refuse';
    const f = await fake({
      fallback: (body) => {
        if (!isSchema(body) || schema === 'accept') return MATCH;
        if (schema === 'refuse') return llamaSchemaFailed(400);
        schema = 'accept'; // one transient 500, then the replica accepts json_schema
        return FAIL_500;
      },
    });
    const { backend: b, switches, clock } = connect([f.baseURL], { schema_reprobe_ms: 1_000 });
    await call(b);
    expect(mode(b)).toBe('json_object');
    schema = 'fail';
    clock.now += 1_000;
    expect((await call(b)).attempts).toBe(2);
    expect(formats(f)).toEqual(['json_schema', 'json_object', 'json_schema', 'json_schema']);
    expect(mode(b)).toBe('json_schema');
    expect(switches.map((s) => s.to)).toEqual(['json_object', 'json_schema']);
  });

  it('a backend configured json_object never switches', async () => {
    const f = await fake({ fallback: MATCH });
    const { backend: b, clock } = connect([f.baseURL], { response_format: 'json_object' });
    await call(b);
    clock.now += 10 * 60_000;
    await call(b);
    expect(formats(f)).toEqual(['json_object', 'json_object']);
    expect(mode(b)).toBe('json_object');
  });
});

/** Each call's first attempt (by its routing key) fails with a 500 of its own; its retries succeed. */
function firstAttemptFails(onFailure: () => void = () => undefined, delayMs = 0) {
  const seen = new Set<string>();
  return (_body: FakeChatRequest, c: RecordedCall): FakeReply => {
    const key = String(c.headers['x-reward-routing-key']);
    if (seen.has(key)) return MATCH;
    seen.add(key);
    onFailure();
    const failed: FakeReply = {
      kind: 'status',
      status: 500,
      body: { error: { message: `worker for ${key} died` } },
    };
    return delayMs === 0 ? failed : { kind: 'slow', ms: delayMs, then: failed };
  };
}

describe('the retry path in a bad hour', () => {
  it('retries a burst of failures whose calls were counted longer ago than 10 s (budget window ≥ 2 × timeout)', async () => {
    // 12 calls counted at t0; their first attempts fail and, by the time the retries are asked, the clock
    // reads t0 + 25 s — as when hung calls time out after JUDGE_TIMEOUT_MS=30000. A 10 s window had dropped
    // the 12 deposits and allowed only its floor of 10 retries.
    const ref: { clock?: { now: number } } = {};
    let jumped = false;
    const f = await fake({
      fallback: firstAttemptFails(() => {
        // All 12 were counted at t0 (synchronously, before any reply); the retries are all asked at t0 + 25 s.
        if (ref.clock !== undefined && !jumped) ref.clock.now += 25_000;
        jumped = true;
      }),
    });
    const { backend: b, clock } = connect(
      [f.baseURL],
      { timeout_ms: 30_000 },
      { breaker: { failureThreshold: 1000, minSamples: 1000 } },
    );
    ref.clock = clock;
    const replies = await Promise.all(Array.from({ length: 12 }, (_, i) => call(b, `g${i}`)));
    expect(replies.map((r) => r.attempts)).toEqual(Array.from({ length: 12 }, () => 2));
  });

  it('waits for an open circuit to half-open instead of spending every retry against it', async () => {
    // 6 calls fail together: 5 consecutive failures open the lone replica's circuit (for 300 ms here).
    // Their retries used to meet "every replica has an open circuit" within a millisecond, 4 times.
    // The first attempts are answered together (after 100 ms); on a loaded machine their replies still reach
    // the client in separate turns, and a retry sent before the 5th failure succeeds and closes the circuit
    // again. So the retries' backoff ends once the circuit has opened (bounded at 2 s): every retry then
    // meets the open circuit, as in a burst whose failures all land before any backoff ends.
    const f = await fake({ fallback: firstAttemptFails(undefined, 100) });
    const ref: { b?: Backend } = {};
    const untilOpened = async (_ms: number, signal?: AbortSignal): Promise<void> => {
      const until = performance.now() + 2_000;
      while ((ref.b?.replicas?.()[0]?.circuitOpens ?? 0) < 1 && performance.now() < until) {
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      signal?.throwIfAborted();
    };
    const { backend: b } = connect([f.baseURL], {}, { breaker: { openMs: 300 }, sleep: untilOpened });
    ref.b = b;
    const started = performance.now();
    const replies = await Promise.all(Array.from({ length: 6 }, (_, i) => call(b, `g${i}`)));
    expect(replies.every((r) => r.attempts === 2)).toBe(true);
    expect(b.replicas?.()[0]?.circuitOpens).toBe(1);
    expect(performance.now() - started).toBeGreaterThanOrEqual(100 + 250);
  });

  it('still fails at once when the circuit stays open past the deadline', async () => {
    const f = await fake({ fallback: FAIL_500 });
    const { backend: b } = connect(
      [f.baseURL],
      { max_retries: 0 },
      { breaker: { failureThreshold: 1, openMs: 60_000 } },
    );
    await call(b).catch(() => undefined);
    const started = performance.now();
    const error = await call(b).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(RewardError);
    expect((error as RewardError).message).toContain('open circuit');
    expect(performance.now() - started).toBeLessThan(1_000);
  });
});

describe('per backend of a routing file', () => {
  it('a backend whose server refuses the schema switches; another backend stays on json_schema', async () => {
    const refusing = await fake({ rejectJsonSchema: 400, fallback: MATCH });
    const healthy = await fake({ fallback: MATCH });
    const router = createRouter({
      default: 'offline',
      offline: createOfflineBackend,
      file: loadRoutingFile({
        backends: {
          small: { base_url: refusing.baseURL, model: 'small-7b' },
          big: { base_url: healthy.baseURL, model: 'big-70b' },
        },
        default: 'small',
        roles: { evaluator: { backend: 'big' } },
      }),
    });
    try {
      const small = router.route({ id: 'a1', role: 'analyst' }).backend;
      const big = router.route({ id: 'e', role: 'evaluator' }).backend;
      await call(small);
      await call(big);
      await call(small);
      expect(small.replicas?.()[0]).toMatchObject({ backend: 'small', responseFormat: 'json_object' });
      expect(big.replicas?.()[0]).toMatchObject({ backend: 'big', responseFormat: 'json_schema' });
      expect(formats(refusing)).toEqual(['json_schema', 'json_object', 'json_object']);
      expect(formats(healthy)).toEqual(['json_schema']);
    } finally {
      await Promise.all(router.backends().map(async (b) => b.close?.()));
    }
  });
});
