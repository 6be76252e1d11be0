/**
 * Requests in each dialect (issue 37 items 2–4): OpenAI's reasoning models take `max_completion_tokens` and
 * only the default temperature / top_p, learned from the 400's `param` (the model name as first guess);
 * `reasoning_effort` and the backend's `extra_body` reach every request.
 */
import { afterEach, describe, expect, it } from 'vitest';

import { createOpenAICompatibleBackend } from '../../../src/judge/backends/openai.js';
import {
  createBackendDialect,
  guessDialect,
  isOpenAIReasoningModel,
  type RequestDialectSwitch,
} from '../../../src/judge/backends/request-dialect.js';
import { readWireError } from '../../../src/judge/backends/openai-wire.js';
import type { Backend, LlmRequest } from '../../../src/judge/types.js';
import { BackendSettings, type BackendSettingsInput } from '../../../src/settings/routing-file.js';
import { startFakeOpenAI, universalReply, type FakeOpenAI } from '../../fakes/openai.js';
import { openaiReasoningRefusal } from '../../fakes/reasoning-model.js';

const request = (over: Partial<LlmRequest> = {}): LlmRequest => ({
  role: 'analyst',
  nodeId: 'a1',
  model: 'my-deployment',
  messages: [
    { role: 'system', content: 'You are the Analyst. Answer in JSON.' },
    { role: 'user', content: 'Compare these ideas.' },
  ],
  schemaName: 'analyst',
  jsonSchema: { type: 'object' },
  temperature: 0,
  maxTokens: 900,
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

let fake: FakeOpenAI | undefined;
let backend: Backend | undefined;
afterEach(async () => {
  await backend?.close?.();
  await fake?.close();
  backend = undefined;
  fake = undefined;
});

async function setup(
  model: string,
  over: Partial<BackendSettingsInput> = {},
  reasoningModels = /./,
): Promise<{ f: FakeOpenAI; b: Backend; switches: RequestDialectSwitch[] }> {
  fake = await startFakeOpenAI({
    openaiReasoningModels: reasoningModels,
    fallback: { kind: 'json', body: universalReply('match') },
  });
  const switches: RequestDialectSwitch[] = [];
  backend = createOpenAICompatibleBackend(
    BackendSettings.parse({ base_url: fake.baseURL, model, max_retries: 0, ...over }),
    { onRequestDialectSwitch: (e) => switches.push(e) },
  );
  return { f: fake, b: backend, switches };
}

const call = (b: Backend, over: Partial<LlmRequest> = {}) =>
  b.complete(request(over), { signal: new AbortController().signal, deadline: Date.now() + 5_000 });

describe('model-name guess', () => {
  it('knows OpenAI reasoning models by name, behind a provider prefix too, and nothing else', () => {
    for (const m of [
      'gpt-5',
      'gpt-5-mini',
      'gpt-5.1',
      'o1',
      'o1-preview',
      'o3-mini',
      'o4-mini',
      'openai/gpt-5-nano',
      'azure/o3',
    ])
      expect(isOpenAIReasoningModel(m), m).toBe(true);
    for (const m of [
      'gpt-4o',
      'gpt-4.1-mini',
      'gpt-oss-120b',
      'openai/gpt-oss-20b',
      'Qwen/Qwen3-32B',
      'olmo-2',
      'deepseek-r1',
    ])
      expect(isOpenAIReasoningModel(m), m).toBe(false);
  });

  it('gpt-5-mini pays no 400: max_completion_tokens from the first call, no temperature', async () => {
    const { f, b, switches } = await setup('gpt-5-mini');
    await call(b, { model: 'gpt-5-mini' });
    expect(f.calls).toHaveLength(1);
    expect(f.calls[0]?.body).toMatchObject({ max_completion_tokens: 900 });
    expect(f.calls[0]?.body).not.toHaveProperty('max_tokens');
    expect(f.calls[0]?.body).not.toHaveProperty('temperature');
    expect(switches).toEqual([]);
  });
});

describe('learned from the 400', () => {
  it('an Azure deployment under any name pays one 400 per dialect switch, then none per call', async () => {
    const { f, b, switches } = await setup('my-deployment');
    const first = await call(b);
    expect(first.attempts).toBe(1);
    // max_tokens refused, then temperature refused, then answered: 3 exchanges, one attempt.
    expect(f.calls.map((c) => c.status)).toEqual([400, 400, 200]);
    expect(switches.map((s) => s.to)).toEqual([
      { tokensParam: 'max_completion_tokens', defaultSamplingOnly: false },
      { tokensParam: 'max_completion_tokens', defaultSamplingOnly: true },
    ]);
    for (let i = 0; i < 5; i++) await call(b);
    expect(f.calls.slice(3).map((c) => c.status)).toEqual([200, 200, 200, 200, 200]);
    expect(f.calls.at(-1)?.body).toMatchObject({ max_completion_tokens: 900 });
  });

  it('concurrent first calls each retry in place; the backend switches once per field', async () => {
    const { f, b, switches } = await setup('deployment-x');
    const replies = await Promise.all(Array.from({ length: 8 }, () => call(b)));
    expect(replies.every((r) => r.attempts === 1)).toBe(true);
    expect(switches).toHaveLength(2);
    expect(f.calls.filter((c) => c.status === 200)).toHaveLength(8);
  });

  it('a server that is not OpenAI keeps max_tokens and temperature (no 400, no switch)', async () => {
    const { f, b, switches } = await setup('Qwen/Qwen3-32B', {}, /^never$/);
    await call(b, { model: 'Qwen/Qwen3-32B' });
    expect(f.calls[0]?.body).toMatchObject({ max_tokens: 900, temperature: 0 });
    expect(switches).toEqual([]);
  });

  it('another 400 is not a dialect switch: it fails the call as before', async () => {
    fake = await startFakeOpenAI({ fallback: { kind: 'status', status: 400 } });
    const switches: RequestDialectSwitch[] = [];
    backend = createOpenAICompatibleBackend(
      BackendSettings.parse({ base_url: fake.baseURL, model: 'm', max_retries: 0 }),
      { onRequestDialectSwitch: (e) => switches.push(e) },
    );
    await expect(call(backend)).rejects.toMatchObject({ code: 'RW_JUDGE_UNAVAILABLE' });
    // (The format negotiation probes json_object on a 400 that names nothing: that is its own business.)
    expect(fake.calls.every((c) => c.body.max_tokens === 900)).toBe(true);
    expect(switches).toEqual([]);
  });

  it('reads the refusal without param by OpenAI’s wording, and switches back on a refused max_completion_tokens', () => {
    const d = createBackendDialect({ backend: 'b', model: 'x' });
    const body = openaiReasoningRefusal({ max_tokens: 10 });
    const text = JSON.stringify(body?.kind === 'status' ? body.body : {});
    const noParam = { ...readWireError(text), param: undefined };
    expect(d.learn(400, noParam, d.current())).toBe(true);
    expect(d.current().tokensParam).toBe('max_completion_tokens');
    const back = readWireError(
      JSON.stringify({
        error: { message: 'unknown field', param: 'max_completion_tokens', type: 'invalid_request_error' },
      }),
    );
    expect(d.learn(400, back, d.current())).toBe(true);
    expect(d.current().tokensParam).toBe('max_tokens');
    expect(guessDialect('o3')).toEqual({ tokensParam: 'max_completion_tokens', defaultSamplingOnly: true });
  });
});

describe('reasoning_effort and extra_body reach every request', () => {
  it('the backend effort goes where the request has none; the request’s own wins', async () => {
    const { f, b } = await setup('m', { reasoning_effort: 'low' }, /^never$/);
    await call(b);
    await call(b, { reasoningEffort: 'high' });
    expect(f.calls.map((c) => c.body['reasoning_effort'])).toEqual(['low', 'high']);
  });

  it('extra_body is merged into every request, under the request’s own fields', async () => {
    const extra = { chat_template_kwargs: { enable_thinking: false }, top_k: 20, min_p: 0 };
    const { f, b } = await setup('Qwen/Qwen3-32B', { extra_body: extra }, /^never$/);
    for (let i = 0; i < 3; i++) await call(b, { model: 'Qwen/Qwen3-32B' });
    for (const c of f.calls)
      expect(c.body).toMatchObject({ ...extra, max_tokens: 900, model: 'Qwen/Qwen3-32B' });
  });

  it('a key the server owns is refused in extra_body, naming the key and its owner', () => {
    for (const key of [
      'model',
      'messages',
      'response_format',
      'stream',
      'n',
      'tools',
      'max_tokens',
      'temperature',
    ]) {
      const parsed = BackendSettings.safeParse({
        base_url: 'http://127.0.0.1:1/v1',
        model: 'm',
        extra_body: { [key]: 1 },
      });
      expect(parsed.success, key).toBe(false);
      expect(parsed.error?.issues[0]?.message, key).toContain(`"${key}" is set by the server`);
    }
  });
});
