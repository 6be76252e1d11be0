/**
 * Comparative judging benchmark (`npx tsx bench/rank.ts`), two parts, medians of `--runs` runs:
 *
 * 1. Scoring CPU: `standings()` (Bradley–Terry fit + posterior score intervals) over G ∈ {8, 16, 32, 64}
 *    candidates, all_pairs and circular, outcomes from a noisy known order (70 % right), as process CPU time
 *    (robust to a busy machine). Reported per planned LLM call and as a ratio to one point fit measured in the
 *    same run (the bootstrap's multiplier).
 * 2. End to end: /v1/rank on this process's server (buildApp, real HTTP on 127.0.0.1) against the fake backend
 *    in its own process (fixed latency L, unlimited concurrency); the limit, measured in the same run, is the
 *    same number of concurrent calls sent straight to the fake by an undici pool (no server).
 * The machine may be shared: the report says how busy it was; rerun with --runs for tighter medians.
 */
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';

import { Pool } from 'undici';

import { loadConfig } from '../src/config.js';
import { fitBradleyTerry } from '../src/judge/bradley-terry.js';
import { createOfflineBackend } from '../src/judge/backends/offline.js';
import { createRouter } from '../src/judge/routing.js';
import {
  allPairs,
  circularPairs,
  standings,
  type PairResult,
  type PlayedPair,
} from '../src/judge/tournament.js';
import { buildApp } from '../src/server/http/app.js';
import { installCleanup, machineBusyMs, spawnTracked, stopProcess, waitForLine } from './procs.js';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '5' },
    'latency-ms': { type: 'string', default: '20' },
  },
  strict: true,
});
const RUNS = Math.max(1, Number(values.runs));
const LATENCY_MS = Number(values['latency-ms']);

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor((s.length - 1) / 2)] ?? Number.NaN;
};

function played(g: number, schedule: 'all_pairs' | 'circular'): Array<PlayedPair<PairResult>> {
  let seed = 7;
  const rnd = (): number => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  const pairs = schedule === 'all_pairs' ? allPairs(g) : circularPairs(g);
  // Pairs are (i < j) and the higher index is better: j wins 70 % of the time.
  return pairs.map((p) => ({
    ...p,
    round: 1,
    result: { preference: rnd() < 0.7 ? 'b' : 'a', positionBias: false, judged: true },
  }));
}

/** Process CPU time of `f`, ms. */
function cpuMs(f: () => void): number {
  const before = process.cpuUsage();
  f();
  const used = process.cpuUsage(before);
  return (used.user + used.system) / 1000;
}

const lines: string[] = [];
const print = (line: string): void => {
  lines.push(line);
  console.log(line);
};

const busy0 = machineBusyMs();
const wall0 = performance.now();
print(`# bench/rank.ts — ${new Date().toISOString().slice(0, 10)}, ${RUNS} runs, medians`);
print('');
print('## 1. Scoring CPU (standings: Bradley–Terry fit + posterior score intervals)');
print('');
print(
  '| G | schedule | pairs | planned calls | standings CPU ms | CPU µs per planned call | one fit CPU ms | standings ÷ fit |',
);
print('|---:|---|---:|---:|---:|---:|---:|---:|');
for (const g of [8, 16, 32, 64]) {
  for (const schedule of ['all_pairs', 'circular'] as const) {
    const p = played(g, schedule);
    const outcomes = p.map((x) => ({
      i: x.i,
      j: x.j,
      winner: x.result.preference === 'a' ? ('i' as const) : ('j' as const),
    }));
    standings(g, p); // warm-up
    const full: number[] = [];
    const fit: number[] = [];
    for (let r = 0; r < RUNS; r++) {
      full.push(cpuMs(() => standings(g, p)));
      fit.push(
        cpuMs(() => {
          for (let k = 0; k < 10; k++) fitBradleyTerry(g, outcomes);
        }) / 10,
      );
    }
    const ms = median(full);
    const calls = p.length * 2;
    print(
      `| ${g} | ${schedule} | ${p.length} | ${calls} | ${ms.toFixed(1)} | ${((ms * 1000) / calls).toFixed(0)} | ${median(fit).toFixed(2)} | ${(ms / median(fit)).toFixed(0)} |`,
    );
  }
}

