/**
 * The floor client's judgment (bench/floor.ts runs it as a process): the least a program can do to get an
 * analysts-2 judgment from the backend — the same 3 chat-completions calls per judgment (2 Analysts
 * concurrently, then the Evaluator), the same prompts and request bodies as the server (its own wire
 * mapping, json_schema mode), sent directly over a keep-alive undici Pool. No HTTP server, no validation, no
 * cache, no metrics.
 */
import { randomBytes } from 'node:crypto';

import { Pool } from 'undici';

import { readCompletion, toChatParams } from '../src/judge/backends/openai-wire.js';
import { getRole } from '../src/roles/index.js';
import type { Role, RoleContext, VisibleMessage } from '../src/roles/types.js';
import type { Triple } from './data.js';
import type { LatencySummary } from './stats.js';

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

/** What the floor client's calls counted so far (a failed call answers `{}`, and the judgment goes on). */
export interface FloorCounts {
  judgments: number;
  calls: number;
  failedCalls: number;
  firstError?: string;
  /** Each finished judgment's latency, ms. */
  latencies: number[];
}

export interface FloorClient {
  counts: FloorCounts;
  /** One analysts-2 judgment of `t`: two Analysts at once, then the Evaluator on their summaries. */
  judgment(t: Triple): Promise<void>;
  close(): Promise<void>;
}

/**
 * A floor client on the OpenAI-compatible backend at `base` (loopback only) with `connections` keep-alive
 * connections; requests time out `timeoutMs` after they were sent. Throws for a non-loopback base.
 */
export function createFloorClient(options: {
  base: URL;
  model: string;
  connections: number;
  timeoutMs: number;
}): FloorClient {
  const { base, model } = options;
  if (base.hostname !== '127.0.0.1' && base.hostname !== 'localhost') throw new Error('loopback only');
  const analyst = mustRole('analyst');
  const evaluator = mustRole('evaluator');
  const path = `${base.pathname.replace(/\/+$/, '')}/chat/completions`;
  const pool = new Pool(base.origin, {
    connections: options.connections,
    keepAliveTimeout: 60_000,
    headersTimeout: options.timeoutMs,
    bodyTimeout: options.timeoutMs,
  });
  const headers = {
    'content-type': 'application/json',
    accept: 'application/json',
    authorization: 'Bearer EMPTY',
  };
  const counts: FloorCounts = { judgments: 0, calls: 0, failedCalls: 0, latencies: [] };

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
    counts.calls += 1;
    const res = await pool.request({ method: 'POST', path, headers, body });
    const text = await res.body.text();
    if (res.statusCode !== 200) {
      counts.failedCalls += 1;
      counts.firstError ??= `HTTP ${res.statusCode}: ${text.slice(0, 300)}`;
      return {};
    }
    const read = readCompletion(text, model);
    if (!read.ok) {
      counts.failedCalls += 1;
      counts.firstError ??= read.message;
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
    counts.judgments += 1;
    counts.latencies.push(performance.now() - started);
  };

  return { counts, judgment, close: () => pool.close() };
}
