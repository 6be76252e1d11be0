/**
 * The fake OpenAI backend (test/fakes/openai.ts) as a benchmark process: fixed latency, unlimited
 * concurrency unless `--slots N`, no call recording. Prints `LISTENING <baseURL>`; answers `STATS` on stdin with
 * `STATS {"calls", "maxInflight", "inflight", "maxServing", "servedMs"}` and `RESET` by clearing the in-flight peak, so the
 * orchestrator counts backend calls independently of the server. Exits when stdin closes or on SIGTERM.
 */
import { parseArgs } from 'node:util';
import { startFakeOpenAI, universalReply } from '../test/fakes/openai.js';
import { onCommand, send } from './child.js';

const { values } = parseArgs({
  options: {
    'latency-ms': { type: 'string', default: '20' },
    /** Serving slots (FIFO queueing beyond them); unset = unlimited. */
    slots: { type: 'string' },
    port: { type: 'string', default: '0' },
    /** `universal` (every judgment role) or `comparison` (the pairwise comparison role). */
    reply: { type: 'string', default: 'universal' },
  },
  strict: true,
});

const fake = await startFakeOpenAI({
  port: Number(values.port),
  latencyMs: Number(values['latency-ms']),
  ...(values.slots === undefined ? {} : { slots: Number(values.slots) }),
  fallback:
    values.reply === 'comparison'
      ? { kind: 'json', body: { reasoning: 'bench', winner: 'A', margin: 'slight', confidence: 0.6 } }
      : { kind: 'json', body: universalReply('match', 0.9) },
  record: false,
});

onCommand('STATS', () =>
  send('STATS', {
    calls: fake.callCount,
    maxInflight: fake.maxInflight,
    inflight: fake.inflight(),
    maxServing: fake.maxServing,
    servedMs: fake.servedMs,
  }),
);
onCommand('RESET', () => fake.resetStats());

const stop = (): void => {
  void fake.close().then(() => process.exit(0));
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
process.stdout.write(`LISTENING ${fake.baseURL}\n`);
