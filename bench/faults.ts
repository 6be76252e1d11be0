/**
 * Mixed-fault bench (issue 23): GRPO groups from the shared OpenReview set sent to the real app
 * (`buildApp` → admission → engine → OpenAI-compatible backend over HTTP) against one fake backend that,
 * call by call, answers at random (seeded):
 *
 *   2.5 % 429 with `Retry-After: 1`   2.5 % 429 without   2.5 % 500 with `Retry-After: 1`   2.5 % 500 without
 *   2 % hang (never answers)          3 % JSON cut at `finish_reason: length`               2 % prose
 *   the rest a valid reply
 *
 * Every injected 500 carries the same body (`fake status 500`, `type: server_error`), as a real engine's
 * repeated error does. In `json_object` mode the fake answers an object of its own shape (as a weak model
 * without constrained decoding would), so a backend wrongly switched off `json_schema` shows as
 * `RW_JUDGE_UNPARSABLE` failures. Reports judged / failed items by status and error code:
 *
 *   npx tsx bench/faults.ts                    # 480 judgments (30 groups of 16), REQUEST_DEADLINE_MS=60000
 *   npx tsx bench/faults.ts --runs 5 --scale 0.1
 *
 * `--scale` multiplies every duration (deadline, per-attempt timeout, fake latency, Retry-After, backoff),
 * so a scaled run keeps the same proportions in less time. Everything runs on 127.0.0.1 in this process;
 * the fake and the app are closed at the end.
 */
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';

import { loadConfig } from '../src/config.js';
import { createOpenAICompatibleBackend } from '../src/judge/backends/openai.js';
import { createOfflineBackend } from '../src/judge/backends/offline.js';
import { createRouter } from '../src/judge/routing.js';
import { DEFAULT_RETRY_POLICY } from '../src/judge/retry.js';
import { BACKEND_DEFAULTS } from '../src/settings/defaults.js';
import { buildApp } from '../src/server/http/app.js';
import { createMetrics } from '../src/server/observe/metrics.js';
import {
  startFakeOpenAI,
  universalReply,
  type FakeChatRequest,
  type FakeReply,
} from '../test/fakes/openai.js';
import { BLOCK, groupBody, loadCorpus, type Corpus } from './data.js';

/** Shares of calls per fault, in draw order; the remainder is a valid reply. */
export interface FaultMix {
  status429RetryAfter: number;
  status429: number;
  status500RetryAfter: number;
  status500: number;
  hang: number;
  cut: number;
  prose: number;
}

export const ISSUE_MIX: Readonly<FaultMix> = Object.freeze({
  status429RetryAfter: 0.025,
  status429: 0.025,
  status500RetryAfter: 0.025,
  status500: 0.025,
  hang: 0.02,
  cut: 0.03,
  prose: 0.02,
});

export interface FaultOptions {
  /** Groups of BLOCK (16) judgments (30 → 480 judgments). */
  groups: number;
  /** Groups in flight at once. */
  concurrentGroups: number;
  graph: string;
  mix: FaultMix;
  /** Multiplies every duration below (and the backoff): 1 = the issue's numbers. */
  scale: number;
  /** REQUEST_DEADLINE_MS before scaling. */
  deadlineMs: number;
  /** JUDGE_TIMEOUT_MS before scaling; undefined = the server's default (scaled too). */
  timeoutMs?: number | undefined;
  /** Fake service time per call before scaling, ms. */
  latencyMs: number;
  seed: number;
  /** Extra server environment. */
  env?: Record<string, string> | undefined;
}

export interface FaultResult {
  judgments: number;
  ok: number;
  /** Items by `status` / `error_code` (`ok` included). */
  outcomes: Record<string, number>;
  /** Items that are neither `ok` with a reward nor an explicit failure (`reward: null`): must be 0. */
  silent: number;
  /** HTTP answers other than 200, by status. */
  httpErrors: Record<string, number>;
  /** Backend calls the fake received, and how many of them it answered `json_object`. */
  calls: number;
  jsonObjectCalls: number;
  /** Response-format switches the backend made (any direction). */
  switches: number;
  seconds: number;
}

