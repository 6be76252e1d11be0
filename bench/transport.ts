/**
 * Client CPU per chat-completions call, by transport, against the fake backend (separate process).
 *
 *   npx tsx bench/transport.ts [--calls 2000] [--warmup 1000] [--concurrency 64] [--latency-ms 0] [--rounds 3]
 *
 * Variants: (a) openai SDK on Node's global fetch, (b) SDK on undici's fetch with an undici Agent dispatcher,
 * (c) raw undici Pool.request, (d) this project's `createOpenAICompatibleBackend` (limiter + retry + transport).
 * Each variant runs in its own child process (fresh JIT and heap); CPU is `process.cpuUsage()` user+system
 * of that process over the measured calls, divided by the number of calls.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import OpenAI from 'openai';
import type {
  ChatCompletion,
  ChatCompletionCreateParamsNonStreaming,
} from 'openai/resources/chat/completions';
import { Agent, fetch as undiciFetch, Pool } from 'undici';
import { createOpenAICompatibleBackend } from '../src/judge/backends/openai.js';
import { toChatParams } from '../src/judge/backends/openai-wire.js';
import { BackendSettings } from '../src/settings/routing-file.js';
import type { LlmRequest } from '../src/judge/types.js';

const VARIANTS = ['sdk-global-fetch', 'sdk-undici-agent', 'raw-undici-pool', 'backend'] as const;
type Variant = (typeof VARIANTS)[number];

const { values } = parseArgs({
  options: {
    calls: { type: 'string', default: '2000' },
    warmup: { type: 'string', default: '1000' },
    concurrency: { type: 'string', default: '64' },
    'latency-ms': { type: 'string', default: '0' },
    rounds: { type: 'string', default: '3' },
    variant: { type: 'string' },
    base: { type: 'string' },
  },
  strict: true,
});
const calls = Number(values.calls);
const warmup = Number(values.warmup);
const concurrency = Number(values.concurrency);
const MODEL = 'bench-model';

const SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['reasoning', 'gt_components', 'candidate_components', 'stance', 'confidence'],
  properties: {
    reasoning: { type: 'string' },
    gt_components: { type: 'array', items: { type: 'string' } },
    candidate_components: { type: 'array', items: { type: 'string' } },
    stance: { type: 'string', enum: ['match', 'no_match'] },
    confidence: { type: 'number', minimum: 0, maximum: 1 },
  },
};
const SYSTEM = `You are the Analyst of a review committee. ${'Compare the core method only. '.repeat(40)}`;
const USER = `<<candidate nonce=abc>>${JSON.stringify('An idea about sparse attention routing. '.repeat(50))}<</candidate>>`;

/** The request body the backend variant sends, built by the server's own wire mapping. */
const chatParams = (i: number): ChatCompletionCreateParamsNonStreaming =>
  toChatParams(llmRequest(i), 'json_schema');

function llmRequest(i: number): LlmRequest {
  return {
    role: 'analyst',
    nodeId: 'a1',
    model: MODEL,
    messages: [
      { role: 'system', content: SYSTEM },
      { role: 'user', content: USER },
    ],
    schemaName: 'analyst',
    jsonSchema: SCHEMA,
    temperature: 0.7,
    seed: i,
    maxTokens: 1024,
    context: {
      question: '',
      candidate: '',
      groundTruth: '',
      nonce: 'abc',
      round: 1,
      rounds: 1,
      node: { id: 'a1' },
      visible: [],
    },
  };
}

