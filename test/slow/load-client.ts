/**
 * The trainer side of the burst tests, as its own process (a trainer is not inside the reward server's
 * event loop): sends `n` per-rollout `/get_reward` requests at once, one connection each, and prints one
 * JSON line with every attempt. Times are epoch ms (performance.timeOrigin + now), comparable across
 * processes.
 *
 *   node --import tsx test/slow/load-client.ts '{"url", "from", "n", "policy": "openrlhf" | "once"}'
 *
 * `openrlhf`: OpenRLHF's remote-RM client — 5 attempts, 1 s apart, Retry-After ignored, 180 s timeout each;
 * `once`: one attempt per rollout. Bounded: n ≤ 10 000, every attempt times out after 180 s.
 */
import { Agent, request } from 'undici';

import { loadCorpus, rolloutBody } from '../../bench/data.js';

interface Job {
  url: string;
  from: number;
  n: number;
  policy: 'openrlhf' | 'once';
}

export interface Attempt {
  status: number;
  code: string | undefined;
  retryAfterS: number | undefined;
  sentAt: number;
  answeredAt: number;
  reward: number | undefined;
}

export interface ClientReport {
  startedAt: number;
  endedAt: number;
  rollouts: Array<{ reward: number | undefined; attempts: Attempt[] }>;
}

const OPENRLHF = { attempts: 5, pauseMs: 1000, timeoutMs: 180_000 };
const now = (): number => performance.timeOrigin + performance.now();

const job = JSON.parse(process.argv[2] ?? '{}') as Job;
if (!(job.n > 0 && job.n <= 10_000)) throw new Error('n must be 1..10000');
const corpus = loadCorpus();
const bodies = Array.from({ length: job.n }, (_, k) => rolloutBody(corpus, job.from + k));
const agent = new Agent({ connections: null, headersTimeout: 0, bodyTimeout: 0, connectTimeout: 30_000 });

async function post(body: string): Promise<Attempt> {
  const sentAt = now();
  try {
    const res = await request(job.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
      dispatcher: agent,
      signal: AbortSignal.timeout(OPENRLHF.timeoutMs),
    });
    const json = (await res.body.json()) as { rewards?: number[]; code?: string };
    const retryAfter = res.headers['retry-after'];
    return {
      status: res.statusCode,
      code: json.code,
      retryAfterS: typeof retryAfter === 'string' ? Number(retryAfter) : undefined,
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
}

async function rollout(body: string): Promise<{ reward: number | undefined; attempts: Attempt[] }> {
  const attempts: Attempt[] = [];
  const tries = job.policy === 'openrlhf' ? OPENRLHF.attempts : 1;
  for (let i = 0; i < tries; i++) {
    const attempt = await post(body);
    attempts.push(attempt);
    if (attempt.status === 200) return { reward: attempt.reward, attempts };
    if (i + 1 < tries) await new Promise((resolve) => setTimeout(resolve, OPENRLHF.pauseMs));
  }
  return { reward: undefined, attempts };
}

const startedAt = now();
const rollouts = await Promise.all(bodies.map(rollout));
const report: ClientReport = { startedAt, endedAt: now(), rollouts };
await agent.close();
process.stdout.write(`${JSON.stringify(report)}\n`);
