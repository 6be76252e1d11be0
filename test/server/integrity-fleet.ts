/**
 * A judge fleet for the integrity suites: N fake OpenAI-compatible servers (one per replica, real HTTP on
 * 127.0.0.1), each with a switchable behaviour, behind one app whose JUDGE_BASE_URL lists them all; and a
 * canary set on disk whose rows carry a marker, so a call can be told to be a canary's.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

import type { FastifyInstance } from 'fastify';

import { loadConfig, type Config } from '../../src/config.js';
import { createOfflineBackend } from '../../src/judge/backends/offline.js';
import { createRouter } from '../../src/judge/routing.js';
import type { Router } from '../../src/judge/types.js';
import { buildApp } from '../../src/server/http/app.js';
import { createMetrics } from '../../src/server/observe/metrics.js';
import type { Metrics } from '../../src/server/observe/metric-types.js';
import type { TranscriptSink } from '../../src/server/observe/transcripts.js';
import type { CanaryLog } from '../../src/state/canary-log.js';
import { createDriftingJudge, type DriftingJudge } from '../fakes/drifting.js';
import { startFakeOpenAI, universalReply, type FakeChatRequest, type FakeOpenAI } from '../fakes/openai.js';
import { GOOD, GROUND_TRUTH, QUESTION, logLines } from './helpers.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- response bodies are checked field by field
export type Json = any;

/** Every canary candidate contains this word: a call whose prompt has it is a canary's. */
export const CANARY_MARK = 'CANARYROW';
/** Canary candidates with this word are the ones a `flaky` replica gets wrong. */
export const HARD_MARK = 'HARDROW';
/** Long canary candidates carry this word (a `drift` replica with `longOnly` errs only on them). */
export const LONG_MARK = 'LONGROW';

/**
 * `healthy`: stance from the GOOD marker (correct on every canary); `match`: always `match` with valid
 * JSON; `flaky`: like healthy but wrong on HARD_MARK rows; `down`: HTTP 500; `drift`: the replica's
 * drifting judge (`Fleet.drift`), wrong with the per-call probability the test sets.
 */
export type Mode = 'healthy' | 'match' | 'flaky' | 'down' | 'drift';

export interface Fleet {
  app: FastifyInstance;
  fakes: FakeOpenAI[];
  modes: Mode[];
  /** Per replica: the drifting judge that answers in mode `drift`. */
  drift: DriftingJudge[];
  metrics: Metrics;
  config: Config;
  router: Router;
  log: Array<Record<string, unknown>>;
  close(): Promise<void>;
}

/**
 * A canary set of `rows` rows (half `match`, half not), every `hardEvery`-th of them marked hard; each row
 * its own ground truth. Returns the file path.
 */
export function writeCanaries(dir: string, rows: number, hardEvery = 0, longEvery = 0): string {
  const lines: string[] = [];
  for (let i = 0; i < rows; i++) {
    const positive = i % 2 === 0;
    const hard = hardEvery > 0 && i % hardEvery === hardEvery - 1;
    const long = longEvery > 0 && i % longEvery === longEvery - 1;
    const tail = long
      ? ` ${LONG_MARK} ${'and mine harder negatives from the index every epoch '.repeat(12)}`
      : '';
    lines.push(
      JSON.stringify({
        id: `canary:${i}`,
        question: QUESTION,
        candidate: `Canary ${i}: ${CANARY_MARK} ${positive ? GOOD : 'plainidea'} ${hard ? HARD_MARK : ''} pair encoders with a contrastive loss.${tail}`,
        ground_truth: `${GROUND_TRUTH} (canary paper ${i})`,
        label: positive ? 1 : 0,
        kind: positive ? 'positive' : 'hard_negative',
        source: 'test',
        venue: 'synthetic',
        area: 'test',
      }),
    );
  }
  const path = join(dir, 'canaries.jsonl');
  writeFileSync(path, `${lines.join('\n')}\n`);
  return path;
}

function reply(mode: Mode, body: FakeChatRequest, drift: DriftingJudge) {
  const user = body.messages?.find((m) => m.role === 'user')?.content ?? '';
  const good = user.includes(GOOD);
  switch (mode) {
    case 'healthy':
      return { kind: 'json' as const, body: universalReply(good ? 'match' : 'no_match', 0.9) };
    case 'match':
      return { kind: 'json' as const, body: universalReply('match', 0.9) };
    case 'flaky': {
      const wrong = user.includes(HARD_MARK);
      return { kind: 'json' as const, body: universalReply(good !== wrong ? 'match' : 'no_match', 0.9) };
    }
    case 'down':
      return { kind: 'status' as const, status: 500 };
    case 'drift':
      return drift.reply(body);
  }
}

