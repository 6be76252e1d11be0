/**
 * The trainer side of the burst tests, as its own process (a trainer is not inside the reward server's
 * event loop): sends `n` per-rollout `/get_reward` requests at once, one connection each, and prints one
 * JSON line with every attempt. Times are epoch ms (performance.timeOrigin + now), comparable across
 * processes.
 *
 *   node --import tsx test/slow/load-client.ts '{"url", "from", "n", "policy": "openrlhf" | "once"}'
 *   node --import tsx test/slow/load-client.ts      # one job per stdin line, one report line each
 *
 * `openrlhf`: OpenRLHF's remote-RM client — 5 attempts, 1 s apart, Retry-After ignored, 180 s timeout each;
 * `once`: one attempt per rollout. Bounded: n ≤ 10 000, every attempt times out after 180 s. `scale`
 * (default 1) multiplies OpenRLHF's pause and timeout, for benchmarks whose judge latency is scaled down
 * the same way; `headers` are sent with every request.
 */
import { createInterface } from 'node:readline';

import { Agent, request } from 'undici';

import { loadCorpus, rolloutBody } from '../../bench/data.js';

export interface Job {
  url: string;
  from: number;
  n: number;
  policy: 'openrlhf' | 'once';
  scale?: number;
  headers?: Record<string, string>;
}

export interface Attempt {
  status: number;
  code: string | undefined;
  retryAfterS: number | undefined;
  /** A refusal's `details.drain_calls_per_s`: the drain rate the server decided at. */
  drainCallsPerS?: number | undefined;
  sentAt: number;
  answeredAt: number;
  reward: number | undefined;
}

export interface ClientReport {
  startedAt: number;
  endedAt: number;
  rollouts: Array<{ reward: number | undefined; attempts: Attempt[] }>;
}

const now = (): number => performance.timeOrigin + performance.now();

const corpus = loadCorpus();

/** Runs one job: every rollout sent at once, each retried per its policy. */
async function runJob(job: Job): Promise<ClientReport> {
  if (!(job.n > 0 && job.n <= 10_000)) throw new Error('n must be 1..10000');
  const scale = job.scale ?? 1;
  if (!(scale > 0 && scale <= 1)) throw new Error('scale must be in (0, 1]');
  const policy = {
    attempts: job.policy === 'openrlhf' ? 5 : 1,
    pauseMs: 1000 * scale,
    timeoutMs: 180_000 * scale,
  };
  const bodies = Array.from({ length: job.n }, (_, k) => rolloutBody(corpus, job.from + k));
  const agent = new Agent({ connections: null, headersTimeout: 0, bodyTimeout: 0, connectTimeout: 30_000 });

  const post = async (body: string): Promise<Attempt> => {
    const sentAt = now();
    try {
      const res = await request(job.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...job.headers },
        body,
        dispatcher: agent,
        signal: AbortSignal.timeout(policy.timeoutMs),
      });
      const json = (await res.body.json()) as {
        rewards?: number[];
        code?: string;
        details?: { drain_calls_per_s?: number };
      };
      const retryAfter = res.headers['retry-after'];
      return {
        status: res.statusCode,
        code: json.code,
        retryAfterS: typeof retryAfter === 'string' ? Number(retryAfter) : undefined,
        drainCallsPerS: json.details?.drain_calls_per_s,
        sentAt,
        answeredAt: now(),
        reward: res.statusCode === 200 ? json.rewards?.[0] : undefined,
      };
    } catch {
      return {
        status: 0,
        code: 'connection',
        retryAfterS: undefined,
        sentAt,
        answeredAt: now(),
        reward: undefined,
      };
    }
  };

  const rollout = async (body: string): Promise<{ reward: number | undefined; attempts: Attempt[] }> => {
    const attempts: Attempt[] = [];
    for (let i = 0; i < policy.attempts; i++) {
      const attempt = await post(body);
      attempts.push(attempt);
      if (attempt.status === 200) return { reward: attempt.reward, attempts };
      if (i + 1 < policy.attempts) await new Promise((resolve) => setTimeout(resolve, policy.pauseMs));
    }
    return { reward: undefined, attempts };
  };

  const startedAt = now();
  const rollouts = await Promise.all(bodies.map(rollout));
  const report: ClientReport = { startedAt, endedAt: now(), rollouts };
  await agent.close();
  return report;
}

// One job from argv; or, without one, one job per stdin line (one JSON report line each) until stdin closes.
if (process.argv[2] !== undefined) {
  process.stdout.write(`${JSON.stringify(await runJob(JSON.parse(process.argv[2]) as Job))}\n`);
} else {
  for await (const line of createInterface({ input: process.stdin })) {
    if (line.trim() === '') continue;
    process.stdout.write(`${JSON.stringify(await runJob(JSON.parse(line) as Job))}\n`);
  }
}
