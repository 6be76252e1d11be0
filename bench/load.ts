/**
 * Load generator (a separate process): keep-alive undici Pool, a bounded number of requests in flight,
 * bounded in count and in time (bench/drive.ts), the answers counted by bench/load-tally.ts. Started by
 * the orchestrator (bench/scenarios.ts) with the protocol of bench/child.ts; prints `RESULT <LoadResult>`.
 *
 *   --mode groups    POST /v1/reward, one GRPO group of --group-size unique candidates per request
 *   --mode rollouts  POST /get_reward (OpenRLHF), one rollout per request
 */
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { readyThenGo, send } from './child.js';
import { BLOCK, DEFAULT_DATASET, groupBody, loadCorpus, rolloutBody, type Corpus } from './data.js';
import { drive } from './drive.js';
import { createLoadTally } from './load-tally.js';

interface LoadArgs {
  url: URL;
  mode: 'groups' | 'rollouts';
  start: number;
  count: number;
  concurrency: number;
  groupSize: number;
  maxMs: number;
  dataset: string;
  graph: string;
}

function parseLoadArgs(): LoadArgs {
  const { values } = parseArgs({
    options: {
      url: { type: 'string' },
      mode: { type: 'string', default: 'rollouts' },
      start: { type: 'string', default: '0' },
      count: { type: 'string', default: '1000' },
      concurrency: { type: 'string', default: '256' },
      'group-size': { type: 'string', default: String(BLOCK) },
      'max-seconds': { type: 'string', default: '60' },
      dataset: { type: 'string', default: DEFAULT_DATASET },
      graph: { type: 'string', default: 'analysts-2' },
    },
    strict: true,
  });
  if (values.url === undefined) throw new Error('--url is required');
  const mode = values.mode;
  if (mode !== 'groups' && mode !== 'rollouts') throw new Error(`--mode: groups or rollouts, got ${mode}`);
  const url = new URL(values.url);
  if (url.hostname !== '127.0.0.1' && url.hostname !== 'localhost') throw new Error('loopback only');
  return {
    url,
    mode,
    start: Number(values.start),
    count: Number(values.count),
    concurrency: Number(values.concurrency),
    groupSize: Number(values['group-size']),
    maxMs: Number(values['max-seconds']) * 1000,
    dataset: values.dataset,
    graph: values.graph,
  };
}

/** Request `i`'s body and judgments: a group of `groupSize` (the last one maybe shorter), or one rollout. */
function requestOf(args: LoadArgs, corpus: Corpus, i: number): { body: string; items: number } {
  const { mode, start, count, groupSize, graph } = args;
  if (mode === 'rollouts') return { body: rolloutBody(corpus, start + i), items: 1 };
  const items = Math.min(groupSize, count - i * groupSize);
  return { body: groupBody(corpus, start + i * BLOCK, items, graph), items };
}

async function main(): Promise<void> {
  const args = parseLoadArgs();
  const { mode, concurrency, maxMs } = args;
  const requests = Math.ceil(args.count / (mode === 'groups' ? args.groupSize : 1));
  const corpus = loadCorpus(args.dataset);
  const pool = new Pool(args.url.origin, {
    connections: concurrency,
    pipelining: 1,
    keepAliveTimeout: 60_000,
    headersTimeout: maxMs + 30_000,
    bodyTimeout: maxMs + 30_000,
  });
  const path = mode === 'groups' ? '/v1/reward' : '/get_reward';
  const headers = { 'content-type': 'application/json' };
  const tally = createLoadTally(mode);

  await readyThenGo();
  const cpu0 = process.cpuUsage();
  const run = await drive(requests, concurrency, maxMs, async (i) => {
    const { body, items } = requestOf(args, corpus, i);
    const sent = performance.now();
    try {
      const res = await pool.request({ method: 'POST', path, headers, body });
      const text = await res.body.text();
      tally.answered(res.statusCode, text, items, performance.now() - sent);
    } catch (err) {
      tally.failed(err, items);
    }
  });
  const cpu = process.cpuUsage(cpu0);
  const result = tally.finish({
    requests: run.done,
    wallMs: run.wallMs,
    cpuMs: (cpu.user + cpu.system) / 1000,
    timedOut: run.timedOut,
  });
  await pool.close();
  send('RESULT', result);
}

await main();
