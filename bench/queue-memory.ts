/**
 * Bytes per queued judgment: the heap a per-rollout `/get_reward` request costs while its judgment waits
 * for a run slot (request body, parsed item, flight, admission waiter, promises). One run slot, a backend
 * that never answers, N requests through `app.inject` (no sockets: a loopback connection adds the socket
 * and HTTP parser on top), heap measured after a full GC before and once all N are queued.
 *
 *   npx tsx --expose-gc bench/queue-memory.ts [--requests 4000]
 */
import { parseArgs } from 'node:util';

import { loadConfig } from '../src/config.js';
import { createOfflineBackend } from '../src/judge/backends/offline.js';
import { createRouter } from '../src/judge/routing.js';
import { buildApp } from '../src/server/http/app.js';
import { startFakeOpenAI } from '../test/fakes/openai.js';
import { loadCorpus, rolloutBody } from './data.js';

const { values } = parseArgs({ options: { requests: { type: 'string', default: '4000' } }, strict: true });
const n = Number(values.requests);
const gc = globalThis.gc;
if (gc === undefined) throw new Error('run with node --expose-gc (npx tsx --expose-gc …)');

const settle = async (): Promise<number> => {
  for (let i = 0; i < 3; i++) {
    await new Promise((resolve) => setImmediate(resolve));
    gc();
  }
  return process.memoryUsage().heapUsed;
};

const JSON_HEADERS = { 'content-type': 'application/json' };
const corpus = loadCorpus();
const fake = await startFakeOpenAI({ fallback: { kind: 'hang' }, record: false });
const config = loadConfig({
  JUDGE_BASE_URL: fake.baseURL,
  JUDGE_MODEL: 'fake-model',
  MAX_CONCURRENT_JUDGMENTS: '1',
  REQUEST_DEADLINE_MS: '600000',
});
const router = createRouter({ ...config.judge, offline: createOfflineBackend });
const app = buildApp({ config, router });
await app.ready();
const bodies = Array.from({ length: n + 1 }, (_, k) => rolloutBody(corpus, k));
let bodyBytes = 0;
for (const b of bodies) bodyBytes += Buffer.byteLength(b);
// The first request takes the only run slot; the rest queue.
const pending = [
  app.inject({ method: 'POST', url: '/get_reward', payload: bodies[0]!, headers: JSON_HEADERS }),
];
const before = await settle();
for (let k = 1; k <= n; k++)
  pending.push(
    app.inject({ method: 'POST', url: '/get_reward', payload: bodies[k]!, headers: JSON_HEADERS }),
  );
const queued = async (): Promise<number> =>
  (await app.inject({ method: 'GET', url: '/readyz' })).json<{ judgments: { queued: number } }>().judgments
    .queued;
const waitUntil = Date.now() + 60_000;
while ((await queued()) < n && Date.now() < waitUntil) await new Promise((r) => setTimeout(r, 100));
const admission = { judgments: { queued: await queued() } };
const after = await settle();
const perJudgment = (after - before) / n;
console.log(
  JSON.stringify({
    requests: n,
    queued: admission.judgments.queued,
    mean_body_bytes: Math.round(bodyBytes / bodies.length),
    heap_bytes_per_queued_judgment: Math.round(perJudgment),
    heap_mb_at_32768: Math.round((perJudgment * 32_768) / 2 ** 20),
  }),
);
await fake.close();
await app.close();
await Promise.allSettled(pending);
process.exit(0);
