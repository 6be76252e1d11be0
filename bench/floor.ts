/**
 * The floor client (a separate process): the least a program can do to get an analysts-2 judgment from
 * the backend — the same 3 chat-completions calls per judgment (2 Analysts concurrently, then the
 * Evaluator), the same prompts and request bodies as the server, sent directly over a keep-alive undici
 * Pool. No HTTP server, no validation, no cache, no metrics. Protocol: bench/child.ts; prints
 * `RESULT <FloorResult>`.
 *
 * `--group-size g --concurrency c`: c workers, each runs g judgments at once and waits for all of them
 * (g = 1: a sliding window of c judgments; g = 16, c = 1: one GRPO group at a time).
 */
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { readCompletion, toChatParams } from '../src/judge/backends/openai-wire.js';
import { getRole } from '../src/roles/index.js';
import type { Role, RoleContext, VisibleMessage } from '../src/roles/types.js';
import { readyThenGo, send } from './child.js';
import { DEFAULT_DATASET, loadCorpus, tripleAt, type Triple } from './data.js';
import { latencySummary, type LatencySummary } from './stats.js';

export interface FloorResult {
  judgments: number;
  calls: number;
  failedCalls: number;
  firstError?: string;
  wallMs: number;
  /** Judgment latency, ms. */
  latency: LatencySummary;
  /** Group latency (all judgments of one worker's batch), ms. */
  groupLatency: LatencySummary;
  cpuMs: number;
  timedOut: boolean;
}

function mustRole(name: string): Role {
  const role = getRole(name);
  if (role === undefined) throw new Error(`role ${name} missing`);
  return role;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      base: { type: 'string' },
      model: { type: 'string', default: 'bench-model' },
      start: { type: 'string', default: '0' },
      count: { type: 'string', default: '1000' },
      concurrency: { type: 'string', default: '256' },
      'group-size': { type: 'string', default: '1' },
      'max-seconds': { type: 'string', default: '60' },
      warmup: { type: 'string', default: '0' },
      dataset: { type: 'string', default: DEFAULT_DATASET },
    },
    strict: true,
  });
  if (values.base === undefined) throw new Error('--base is required');
  const start = Number(values.start);
  const count = Number(values.count);
  const concurrency = Number(values.concurrency);
  const groupSize = Number(values['group-size']);
  const maxMs = Number(values['max-seconds']) * 1000;
  const model = values.model;
  const corpus = loadCorpus(values.dataset);
  const analyst = mustRole('analyst');
  const evaluator = mustRole('evaluator');

  const base = new URL(values.base);
  if (base.hostname !== '127.0.0.1' && base.hostname !== 'localhost') throw new Error('loopback only');
  const path = `${base.pathname.replace(/\/+$/, '')}/chat/completions`;
  const pool = new Pool(base.origin, {
    connections: concurrency * groupSize * 2,
    keepAliveTimeout: 60_000,
    headersTimeout: maxMs + 30_000,
    bodyTimeout: maxMs + 30_000,
  });
  const headers = {
    'content-type': 'application/json',
    accept: 'application/json',
    authorization: 'Bearer EMPTY',
  };

  const result: FloorResult = {
    judgments: 0,
    calls: 0,
    failedCalls: 0,
    wallMs: 0,
    latency: latencySummary([]),
    groupLatency: latencySummary([]),
    cpuMs: 0,
    timedOut: false,
  };
  const latencies: number[] = [];
  const groupLatencies: number[] = [];

  /** One call: the server's own wire mapping (json_schema mode), without its transport. */
  const call = async (
    role: Role,
    ctx: RoleContext,
    sampling: { temperature: number; seed?: number },
  ): Promise<unknown> => {
    const prompt = role.render(ctx);
    const body = JSON.stringify(
      toChatParams(
        {
          model,
          messages: [
            { role: 'system', content: prompt.system },
            { role: 'user', content: prompt.user },
          ],
          schemaName: role.name,
          jsonSchema: role.jsonSchema,
          seed: sampling.seed,
          temperature: sampling.temperature,
        },
        'json_schema',
      ),
    );
    result.calls += 1;
    const res = await pool.request({ method: 'POST', path, headers, body });
    const text = await res.body.text();
    if (res.statusCode !== 200) {
      result.failedCalls += 1;
      result.firstError ??= `HTTP ${res.statusCode}: ${text.slice(0, 300)}`;
      return {};
    }
    const read = readCompletion(text, model);
    if (!read.ok) {
      result.failedCalls += 1;
      result.firstError ??= read.message;
      return {};
    }
    return JSON.parse(read.completion.text);
  };

  const judgment = async (t: Triple): Promise<void> => {
    const started = performance.now();
    const ctx = (id: string, visible: VisibleMessage[]): RoleContext => ({
      question: t.question,
      candidate: t.candidate,
      groundTruth: t.groundTruth,
      nonce: randomBytes(8).toString('hex'),
      round: 1,
      rounds: 1,
      node: { id },
      visible,
    });
    const ids = ['analyst_1', 'analyst_2'];
    const outputs = await Promise.all(
      ids.map((id, i) => call(analyst, ctx(id, []), { temperature: 0.7, seed: i + 1 })),
    );
    const visible = outputs.map((o, i): VisibleMessage => ({
      nodeId: ids[i]!,
      role: 'analyst',
      round: 1,
      stance: 'match',
      confidence: 0.9,
      summary: analyst.summarize(o),
    }));
    await call(evaluator, ctx('evaluator', visible), { temperature: 0 });
    result.judgments += 1;
    latencies.push(performance.now() - started);
  };

  /** Runs `total` judgments from index `first`, `concurrency` groups at a time; bounded by maxMs. */
  const drive = async (first: number, total: number, record: boolean): Promise<number> => {
    const groups = Math.ceil(total / groupSize);
    const t0 = performance.now();
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < groups) {
        if (performance.now() - t0 > maxMs) {
          result.timedOut = true;
          return;
        }
        const g = next++;
        const size = Math.min(groupSize, total - g * groupSize);
        const started = performance.now();
        await Promise.all(
          Array.from({ length: size }, (_, j) => judgment(tripleAt(corpus, first + g * groupSize + j))),
        );
        if (record) groupLatencies.push(performance.now() - started);
      }
    };
    try {
      await Promise.all(Array.from({ length: Math.min(concurrency, groups) }, worker));
    } catch (err) {
      result.firstError ??= err instanceof Error ? err.message : String(err);
    }
    return performance.now() - t0;
  };

  // Warm-up (JIT, keep-alive connections) before READY, so that the measured run starts warm like the server.
  const warmup = Number(values.warmup);
  if (warmup > 0) {
    await drive(start, warmup, false);
    latencies.length = 0;
    result.judgments = 0;
    result.calls = 0;
    result.timedOut = false;
  }
  await readyThenGo();
  const cpu0 = process.cpuUsage();
  result.wallMs = await drive(start, count, true);
  const cpu = process.cpuUsage(cpu0);
  result.cpuMs = (cpu.user + cpu.system) / 1000;
  result.latency = latencySummary(latencies);
  result.groupLatency = latencySummary(groupLatencies);
  await pool.close();
  send('RESULT', result);
}

await main();
