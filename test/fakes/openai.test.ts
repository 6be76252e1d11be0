import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { ROLES } from '../../src/roles/index.js';
import {
  createBlockCache,
  promptText,
  requestRole,
  startFakeOpenAI,
  universalReply,
  type FakeChatRequest,
  type FakeOpenAI,
} from './openai.js';

let fake: FakeOpenAI | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

const body = (extra: Partial<FakeChatRequest> = {}): FakeChatRequest => ({
  model: 'm-1',
  messages: [
    { role: 'system', content: 'You are the Critic.' },
    { role: 'user', content: 'x'.repeat(400) },
  ],
  ...extra,
});

/** The fields these tests read; `choices` as a 1-tuple so index 0 needs no guard. */
interface ChatJson {
  id: string;
  object: string;
  model: string;
  choices: [{ message: { content: string }; finish_reason: string }];
  usage: {
    prompt_tokens: number;
    completion_tokens: number;
    total_tokens: number;
    prompt_tokens_details?: { cached_tokens: number };
  };
  error: { message: string };
}

async function chat(base: string, payload: unknown = body()) {
  const res = await request(`${base}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(payload),
  });
  return {
    status: res.statusCode,
    headers: res.headers,
    json: (await res.body.json()) as ChatJson,
  };
}

describe('startFakeOpenAI', () => {
  it('plays the script in order, then answers 500 by default', async () => {
    fake = await startFakeOpenAI({
      script: [
        { kind: 'json', body: { stance: 'match' } },
        { kind: 'text', text: 'not json' },
      ],
    });
    const first = await chat(fake.baseURL);
    const second = await chat(fake.baseURL);
    const third = await chat(fake.baseURL);
    expect(first.status).toBe(200);
    expect(JSON.parse(first.json.choices[0].message.content)).toEqual({ stance: 'match' });
    expect(second.json.choices[0].message.content).toBe('not json');
    expect(third.status).toBe(500);
    expect(fake.calls.map((c) => c.status)).toEqual([200, 200, 500]);
  });

  it('answers like OpenAI: id, echoed model, finish_reason and usage', async () => {
    fake = await startFakeOpenAI({ fallback: { kind: 'json', body: universalReply('match') } });
    const { json } = await chat(fake.baseURL);
    expect(json.id).toMatch(/^chatcmpl-/);
    expect(json.object).toBe('chat.completion');
    expect(json.model).toBe('m-1');
    expect(json.choices[0].finish_reason).toBe('stop');
    // prompt: 19 + 400 chars → ceil(419 / 4)
    expect(json.usage.prompt_tokens).toBe(105);
    expect(json.usage.completion_tokens).toBeGreaterThan(0);
    expect(json.usage.total_tokens).toBe(json.usage.prompt_tokens + json.usage.completion_tokens);
  });

  it('records the parsed request body and the role', async () => {
    fake = await startFakeOpenAI({ fallback: { kind: 'json', body: {} } });
    await chat(
      fake.baseURL,
      body({
        seed: 7,
        temperature: 0.3,
        response_format: { type: 'json_schema', json_schema: { name: 'analyst', strict: true, schema: {} } },
      }),
    );
    const [call] = fake.calls;
    expect(call?.body.seed).toBe(7);
    expect(call?.body.temperature).toBe(0.3);
    expect(call?.role).toBe('analyst');
    expect(call?.outcome).toBe('replied');
    expect(call?.finishedAt).toBeGreaterThanOrEqual(call!.arrivedAt);
  });

  it('lets a fallback function answer per role', async () => {
    fake = await startFakeOpenAI({
      fallback: (req) => ({ kind: 'json', body: { who: requestRole(req) ?? 'unknown' } }),
    });
    const critic = await chat(fake.baseURL, body({ response_format: { type: 'json_object' } }));
    expect(JSON.parse(critic.json.choices[0].message.content)).toEqual({ who: 'critic' });
  });

  it('sends a status with Retry-After and an OpenAI-style error body', async () => {
    fake = await startFakeOpenAI({ script: [{ kind: 'status', status: 429, retryAfter: '3' }] });
    const res = await chat(fake.baseURL);
    expect(res.status).toBe(429);
    expect(res.headers['retry-after']).toBe('3');
    expect(res.json.error.message).toContain('429');
  });

  it('resets the socket on reset', async () => {
    fake = await startFakeOpenAI({ script: [{ kind: 'reset' }] });
    await expect(chat(fake.baseURL)).rejects.toThrow();
    expect(fake.calls[0]?.outcome).toBe('reset');
  });

  it('closes promptly with a hung call open', async () => {
    fake = await startFakeOpenAI({ script: [{ kind: 'hang' }] });
    const pending = chat(fake.baseURL);
    await fake.waitForCalls(1);
    expect(fake.inflight()).toBe(1);
    await fake.close();
    await expect(pending).rejects.toThrow();
    expect(fake.calls[0]?.outcome).toBe('server_closed');
    fake = undefined;
  });

  it('applies slow and latency delays and tracks peak concurrency', async () => {
    fake = await startFakeOpenAI({
      latencyMs: 30,
      script: [{ kind: 'slow', ms: 30, then: { kind: 'json', body: {} } }],
      fallback: { kind: 'json', body: {} },
    });
    const t0 = performance.now();
    await Promise.all([chat(fake.baseURL), chat(fake.baseURL), chat(fake.baseURL)]);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(55);
    expect(fake.maxInflight).toBe(3);
    expect(fake.inflight()).toBe(0);
    const slowest = fake.calls.find((c) => c.index === 0)!;
    expect(slowest.finishedAt! - slowest.arrivedAt).toBeGreaterThanOrEqual(55);
  });

  it('serves at most `slots` calls at once and queues the rest FIFO, like an inference server', async () => {
    fake = await startFakeOpenAI({ latencyMs: 60, slots: 2, fallback: { kind: 'json', body: {} } });
    const t0 = performance.now();
    await Promise.all(Array.from({ length: 5 }, () => chat(fake!.baseURL)));
    // 5 calls through 2 slots of 60 ms: three waves.
    expect(performance.now() - t0).toBeGreaterThanOrEqual(170);
    expect(fake.maxInflight).toBe(5);
    expect(fake.maxServing).toBe(2);
    expect(fake.servedMs).toBeGreaterThanOrEqual(5 * 58);
    expect(fake.servedMs).toBeLessThan(5 * 60 * 2.5);
  });

  it('serves /v1/models and 404s unknown paths', async () => {
    fake = await startFakeOpenAI();
    const models = await request(`${fake.baseURL}/models`);
    expect(models.statusCode).toBe(200);
    expect(((await models.body.json()) as { data: Array<{ id: string }> }).data[0]?.id).toBeTypeOf('string');
    const missing = await request(`${fake.baseURL}/embeddings`, { method: 'POST', body: '{}' });
    await missing.body.dump();
    expect(missing.statusCode).toBe(404);
    expect(fake.calls).toHaveLength(0);
  });

  it('counts but does not record calls with record: false', async () => {
    fake = await startFakeOpenAI({ record: false, fallback: { kind: 'json', body: {} } });
    await chat(fake.baseURL);
    expect(fake.callCount).toBe(1);
    expect(fake.calls).toHaveLength(0);
  });

  it('setScript replaces the script and the fallback', async () => {
    fake = await startFakeOpenAI({ script: [{ kind: 'status', status: 503 }] });
    fake.setScript([{ kind: 'text', text: 'a' }], { kind: 'text', text: 'b' });
    const a = await chat(fake.baseURL);
    const b = await chat(fake.baseURL);
    expect([a.json.choices[0].message.content, b.json.choices[0].message.content]).toEqual(['a', 'b']);
  });
});

describe('requestRole', () => {
  it('prefers the json_schema name, else the first role named outside data fences', () => {
    expect(
      requestRole(body({ response_format: { type: 'json_schema', json_schema: { name: 'evaluator' } } })),
    ).toBe('evaluator');
    expect(
      requestRole(
        body({ messages: [{ role: 'system', content: 'You are the Moderator. Not the analyst.' }] }),
      ),
    ).toBe('moderator');
    expect(requestRole(body({ messages: [{ role: 'user', content: 'x' }] }))).toBeUndefined();
    // The role instruction in the user message wins over the shared system text; fenced data never counts.
    const user = 'GT:\n<<<GROUND_TRUTH>>>\n"the critic"\n<<<END_GROUND_TRUTH>>>\nYou are an Analyst.';
    expect(
      requestRole(
        body({
          messages: [
            { role: 'system', content: 'Judge only methodology.' },
            { role: 'user', content: user },
          ],
        }),
      ),
    ).toBe('analyst');
    const fencedOnly = '<<<CANDIDATE_n0nce>>>\n"moderator"\n<<<END_CANDIDATE_n0nce>>>';
    expect(
      requestRole(
        body({
          messages: [
            { role: 'system', content: 'You are the Evaluator.' },
            { role: 'user', content: fencedOnly },
          ],
        }),
      ),
    ).toBe('evaluator');
  });
});

describe('universalReply', () => {
  it('validates against every LLM role output schema', () => {
    const llmRoles = [...ROLES.values()].filter((role) => role.kind === 'llm');
    expect(llmRoles.length).toBeGreaterThanOrEqual(4);
    for (const role of llmRoles) {
      for (const stance of ['match', 'no_match'] as const) {
        const parsed = role.output.safeParse(universalReply(stance));
        expect(parsed.success, `${role.name}: ${parsed.error?.message}`).toBe(true);
        if (parsed.success) expect([stance, null]).toContain(role.stance(parsed.data));
      }
    }
  });

  it('carries every role field with the stance as verdict', () => {
    expect(universalReply('no_match', 0.7)).toMatchObject({
      stance: 'no_match',
      verdict: 'no_match',
      confidence: 0.7,
      checklist: [],
      objections: [],
      gt_components: [],
      candidate_components: [],
    });
  });
});

describe('block cache (vLLM-like prefix caching)', () => {
  it('reuses only whole leading blocks whose entire prefix was seen', () => {
    const cache = createBlockCache({ blockChars: 4 });
    expect(cache.lookup('aaaabbbbcc')).toBe(0);
    // Same first two blocks; the partial third block is never cached.
    expect(cache.lookup('aaaabbbbdd')).toBe(8);
    // A different first block invalidates every later block, even identical ones.
    expect(cache.lookup('xaaabbbbcc')).toBe(0);
    expect(cache.lookup('aaaaZbbbcc')).toBe(4);
    // A full hit still computes one character (vLLM recomputes the last token).
    expect(cache.lookup('aaaabbbb')).toBe(7);
  });

  it('evicts the least recently used block beyond its capacity', () => {
    const cache = createBlockCache({ blockChars: 2, capacityBlocks: 2 });
    cache.lookup('aa!'); // [aa]
    cache.lookup('bb!'); // [aa, bb]
    cache.lookup('aa!'); // hit refreshes aa: [bb, aa]
    cache.lookup('cc!'); // evicts bb: [aa, cc]
    expect(cache.size).toBe(2);
    expect(cache.lookup('aa!')).toBe(2);
    expect(cache.lookup('bb!')).toBe(0);
  });

  it('renders messages like a chat template, so an earlier change moves every later byte', () => {
    const a = promptText(body());
    expect(a.startsWith('<|im_start|>system\nYou are the Critic.<|im_end|>\n<|im_start|>user\n')).toBe(true);
    expect(a.length).toBeGreaterThan(400);
  });

  it('reports cached_tokens in usage and counts prefill characters per fake', async () => {
    fake = await startFakeOpenAI({ fallback: { kind: 'json', body: { ok: true } }, blockCache: true });
    const first = await chat(fake.baseURL);
    expect(first.json.usage.prompt_tokens_details).toEqual({ cached_tokens: 0 });
    const second = await chat(fake.baseURL);
    const text = promptText(body());
    const cachedChars = Math.floor(text.length / 64) * 64;
    expect(second.json.usage.prompt_tokens_details).toEqual({ cached_tokens: Math.floor(cachedChars / 4) });
    expect(fake.prefill()).toEqual({
      calls: 2,
      promptChars: 2 * text.length,
      cachedChars,
      uncachedChars: 2 * text.length - cachedChars,
    });
    // Another fake (another replica) has its own, empty cache.
    const other = await startFakeOpenAI({ fallback: { kind: 'json', body: { ok: true } }, blockCache: true });
    try {
      expect((await chat(other.baseURL)).json.usage.prompt_tokens_details).toEqual({ cached_tokens: 0 });
    } finally {
      await other.close();
    }
    fake.clearBlockCache();
    expect((await chat(fake.baseURL)).json.usage.prompt_tokens_details).toEqual({ cached_tokens: 0 });
  });

  it('with registerOn reply, a prefix being computed does not serve a request arriving meanwhile', async () => {
    fake = await startFakeOpenAI({
      fallback: { kind: 'json', body: { ok: true } },
      latencyMs: 50,
      blockCache: { registerOn: 'reply' },
    });
    const [a, b] = await Promise.all([chat(fake.baseURL), chat(fake.baseURL)]);
    expect(a.json.usage.prompt_tokens_details).toEqual({ cached_tokens: 0 });
    expect(b.json.usage.prompt_tokens_details).toEqual({ cached_tokens: 0 });
    const c = await chat(fake.baseURL);
    expect(c.json.usage.prompt_tokens_details?.cached_tokens).toBeGreaterThan(0);
  });

  it('omits prompt_tokens_details without a block cache (a backend that does not report it)', async () => {
    fake = await startFakeOpenAI({ fallback: { kind: 'json', body: { ok: true } } });
    const reply = await chat(fake.baseURL);
    expect(reply.json.usage.prompt_tokens_details).toBeUndefined();
    expect(fake.prefill()).toEqual({ calls: 0, promptChars: 0, cachedChars: 0, uncachedChars: 0 });
  });
});