/** mulberry32: a small seeded PRNG, so a run's fault sequence is reproducible (up to arrival order). */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Stance from a stable hash of the prompt, so verdicts are mixed but reproducible. */
function stanceOf(body: FakeChatRequest): 'match' | 'no_match' {
  const user = body.messages?.at(-1)?.content ?? '';
  let h = 0;
  for (let i = 0; i < user.length; i += 7) h = (h * 31 + user.charCodeAt(i)) | 0;
  return h % 2 === 0 ? 'match' : 'no_match';
}

/** The fake's answer policy: one draw per call from `mix`. */
export function faultyJudge(
  mix: FaultMix,
  random: () => number,
  retryAfter: string,
): (body: FakeChatRequest) => FakeReply {
  return (body) => {
    if (body.response_format?.type === 'json_object') {
      // No constrained decoding: a weak model answers an object of its own shape.
      return { kind: 'json', body: { answer: stanceOf(body) === 'match' ? 'yes' : 'no', score: 0.8 } };
    }
    const r = random();
    let edge = 0;
    const hit = (share: number): boolean => r < (edge += share);
    if (hit(mix.status429RetryAfter)) return { kind: 'status', status: 429, retryAfter };
    if (hit(mix.status429)) return { kind: 'status', status: 429 };
    if (hit(mix.status500RetryAfter)) return { kind: 'status', status: 500, retryAfter };
    if (hit(mix.status500)) return { kind: 'status', status: 500 };
    if (hit(mix.hang)) return { kind: 'hang' };
    const full = JSON.stringify(universalReply(stanceOf(body), 0.8));
    if (hit(mix.cut)) return { kind: 'text', text: full.slice(0, full.length >> 1), finishReason: 'length' };
    if (hit(mix.prose)) return { kind: 'text', text: 'The candidate seems to match the paper, mostly.' };
    return { kind: 'text', text: full };
  };
}

interface ItemResult {
  status: string;
  error?: string;
  reward: number | null;
  error_code?: string;
}

