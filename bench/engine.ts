/**
 * The judge fleet against a continuous-batching engine whose batch is smaller than what this server may
 * send (issue 29): fake vLLM-like engines (test/fakes/engine.ts, in their own process) with S slots, an
 * OpenRLHF-like burst of per-rollout `/get_reward` requests (test/slow/load-client.ts, its own process),
 * and high-priority `/v1/judge` calls sent during the burst. Per engine size and in-flight setting it
 * reports the wall time against the engine's own bound, the rollouts lost, the engine's queue peak and the
 * high-priority latency against the unloaded one.
 *
 *   npx tsx bench/engine.ts [--runs 3] [--slots 8,32,128] [--settings engine,fixed,aimd] [--markdown]
 *   npx tsx bench/engine.ts --slots 32 --settings engine --seconds 3 --lying-gauges   # issue 38 item 10
 *
 * `--lying-gauges`: the engines' /metrics report 0 running and 0 waiting whatever they hold.
 *
 * Timing is scaled: a judge call is 16 decode steps of 8 ms (128 ms, 192 ms at a full batch; a real one is
 * ~1 s), and the
 * deadline (REQUEST_DEADLINE_MS), OpenRLHF's timeout and pause and GET_REWARD_HOLD_MS are scaled by the
 * same factor (SCALE). Everything else is the server's default.
 */
import { spawn } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

import type { FastifyInstance } from 'fastify';
import { request } from 'undici';

import { loadCorpus, tripleAt, type Corpus } from './data.js';
import { loadConfig } from '../src/config.js';
import { createOfflineBackend } from '../src/judge/backends/offline.js';
import { createRouter } from '../src/judge/routing.js';
import type { Router } from '../src/judge/types.js';
import { buildApp } from '../src/server/http/app.js';
import type { EngineOptions, EngineStats } from '../test/fakes/engine.js';
import type { ClientReport, Job } from '../test/slow/load-client.js';

/** Judge time scale against a real engine (a ~1 s call here takes ~0.12–0.18 s). */
export const SCALE = 0.12;
export const STEP_MS = 8;
export const TOKENS = 16;
export const SLOWDOWN = 0.5;
/** Time between two high-priority probes during a burst, ms. */
const PROBE_EVERY_MS = 300;
/** The default graph's critical path, in calls (analysts-2: the analysts, then the evaluator). */
const CRITICAL_PATH = 2;

const ENGINE_SERVER = fileURLToPath(new URL('../test/fakes/engine-server.ts', import.meta.url));
const LOAD_CLIENT = fileURLToPath(new URL('../test/slow/load-client.ts', import.meta.url));

/** A child process spoken to in lines: `ask` sends one line and resolves with the next line it prints. */
interface LineChild {
  readonly lines: string[];
  next(timeoutMs?: number): Promise<string>;
  send(line: string): void;
  close(): Promise<void>;
}

