/**
 * Capacity-plan accuracy (issue 21): `POST /v1/plan` before a burst vs the burst's measured wall time,
 * against the fake backend at a fixed latency. The server (in this process, real HTTP on loopback) first
 * judges a few judgments one at a time (what an idle server measures: call latency, tokens per judgment),
 * then is asked for the plan of a step of `rollouts` judgments in requests of `groupSize`, then receives
 * that step at once: every request concurrently, distinct candidates (no cache hits).
 *
 *   npx tsx bench/plan.ts [--latency-ms 50,200] [--rollouts 512] [--group-size 16] [--inflight 16] [--rpm N]
 *
 * Prints one JSON line per latency and a markdown table (bench/results/2026-12-01-plan.md).
 */
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { loadConfig } from '../src/config.js';
import { createOfflineBackend } from '../src/judge/backends/offline.js';
import { createRouter } from '../src/judge/routing.js';
import { buildApp } from '../src/server/http/app.js';
import type { Plan } from '../src/server/admission/plan.js';
import { startFakeOpenAI, universalReply } from '../test/fakes/openai.js';

export interface PlanBurstOptions {
  latencyMs: number;
  rollouts: number;
  groupSize: number;
  /** JUDGE_MAX_INFLIGHT. */
  inflight: number;
  /** Unloaded judgments before the plan is asked. Default 4. */
  warmup?: number;
  /** JUDGE_RPM (requests per minute to the backend); default none. */
  rpm?: number | undefined;
}

export interface PlanBurstResult {
  latencyMs: number;
  rollouts: number;
  groupSize: number;
  inflight: number;
  plan: Plan;
  measuredWallS: number;
  /** predicted / measured. */
  ratio: number;
  measuredCalls: number;
  okJudgments: number;
}

/** A letters-only word per number (digits would make the text non-prose, a rejected input: no calls). */
const word = (n: number): string => {
  let out = '';
  for (let k = n + 26 * 26; k > 0; k = Math.floor(k / 26)) out += String.fromCharCode(97 + (k % 26));
  return out;
};

const text = (i: number, words: number): string =>
  Array.from({ length: words }, (_, w) =>
    word((((i * 7919 + w * 104_729) % 100_000) + 100_000) % 100_000),
  ).join(' ');

const groundTruth = (g: number): string =>
  `Paper ${g}: we align image and text encoders with a contrastive objective. ${text(g, 60)}`;

const rollout = (g: number, i: number): string =>
  `Rollout ${g}-${i}: train paired encoders with a contrastive loss and batch negatives. ${text(g * 1000 + i, 40)}`;

async function post(url: string, body: unknown): Promise<{ status: number; json: unknown }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
}

/** One burst at one latency; everything it starts is closed before it returns. */
export async function planBurst(options: PlanBurstOptions): Promise<PlanBurstResult> {
  const fake = await startFakeOpenAI({
    latencyMs: options.latencyMs,
    record: false,
    fallback: { kind: 'json', body: universalReply('match', 0.9) },
  });
  const config = loadConfig({
    JUDGE_BASE_URL: fake.baseURL,
    JUDGE_MODEL: 'fake-model',
    JUDGE_API_KEY: 'bench',
    JUDGE_MAX_RETRIES: '0',
    JUDGE_MAX_INFLIGHT: String(options.inflight),
    REQUEST_DEADLINE_MS: '600000',
    ...(options.rpm === undefined ? {} : { JUDGE_RPM: String(options.rpm) }),
  });
  const router = createRouter({ ...config.judge, offline: createOfflineBackend });
  const app = buildApp({ config, router });
  try {
    await app.listen({ host: '127.0.0.1', port: 0 });
    const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    const warmup = options.warmup ?? 4;
    for (let i = 0; i < warmup; i++) {
      const r = await post(`${url}/v1/judge`, {
        ground_truth: groundTruth(-1 - i),
        candidate: rollout(-1, i),
      });
      if (r.status !== 200) throw new Error(`warm-up judgment answered ${r.status}`);
    }
    const planned = await post(`${url}/v1/plan`, {
      rollouts: options.rollouts,
      group_size: options.groupSize,
    });
    if (planned.status !== 200) throw new Error(`plan answered ${planned.status}`);
    const plan = planned.json as Plan;
    const callsBefore = fake.callCount;
    const groups = Math.ceil(options.rollouts / options.groupSize);
    const started = performance.now();
    const answers = await Promise.all(
      Array.from({ length: groups }, (_, g) => {
        const n = Math.min(options.groupSize, options.rollouts - g * options.groupSize);
        return post(`${url}/v1/reward`, {
          ground_truth: groundTruth(g),
          candidates: Array.from({ length: n }, (_, i) => rollout(g, i)),
        });
      }),
    );
    const measuredWallS = (performance.now() - started) / 1000;
    let ok = 0;
    for (const a of answers) {
      if (a.status !== 200) throw new Error(`burst request answered ${a.status}`);
      const rewards = (a.json as { rewards: Array<number | null> }).rewards;
      ok += rewards.filter((r) => r !== null).length;
    }
    return {
      latencyMs: options.latencyMs,
      rollouts: options.rollouts,
      groupSize: options.groupSize,
      inflight: options.inflight,
      plan,
      measuredWallS,
      ratio: plan.predicted_wall_s / measuredWallS,
      measuredCalls: fake.callCount - callsBefore,
      okJudgments: ok,
    };
  } finally {
    await app.close();
    await Promise.all(router.backends().map(async (b) => b.close?.()));
    await fake.close();
  }
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { values } = parseArgs({
    options: {
      'latency-ms': { type: 'string', default: '50,200' },
      rollouts: { type: 'string', default: '512' },
      'group-size': { type: 'string', default: '16' },
      inflight: { type: 'string', default: '16' },
      rpm: { type: 'string' },
    },
    strict: true,
  });
  const rows: string[] = [
    '| latency | rollouts | group | JUDGE_MAX_INFLIGHT | calls (plan / fake) | predicted wall | measured wall | predicted / measured | limiting |',
    '| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |',
  ];
  for (const latencyMs of values['latency-ms'].split(',').map(Number)) {
    const r = await planBurst({
      latencyMs,
      rollouts: Number(values.rollouts),
      groupSize: Number(values['group-size']),
      inflight: Number(values.inflight),
      rpm: values.rpm === undefined ? undefined : Number(values.rpm),
    });
    process.stdout.write(`${JSON.stringify(r)}\n`);
    rows.push(
      `| ${latencyMs} ms | ${r.rollouts} | ${r.groupSize} | ${r.inflight} | ${r.plan.calls} / ${r.measuredCalls} | ` +
        `${r.plan.predicted_wall_s.toFixed(1)} s | ${r.measuredWallS.toFixed(1)} s | ${r.ratio.toFixed(2)} | ${r.plan.limiting} |`,
    );
  }
  process.stdout.write(`\n${rows.join('\n')}\n`);
}