export async function runFaultScenario(corpus: Corpus, o: FaultOptions): Promise<FaultResult> {
  const ms = (x: number): number => Math.max(1, Math.round(x * o.scale));
  const random = seeded(o.seed);
  // Retry-After is in seconds; decimals are accepted (by this server; real servers send integers).
  const retryAfter = String(Math.round(o.scale * 1000) / 1000);
  let jsonObjectCalls = 0;
  const judge = faultyJudge(o.mix, random, retryAfter);
  const fake = await startFakeOpenAI({
    latencyMs: ms(o.latencyMs),
    record: false,
    fallback: (body) => {
      if (body.response_format?.type === 'json_object') jsonObjectCalls += 1;
      return judge(body);
    },
  });
  const config = loadConfig({
    JUDGE_BASE_URL: fake.baseURL,
    JUDGE_MODEL: 'fake-model',
    REQUEST_DEADLINE_MS: String(ms(o.deadlineMs)),
    JUDGE_TIMEOUT_MS: String(ms(o.timeoutMs ?? BACKEND_DEFAULTS.timeoutMs)),
    ...(o.env ?? {}),
  });
  if (config.judge.default === 'offline') throw new Error('the fault bench needs the OpenAI backend');
  const router = createRouter({
    ...config.judge,
    offline: createOfflineBackend,
    createBackend: (settings, name) =>
      createOpenAICompatibleBackend(settings, {
        name,
        backoff: {
          baseDelayMs: DEFAULT_RETRY_POLICY.baseDelayMs * o.scale,
          maxDelayMs: DEFAULT_RETRY_POLICY.maxDelayMs * o.scale,
        },
      }),
  });
  const metrics = createMetrics({ recentWindow: config.recentWindow });
  const app = buildApp({ config, router, metrics });
  const outcomes: Record<string, number> = {};
  const httpErrors: Record<string, number> = {};
  let judgments = 0;
  let ok = 0;
  let silent = 0;
  const started = performance.now();
  try {
    let next = 0;
    const worker = async (): Promise<void> => {
      // Bounded: each worker takes groups until `groups` have been taken.
      while (next < o.groups) {
        const g = next++;
        const res = await app.inject({
          method: 'POST',
          url: '/v1/reward',
          headers: { 'content-type': 'application/json' },
          payload: groupBody(corpus, g * BLOCK, BLOCK, o.graph),
        });
        if (res.statusCode !== 200) {
          httpErrors[res.statusCode] = (httpErrors[res.statusCode] ?? 0) + 1;
          judgments += BLOCK;
          const code = (res.json<{ error?: { code?: string } }>().error?.code ?? '').toString();
          const key = `http_${res.statusCode}${code === '' ? '' : ` ${code}`}`;
          outcomes[key] = (outcomes[key] ?? 0) + BLOCK;
          continue;
        }
        for (const r of res.json<{ results: ItemResult[] }>().results) {
          judgments += 1;
          const key = r.status === 'ok' ? 'ok' : `${r.status}${r.error_code ? ` ${r.error_code}` : ''}`;
          outcomes[key] = (outcomes[key] ?? 0) + 1;
          if (process.env['FAULTS_DEBUG'] !== undefined && r.status !== 'ok')
            console.error(JSON.stringify(r).slice(0, 600));
          if (r.status === 'ok' && r.reward !== null) ok += 1;
          // A failure is never a reward, and an `ok` always carries one.
          else if (r.status === 'ok' || (r.status !== 'rejected_input' && r.reward !== null)) silent += 1;
        }
      }
    };
    await Promise.all(Array.from({ length: o.concurrentGroups }, () => worker()));
    const seconds = (performance.now() - started) / 1000;
    let switches = 0;
    for (const r of router.backends().flatMap((b) => b.replicas?.() ?? [])) {
      for (const n of r.responseFormatSwitches?.values() ?? []) switches += n;
    }
    return {
      judgments,
      ok,
      outcomes,
      silent,
      httpErrors,
      calls: fake.callCount,
      jsonObjectCalls,
      switches,
      seconds,
    };
  } finally {
    await app.close();
    await Promise.all(router.backends().map(async (b) => b.close?.()));
    await fake.close();
  }
}

export const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      runs: { type: 'string', default: '3' },
      groups: { type: 'string', default: '30' },
      'concurrent-groups': { type: 'string', default: '30' },
      graph: { type: 'string', default: 'default' },
      scale: { type: 'string', default: '1' },
      'deadline-ms': { type: 'string', default: '60000' },
      'timeout-ms': { type: 'string' },
      'latency-ms': { type: 'string', default: '200' },
      seed: { type: 'string', default: '1' },
    },
    strict: true,
  });
  const corpus = loadCorpus();
  const runs = Number(values.runs);
  const judged: number[] = [];
  for (let run = 0; run < runs; run++) {
    const r = await runFaultScenario(corpus, {
      groups: Number(values.groups),
      concurrentGroups: Number(values['concurrent-groups']),
      graph: values.graph,
      mix: ISSUE_MIX,
      scale: Number(values.scale),
      deadlineMs: Number(values['deadline-ms']),
      timeoutMs: values['timeout-ms'] === undefined ? undefined : Number(values['timeout-ms']),
      latencyMs: Number(values['latency-ms']),
      seed: Number(values.seed) + run,
    });
    judged.push(r.ok / r.judgments);
    const outcomes = Object.entries(r.outcomes)
      .sort((a, b) => b[1] - a[1])
      .map(([k, n]) => `${k}: ${n}`)
      .join(', ');
    console.log(
      `run ${run + 1}: judged ${r.ok}/${r.judgments} (${((100 * r.ok) / r.judgments).toFixed(1)} %) in ${r.seconds.toFixed(1)} s; ` +
        `calls ${r.calls} (json_object ${r.jsonObjectCalls}), format switches ${r.switches}, silent ${r.silent}; ${outcomes}`,
    );
  }
  console.log(`median judged: ${(100 * median(judged)).toFixed(1)} % over ${runs} run(s)`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main();