function spawnLines(args: string[]): LineChild {
  const child = spawn(process.execPath, ['--import', 'tsx', ...args], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const queued: string[] = [];
  const waiting: Array<(line: string) => void> = [];
  let buffered = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk: string) => {
    buffered += chunk;
    for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      const w = waiting.shift();
      if (w === undefined) queued.push(line);
      else w(line);
    }
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    lines: queued,
    next(timeoutMs = 120_000) {
      const line = queued.shift();
      if (line !== undefined) return Promise.resolve(line);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`${args[0]}: no line in ${timeoutMs} ms`)),
          timeoutMs,
        );
        waiting.push((l) => {
          clearTimeout(timer);
          resolve(l);
        });
      });
    },
    send: (line) => child.stdin.write(`${line}\n`),
    async close() {
      child.stdin.end();
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** Fake engines in their own process. */
export interface Engines {
  urls: string[];
  stats(): Promise<EngineStats[]>;
  reset(): void;
  close(): Promise<void>;
}

export async function startEngines(specs: readonly EngineOptions[]): Promise<Engines> {
  const child = spawnLines([ENGINE_SERVER, JSON.stringify(specs)]);
  const urls: string[] = [];
  for (let i = 0; i < specs.length; i++) {
    const line = await child.next(60_000);
    const match = /^LISTENING (\S+)/.exec(line);
    if (match?.[1] === undefined) throw new Error(`engine server: ${line}`);
    urls.push(match[1]);
  }
  return {
    urls,
    async stats() {
      child.send('STATS');
      return JSON.parse((await child.next()).replace(/^STATS /, '')) as EngineStats[];
    },
    reset: () => child.send('RESET'),
    close: () => child.close(),
  };
}

/** The OpenRLHF-like load client, one job at a time. */
export interface LoadClient {
  run(job: Job): Promise<ClientReport>;
  close(): Promise<void>;
}

export function startLoadClient(): LoadClient {
  const child = spawnLines([LOAD_CLIENT]);
  return {
    async run(job) {
      child.send(JSON.stringify(job));
      return JSON.parse(await child.next(300_000)) as ClientReport;
    },
    close: () => child.close(),
  };
}

export interface Scenario {
  name: string;
  /** Index of the engine (of `startEngines`) and its spec. */
  engine: number;
  spec: EngineOptions;
  /** Server environment on top of the scaled defaults (e.g. `JUDGE_INFLIGHT_CONTROL`). */
  env?: Record<string, string> | undefined;
  /** Per-rollout requests in the burst. */
  rollouts: number;
  /** First rollout index (distinct ranges never hit the cache). */
  from: number;
  /** `openrlhf` (5 tries 1 × SCALE s apart) or `once`. */
  policy: 'openrlhf' | 'once';
  /** The client's own deadline (`x-reward-deadline-ms`), ms; default none. */
  clientDeadlineMs?: number | undefined;
  /** High-priority `/v1/judge` calls sent during the burst (one every PROBE_EVERY_MS). */
  highProbes: number;
  /** Unloaded high-priority judgments before the burst (their median is the unloaded latency). Default 3. */
  unloadedProbes?: number | undefined;
}

export interface ScenarioResult {
  name: string;
  slots: number;
  rollouts: number;
  wallS: number;
  /** The engine's bound for the burst: its work at a full batch, plus the critical path's tail. */
  boundS: number;
  ratio: number;
  /** Rollouts without a reward once the client gave up. */
  lost: number;
  /** Requests answered 503 RW_OVERLOADED (attempts). */
  refused: number;
  /** The slowest refusal, s after it was sent. */
  refusalMaxS: number;
  /** Admitted attempts that did not answer 200. */
  admittedFailed: number;
  engineQueuePeak: number;
  unloadedMs: number;
  highMedianMs: number;
  /** High-priority probes refused at every try (PROBE_TRIES), not in the median. */
  highRefused: number;
  highRatio: number;
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length === 0 ? Number.NaN : s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

/** Scaled defaults: the deadline, OpenRLHF's hold window, scaled like the judge's latency. */
export function scaledEnv(url: string): Record<string, string> {
  return {
    JUDGE_BASE_URL: url,
    JUDGE_MODEL: 'fake-model',
    REQUEST_DEADLINE_MS: String(Math.round(110_000 * SCALE)),
    GET_REWARD_HOLD_MS: String(Math.round(170_000 * SCALE)),
    LOG_LEVEL: 'warn',
  };
}

async function startServer(
  env: Record<string, string>,
): Promise<{ app: FastifyInstance; router: Router; url: string }> {
  const config = loadConfig(env);
  const router = createRouter({ ...config.judge, offline: createOfflineBackend });
  const app = buildApp({ config, router });
  await app.listen({ port: 0, host: '127.0.0.1', backlog: 8192 });
  const { port } = app.server.address() as AddressInfo;
  return { app, router, url: `http://127.0.0.1:${port}` };
}

/** Tries of a probe refused with 503 (it waits the scaled Retry-After between them, as a client would). */
const PROBE_TRIES = 20;

/**
 * One high-priority `/v1/judge`, ms until it was answered: a 503 (the high lane past HIGH_PRIORITY_SHARE of
 * the estimated capacity) is retried after its scaled Retry-After, and the wait counts; Infinity when every
 * try was refused (counted as refused, not in the median).
 */
async function judgeOnce(url: string, corpus: Corpus, k: number, high: boolean): Promise<number> {
  const t = tripleAt(corpus, k);
  const started = performance.now();
  for (let attempt = 1; ; attempt++) {
    const res = await request(`${url}/v1/judge`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        question: t.question,
        ground_truth: t.groundTruth,
        // Its own judgment: never one of the burst's (tripleAt wraps around), which it would wait for.
        candidate: `${t.candidate} (validation ${k})`,
        ...(high ? { priority: 'high' } : {}),
      }),
    });
    const text = await res.body.text();
    if (res.statusCode === 200) return performance.now() - started;
    const retryAfterS = Number(res.headers['retry-after'] ?? 1);
    if (res.statusCode === 503 && attempt >= PROBE_TRIES) return Infinity;
    if (res.statusCode !== 503)
      throw new Error(`/v1/judge answered ${res.statusCode}: ${text.slice(0, 500)}`);
    await new Promise((r) => setTimeout(r, retryAfterS * 1000 * SCALE));
  }
}

