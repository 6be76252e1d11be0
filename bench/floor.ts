/**
 * The floor client (a separate process): bench/floor-client.ts's judgments, straight against the backend, with
 * no server in between. Protocol: bench/child.ts; prints `RESULT <FloorResult>`.
 *
 * `--group-size g --concurrency c`: c workers, each runs g judgments at once and waits for all of them
 * (g = 1: a sliding window of c judgments; g = 16, c = 1: one GRPO group at a time).
 */
import { parseArgs } from 'node:util';

import { readyThenGo, send } from './child.js';
import { DEFAULT_DATASET, loadCorpus, tripleAt, type Corpus } from './data.js';
import { drive, type Driven } from './drive.js';
import { createFloorClient, type FloorClient, type FloorResult } from './floor-client.js';
import { latencySummary } from './stats.js';

function parseFloorArgs() {
  const { values } = parseArgs({
    options: {
      base: { type: 'string' },
      model: { type: 'string', default: 'bench-model' },
      start: { type: 'string', default: '0' },
      count: { type: 'string', default: '1000' },
      concurrency: { type: 'string', default: '256' },
      'group-size': { type: 'string', default: '1' },
      'max-seconds': { type: 'string', default: '60' },
      warmup: { type: 'string', default: '0' },
      dataset: { type: 'string', default: DEFAULT_DATASET },
    },
    strict: true,
  });
  if (values.base === undefined) throw new Error('--base is required');
  return {
    base: new URL(values.base),
    model: values.model,
    start: Number(values.start),
    count: Number(values.count),
    concurrency: Number(values.concurrency),
    groupSize: Number(values['group-size']),
    maxMs: Number(values['max-seconds']) * 1000,
    warmup: Number(values.warmup),
    dataset: values.dataset,
  };
}

type FloorArgs = ReturnType<typeof parseFloorArgs>;

/**
 * `total` judgments from index `first` in groups of `groupSize`, `concurrency` groups at a time, bounded by
 * `maxMs`; each group's latency goes to `groupLatencies` when given.
 */
function driveGroups(
  client: FloorClient,
  corpus: Corpus,
  args: FloorArgs,
  first: number,
  total: number,
  groupLatencies?: number[],
): Promise<Driven> {
  const { groupSize } = args;
  return drive(Math.ceil(total / groupSize), args.concurrency, args.maxMs, async (g) => {
    const size = Math.min(groupSize, total - g * groupSize);
    const started = performance.now();
    await Promise.all(
      Array.from({ length: size }, (_, j) => client.judgment(tripleAt(corpus, first + g * groupSize + j))),
    );
    groupLatencies?.push(performance.now() - started);
  });
}

async function main(): Promise<void> {
  const args = parseFloorArgs();
  const corpus = loadCorpus(args.dataset);
  const client = createFloorClient({
    base: args.base,
    model: args.model,
    connections: args.concurrency * args.groupSize * 2,
    timeoutMs: args.maxMs + 30_000,
  });
  const { counts } = client;
  const errorOf = (run: Driven): void => {
    if (run.error !== undefined) counts.firstError ??= run.error;
  };

  // Warm-up (JIT, keep-alive connections) before READY, so that the measured run starts warm like the server.
  if (args.warmup > 0) {
    errorOf(await driveGroups(client, corpus, args, args.start, args.warmup));
    counts.latencies.length = 0;
    counts.judgments = 0;
    counts.calls = 0;
  }
  await readyThenGo();
  const groupLatencies: number[] = [];
  const cpu0 = process.cpuUsage();
  const run = await driveGroups(client, corpus, args, args.start, args.count, groupLatencies);
  errorOf(run);
  const cpu = process.cpuUsage(cpu0);
  const result: FloorResult = {
    judgments: counts.judgments,
    calls: counts.calls,
    failedCalls: counts.failedCalls,
    ...(counts.firstError === undefined ? {} : { firstError: counts.firstError }),
    wallMs: run.wallMs,
    latency: latencySummary(counts.latencies),
    groupLatency: latencySummary(groupLatencies),
    cpuMs: (cpu.user + cpu.system) / 1000,
    timedOut: run.timedOut,
  };
  await client.close();
  send('RESULT', result);
}

await main();