export interface FleetOptions {
  replicas: number;
  /** Environment on top of the fleet's (a function sees the fakes, e.g. to write a routing file). */
  env: Record<string, string> | ((fakes: readonly FakeOpenAI[]) => Record<string, string>);
  mode?: Mode;
  transcripts?: TranscriptSink;
  canaryLog?: CanaryLog;
}

export async function startFleet(options: FleetOptions): Promise<Fleet> {
  const modes: Mode[] = Array.from({ length: options.replicas }, () => options.mode ?? 'healthy');
  const drift = modes.map((_, i) => createDriftingJudge({ good: GOOD, seed: 1000 + i }));
  const fakes: FakeOpenAI[] = [];
  for (let i = 0; i < options.replicas; i++) {
    const judge = drift[i] ?? createDriftingJudge({ good: GOOD, seed: i });
    fakes.push(await startFakeOpenAI({ fallback: (body) => reply(modes[i] ?? 'healthy', body, judge) }));
  }
  const config = loadConfig({
    JUDGE_BASE_URL: fakes.map((f) => f.baseURL).join(','),
    JUDGE_MODEL: 'fake-model',
    JUDGE_API_KEY: 'test',
    JUDGE_MAX_RETRIES: '0',
    JUDGE_TIMEOUT_MS: '10000',
    DEFAULT_GRAPH: 'single-judge',
    ...(typeof options.env === 'function' ? options.env(fakes) : options.env),
  });
  const router = createRouter({ ...config.judge, offline: createOfflineBackend });
  const metrics = createMetrics({ recentWindow: config.recentWindow });
  const { stream, lines } = logLines();
  const app = buildApp({
    config,
    router,
    metrics,
    transcripts: options.transcripts,
    canaryLog: options.canaryLog,
    logger: { level: 'warn', stream },
  });
  return {
    app,
    fakes,
    modes,
    drift,
    metrics,
    config,
    router,
    log: lines,
    async close() {
      await app.close();
      await Promise.all(router.backends().map(async (b) => b.close?.()));
      for (const f of fakes) await f.close();
    },
  };
}

let groupSeq = 0;

/** One real group of `n` fresh candidates (never cached), every one `no_match` by the GOOD marker. */
export function realGroup(n: number, good = false): Record<string, unknown> {
  groupSeq += 1;
  return {
    question: QUESTION,
    // A ground truth per group: affinity spreads the groups over the replicas.
    ground_truth: `${GROUND_TRUTH} (real paper ${groupSeq})`,
    candidates: Array.from(
      { length: n },
      (_, i) =>
        `Real idea ${groupSeq}.${i}: ${good ? GOOD : 'plainidea'} train paired encoders with batch negatives.`,
    ),
  };
}

export const integrity = async (app: FastifyInstance): Promise<Json> =>
  (await app.inject({ method: 'GET', url: '/v1/integrity' })).json<Json>();

/** Waits until every canary launched here has reached the ledger (bounded). */
export async function settle(app: FastifyInstance): Promise<Json> {
  for (let i = 0; i < 2000; i++) {
    const report = await integrity(app);
    if (report.canaries.applied >= report.canaries.launched && report.canaries.owed === 0) return report;
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  const last = await integrity(app);
  throw new Error(
    `canaries did not settle: ${JSON.stringify({ ...last.canaries, replicas: undefined, members: undefined })}`,
  );
}

/** Sends groups of `size` until `stop(report)` holds or `maxJudgments` were sent; returns judgments sent. */
export async function driveUntil(
  app: FastifyInstance,
  stop: (report: Json) => boolean,
  maxJudgments: number,
  size = 16,
): Promise<number> {
  let sent = 0;
  while (sent < maxJudgments) {
    const res = await app.inject({ method: 'POST', url: '/v1/reward', payload: realGroup(size) });
    if (res.statusCode !== 200) throw new Error(`reward answered ${res.statusCode}: ${res.body}`);
    sent += size;
    if (stop(await settle(app))) return sent;
  }
  return sent;
}

export const replicaOf = (report: Json, fake: FakeOpenAI): Json =>
  report.canaries.replicas.find((r: Json) => fake.baseURL.includes(r.replica));