const stepOf = (spec: EngineOptions, batch: number): number =>
  spec.stepMs * (1 + ((spec.slowdown ?? 0.5) * (batch - 1)) / Math.max(1, spec.slots - 1));

/** Runs one scenario on a fresh server against engine `scenario.engine`. */
export async function runScenario(
  corpus: Corpus,
  engines: Engines,
  client: LoadClient,
  scenario: Scenario,
): Promise<ScenarioResult> {
  const base = engines.urls[scenario.engine];
  if (base === undefined) throw new Error(`no engine ${scenario.engine}`);
  const server = await startServer({ ...scaledEnv(base), ...scenario.env });
  try {
    // Unloaded: high-priority judgments one after another (also what the server calibrates on).
    const unloaded: number[] = [];
    for (let i = 0; i < (scenario.unloadedProbes ?? 3); i++)
      unloaded.push(await judgeOnce(server.url, corpus, scenario.from + 900_000 + i, true));
    engines.reset();
    const burstAt = performance.now();
    const burst = client.run({
      url: `${server.url}/get_reward`,
      from: scenario.from,
      n: scenario.rollouts,
      policy: scenario.policy,
      scale: SCALE,
      headers:
        scenario.clientDeadlineMs === undefined
          ? {}
          : { 'x-reward-deadline-ms': String(scenario.clientDeadlineMs) },
    });
    // High-priority probes during the burst: one every PROBE_EVERY_MS from 0.5 s on, each on its own; only
    // those sent while the burst was still running count.
    const highs: Array<{ at: number; ms: number }> = [];
    let burstDone = false;
    const probes = (async () => {
      const sent: Array<Promise<void>> = [];
      await new Promise((r) => setTimeout(r, 500));
      for (let i = 0; i < scenario.highProbes && !burstDone; i++) {
        const at = performance.now() - burstAt;
        sent.push(
          judgeOnce(server.url, corpus, scenario.from + 950_000 + i, true).then((ms) => {
            highs.push({ at, ms });
            if (process.env['BENCH_DEBUG'] !== undefined)
              console.error(`high probe ${i} at ${Math.round(at)} ms: ${Math.round(ms)} ms`);
          }),
        );
        await new Promise((r) => setTimeout(r, PROBE_EVERY_MS));
      }
      await Promise.all(sent);
    })();
    void burst.then(() => {
      burstDone = true;
    });
    const debug =
      process.env['BENCH_DEBUG'] === undefined
        ? undefined
        : setInterval(() => {
            const r = server.router.backends()[0]?.replicas?.()[0];
            void request(`${server.url}/readyz`).then(async (res) => {
              const ready = (await res.body.json()) as { judgments?: unknown };
              console.error(
                JSON.stringify({
                  limit: r?.limit,
                  inflight: r?.inflight,
                  waiting: r?.waiting,
                  engine: r?.control?.engine,
                  cap: r?.control?.capacity,
                  sat: r?.control?.saturated,
                  law: r?.control?.law,
                  judgments: ready.judgments,
                }),
              );
            });
          }, 250);
    const [report] = await Promise.all([burst, probes]);
    if (debug !== undefined) clearInterval(debug);
    const [stats] = [(await engines.stats())[scenario.engine]];
    if (stats === undefined) throw new Error('no engine stats');
    const attempts = report.rollouts.flatMap((o) => o.attempts);
    const refused = attempts.filter((a) => a.code === 'RW_OVERLOADED');
    const admitted = attempts.filter((a) => a.code !== 'RW_OVERLOADED');
    const tailMs =
      (CRITICAL_PATH - 1) * (scenario.spec.tokens ?? 8) * stepOf(scenario.spec, scenario.spec.slots);
    const boundS = (stats.boundMs + tailMs) / 1000;
    const wallS =
      (Math.max(...admitted.map((a) => a.answeredAt), report.startedAt) - report.startedAt) / 1000;
    const unloadedMs = median(unloaded);
    // Probes answered after the burst's last reward were not delayed by it; keep those sent before.
    const burstMs = report.endedAt - report.startedAt;
    const during = highs.filter((h) => h.at < burstMs);
    const highMedianMs = median(during.filter((h) => Number.isFinite(h.ms)).map((h) => h.ms));
    const highRefused = during.filter((h) => !Number.isFinite(h.ms)).length;
    return {
      name: scenario.name,
      slots: scenario.spec.slots,
      rollouts: scenario.rollouts,
      wallS,
      boundS,
      ratio: wallS / boundS,
      lost: report.rollouts.filter((o) => o.reward === undefined).length,
      refused: refused.length,
      refusalMaxS: Math.max(0, ...refused.map((a) => (a.answeredAt - a.sentAt) / 1000)),
      admittedFailed: admitted.filter((a) => a.status !== 200).length,
      engineQueuePeak: stats.maxWaiting,
      unloadedMs,
      highMedianMs,
      highRefused,
      highRatio: highMedianMs / unloadedMs,
    };
  } finally {
    await server.app.close();
    await Promise.all(server.router.backends().map(async (b) => b.close?.()));
  }
}