function makeCaller(
  variant: Variant,
  base: string,
): { call: (i: number) => Promise<string>; close: () => Promise<void> } {
  switch (variant) {
    case 'sdk-global-fetch': {
      const client = new OpenAI({ baseURL: base, apiKey: 'EMPTY', timeout: 30_000, maxRetries: 0 });
      return {
        call: async (i) =>
          (await client.chat.completions.create(chatParams(i))).choices[0]?.message.content ?? '',
        close: async () => {},
      };
    }
    case 'sdk-undici-agent': {
      const dispatcher = new Agent({ connections: concurrency, keepAliveTimeout: 30_000 });
      const client = new OpenAI({
        baseURL: base,
        apiKey: 'EMPTY',
        timeout: 30_000,
        maxRetries: 0,
        fetch: undiciFetch as unknown as typeof fetch,
        // undici 7's Agent vs the SDK's RequestInit typing (undici-types 6) differ only in optional fields.
        fetchOptions: { dispatcher: dispatcher as never },
      });
      return {
        call: async (i) =>
          (await client.chat.completions.create(chatParams(i))).choices[0]?.message.content ?? '',
        close: () => dispatcher.close(),
      };
    }
    case 'raw-undici-pool': {
      const url = new URL(base);
      const pool = new Pool(url.origin, { connections: concurrency, keepAliveTimeout: 30_000 });
      const path = `${url.pathname.replace(/\/$/, '')}/chat/completions`;
      const headers = { 'content-type': 'application/json', authorization: 'Bearer EMPTY' };
      return {
        call: async (i) => {
          const res = await pool.request({
            method: 'POST',
            path,
            headers,
            body: JSON.stringify(chatParams(i)),
          });
          const body = (await res.body.json()) as ChatCompletion;
          if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
          return body.choices[0]?.message.content ?? '';
        },
        close: () => pool.close(),
      };
    }
    case 'backend': {
      const backend = createOpenAICompatibleBackend(
        BackendSettings.parse({ base_url: base, model: MODEL, max_inflight: concurrency }),
      );
      const signal = new AbortController().signal;
      return {
        call: async (i) =>
          (await backend.complete(llmRequest(i), { signal, deadline: Date.now() + 60_000 })).text,
        close: () => backend.close?.() ?? Promise.resolve(),
      };
    }
  }
}

async function drive(call: (i: number) => Promise<string>, n: number): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < n) {
      const i = next++;
      const text = await call(i);
      if (text.length === 0) throw new Error('empty reply');
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, n) }, worker));
}

/** Child: measures one variant and prints one JSON line. */
async function runVariant(variant: Variant, base: string): Promise<void> {
  const caller = makeCaller(variant, base);
  await drive(caller.call, warmup); // JIT, connections
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await drive(caller.call, calls);
  const wallMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  await caller.close();
  const cpuMsPerCall = (cpu.user + cpu.system) / 1000 / calls;
  process.stdout.write(
    `${JSON.stringify({ variant, cpuMsPerCall, callsPerSecond: (calls / wallMs) * 1000 })}\n`,
  );
}

async function runChild(
  variant: Variant,
  base: string,
): Promise<{ cpuMsPerCall: number; callsPerSecond: number }> {
  const self = fileURLToPath(import.meta.url);
  const child = spawn(
    process.execPath,
    [
      ...process.execArgv,
      self,
      '--variant',
      variant,
      '--base',
      base,
      '--calls',
      String(calls),
      '--warmup',
      String(warmup),
      '--concurrency',
      String(concurrency),
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let line = '';
  child.stdout.on('data', (chunk: Buffer) => (line += chunk.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  if (code !== 0) throw new Error(`${variant}: child exited with ${code}`);
  return JSON.parse(line.trim()) as { cpuMsPerCall: number; callsPerSecond: number };
}

async function main(): Promise<void> {
  if (values.variant !== undefined) {
    const variant = VARIANTS.find((v) => v === values.variant);
    if (variant === undefined || values.base === undefined)
      throw new Error('--variant needs a known name and --base');
    await runVariant(variant, values.base);
    return;
  }
  const fakePath = fileURLToPath(new URL('../test/fakes/openai-server.ts', import.meta.url));
  const fake = spawn(
    process.execPath,
    [...process.execArgv, fakePath, '--port', '0', '--latency-ms', values['latency-ms']],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  try {
    const rl = createInterface({ input: fake.stdout });
    const [first] = (await once(rl, 'line')) as [string];
    const base = first.replace(/^LISTENING /, '');
    console.log(
      `fake at ${base}; ${calls} calls after ${warmup} warm-up, concurrency ${concurrency}, latency ${values['latency-ms']} ms`,
    );
    const rounds = Number(values.rounds);
    const results = new Map<Variant, number[]>();
    const rates = new Map<Variant, number[]>();
    for (let r = 0; r < rounds; r++) {
      for (const variant of VARIANTS) {
        const res = await runChild(variant, base);
        results.set(variant, [...(results.get(variant) ?? []), res.cpuMsPerCall]);
        rates.set(variant, [...(rates.get(variant) ?? []), res.callsPerSecond]);
      }
    }
    const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
    console.log('variant             cpu ms/call (median; all rounds)      calls/s (median)');
    for (const variant of VARIANTS) {
      const xs = results.get(variant) ?? [];
      console.log(
        `${variant.padEnd(20)}${median(xs).toFixed(3).padStart(6)}  (${xs.map((x) => x.toFixed(3)).join(', ')})`.padEnd(
          58,
        ) +
          median(rates.get(variant) ?? [])
            .toFixed(0)
            .padStart(8),
      );
    }
  } finally {
    fake.kill('SIGTERM');
    await once(fake, 'exit');
  }
}

await main();