// ---- 2. end to end --------------------------------------------------------------------------------------
const cleanup = installCleanup();
const fake = spawnTracked(
  'fake',
  process.execPath,
  ['--import', 'tsx', 'bench/fake.ts', '--latency-ms', String(LATENCY_MS), '--reply', 'comparison'],
  { stdio: ['pipe', 'pipe', 'inherit'] },
);
const baseURL = (await waitForLine(fake, /^LISTENING (\S+)/, 30_000))[1] ?? '';
const config = loadConfig({
  JUDGE_BASE_URL: baseURL,
  JUDGE_MODEL: 'fake-model',
  JUDGE_MAX_RETRIES: '0',
  LOG_LEVEL: 'silent',
});
const router = createRouter({ ...config.judge, offline: createOfflineBackend });
const app = buildApp({ config, router });
await app.listen({ port: 0, host: '127.0.0.1' });
const address = app.server.address();
const port = typeof address === 'object' && address !== null ? address.port : 0;
const client = new Pool(`http://127.0.0.1:${port}`, { connections: 8 });
const direct = new Pool(new URL(baseURL).origin, { connections: 512 });
const chatPath = `${new URL(baseURL).pathname}/chat/completions`;

const idea = (k: number, run: number): string =>
  `Run ${run}, idea ${k}: align image and text encoders with a contrastive loss over paired web data, variant ${k}.`;

async function rankOnce(g: number, run: number): Promise<{ ms: number; calls: number }> {
  const body = JSON.stringify({
    question: 'How can image and text representations be aligned without labels?',
    ground_truth: 'We align image and text encoders with a symmetric contrastive loss over large batches.',
    candidates: Array.from({ length: g }, (_, k) => idea(k, run)),
  });
  const t = performance.now();
  const res = await client.request({
    method: 'POST',
    path: '/v1/rank',
    headers: { 'content-type': 'application/json' },
    body,
  });
  const json = (await res.body.json()) as { calls: number; comparisons: { ok: number } };
  const ms = performance.now() - t;
  if (res.statusCode !== 200 || json.comparisons.ok !== (g * (g - 1)) / 2)
    throw new Error(`rank failed: ${res.statusCode}`);
  return { ms, calls: json.calls };
}

async function floorOnce(calls: number): Promise<number> {
  const body = JSON.stringify({
    model: 'fake-model',
    messages: [{ role: 'user', content: 'x'.repeat(1500) }],
  });
  const t = performance.now();
  await Promise.all(
    Array.from({ length: calls }, async () => {
      const res = await direct.request({
        method: 'POST',
        path: chatPath,
        headers: { 'content-type': 'application/json' },
        body,
      });
      await res.body.dump();
    }),
  );
  return performance.now() - t;
}

print('');
print(`## 2. /v1/rank end to end (all_pairs, fake backend L = ${LATENCY_MS} ms in its own process)`);
print('');
print('| G | calls | /v1/rank ms | limit: same calls straight to the fake, ms | ratio |');
print('|---:|---:|---:|---:|---:|');
try {
  let run = 0;
  await rankOnce(8, run++); // warm-up (JIT, connections)
  await floorOnce(56);
  for (const g of [8, 16, 32]) {
    const rank: number[] = [];
    const floor: number[] = [];
    let calls = 0;
    for (let r = 0; r < RUNS; r++) {
      const once = await rankOnce(g, run++);
      rank.push(once.ms);
      calls = once.calls;
      floor.push(await floorOnce(calls));
    }
    print(
      `| ${g} | ${calls} | ${median(rank).toFixed(1)} | ${median(floor).toFixed(1)} | ${(median(rank) / median(floor)).toFixed(2)} |`,
    );
  }
} finally {
  await client.close();
  await direct.close();
  await app.close();
  for (const b of router.backends()) await b.close?.();
  await stopProcess(fake);
  cleanup();
}
const wallMs = performance.now() - wall0;
const busy = (machineBusyMs() - busy0) / wallMs;
print('');
print(
  `Machine: 2 cores shared with other work; on average ${busy.toFixed(2)} cores were busy during the run (all processes, ours included).`,
);