/**
 * One engine spec per size: a larger batch gets longer steps (a bigger model, or longer replies), so that
 * every size runs ~40–200 calls/s and the suite's own CPU (three processes on a shared 2-core machine)
 * does not decide the timing. 8 slots: 8 ms steps (192 ms per call at a full batch); 32: 12 ms (288 ms);
 * 128: 24 ms (576 ms).
 */
export const ENGINE_SPEC = (slots: number): EngineOptions => ({
  slots,
  stepMs: slots >= 128 ? 3 * STEP_MS : slots >= 32 ? 1.5 * STEP_MS : STEP_MS,
  tokens: TOKENS,
  slowdown: SLOWDOWN,
});

/** Rollouts whose work at a full batch takes `seconds` on an engine of `slots` (3 calls per rollout). */
export function rolloutsFor(slots: number, seconds: number): number {
  const spec = ENGINE_SPEC(slots);
  const callS = ((spec.tokens ?? TOKENS) * stepOf(spec, slots)) / 1000;
  return Math.max(16, Math.round((seconds * slots) / callS / 3));
}

const SETTINGS: Record<string, Record<string, string>> = {
  engine: {},
  fixed: { JUDGE_INFLIGHT_CONTROL: 'fixed' },
  aimd: { JUDGE_INFLIGHT_CONTROL: 'aimd' },
};

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      runs: { type: 'string', default: '1' },
      slots: { type: 'string', default: '8,32,128' },
      settings: { type: 'string', default: 'fixed,aimd,engine' },
      seconds: { type: 'string', default: '5' },
      /** The client's deadline (`x-reward-deadline-ms`) and policy: a burst that does not fit it. */
      'client-deadline-ms': { type: 'string' },
      policy: { type: 'string', default: 'openrlhf' },
      markdown: { type: 'boolean', default: false },
      'lying-gauges': { type: 'boolean', default: false },
    },
  });
  const lying = values['lying-gauges'] === true;
  const specOf = (slots: number): EngineOptions => ({ ...ENGINE_SPEC(slots), lyingGauges: lying });
  const sizes = (values.slots ?? '').split(',').map(Number);
  const settings = (values.settings ?? '').split(',');
  const corpus = loadCorpus();
  const engines = await startEngines(sizes.map(specOf));
  const client = startLoadClient();
  const rows: ScenarioResult[] = [];
  let from = 0;
  try {
    for (let run = 0; run < Number(values.runs); run++) {
      for (const [e, slots] of sizes.entries()) {
        for (const setting of settings) {
          const env = SETTINGS[setting];
          if (env === undefined) throw new Error(`unknown setting ${setting}`);
          const rollouts = rolloutsFor(slots, Number(values.seconds));
          const r = await runScenario(corpus, engines, client, {
            name: setting,
            engine: e,
            spec: specOf(slots),
            env,
            rollouts,
            from,
            policy: values.policy === 'once' ? 'once' : 'openrlhf',
            clientDeadlineMs:
              values['client-deadline-ms'] === undefined ? undefined : Number(values['client-deadline-ms']),
            highProbes: 40,
          });
          from += 1_000_000;
          rows.push(r);
          console.error(JSON.stringify(r));
        }
      }
    }
  } finally {
    await client.close();
    await engines.close();
  }
  if (values.markdown) {
    console.log(
      '| S | setting | rollouts | wall / bound | lost | engine queue peak | high-priority median / unloaded |',
    );
    console.log('|---:|---|---:|---:|---:|---:|---:|');
    for (const r of rows)
      console.log(
        `| ${r.slots} | ${r.name} | ${r.rollouts} | ${r.ratio.toFixed(2)} (${r.wallS.toFixed(1)} s / ${r.boundS.toFixed(1)} s) | ${r.lost} | ${r.engineQueuePeak} | ${r.highRatio.toFixed(2)} (${Math.round(r.highMedianMs)} / ${Math.round(r.unloadedMs)} ms${r.highRefused > 0 ? `; ${r.highRefused} refused` : ''}) |`,
      );
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main();
