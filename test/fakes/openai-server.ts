/**
 * The fake OpenAI backend as a standalone process, for benchmarks:
 *
 *   npx tsx test/fakes/openai-server.ts --port 0 --latency-ms 20 --reply match
 *
 * Prints `LISTENING <baseURL>` on stdout once it listens, answers every chat-completions call with
 * `universalReply(reply)` (no call recording), and exits cleanly on SIGTERM/SIGINT after printing
 * `STATS calls=N cpu_ms=X max_inflight=M` on stderr.
 * `--reply alternate` answers match / no_match in turn. `--match-marker TEXT` answers match exactly when a call's
 * messages contain TEXT (no_match otherwise), and `--fail-marker TEXT` answers HTTP 500 to a call whose messages
 * contain TEXT: so that one process judges some rollouts of a group 1, others 0 and fails the rest.
 */
import { parseArgs } from 'node:util';
import { startFakeOpenAI, universalReply, type FakeChatRequest, type FakeReply } from './openai.js';

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    'latency-ms': { type: 'string', default: '0' },
    reply: { type: 'string', default: 'match' },
    confidence: { type: 'string', default: '0.9' },
    'match-marker': { type: 'string' },
    'fail-marker': { type: 'string' },
  },
  strict: true,
});

const port = Number(values.port);
const latencyMs = Number(values['latency-ms']);
const confidence = Number(values.confidence);
if (!Number.isInteger(port) || port < 0 || port > 65_535) throw new Error(`--port: invalid ${values.port}`);
if (!Number.isFinite(latencyMs) || latencyMs < 0)
  throw new Error(`--latency-ms: invalid ${values['latency-ms']}`);
if (!(confidence >= 0 && confidence <= 1)) throw new Error(`--confidence: invalid ${values.confidence}`);

const match: FakeReply = { kind: 'json', body: universalReply('match', confidence) };
const noMatch: FakeReply = { kind: 'json', body: universalReply('no_match', confidence) };
let turn = 0;
let fallback: FakeReply | (() => FakeReply);
switch (values.reply) {
  case 'match':
    fallback = match;
    break;
  case 'no_match':
    fallback = noMatch;
    break;
  case 'alternate':
    fallback = () => (turn++ % 2 === 0 ? match : noMatch);
    break;
  default:
    throw new Error(`--reply: expected match, no_match or alternate, got ${values.reply}`);
}

const matchMarker = values['match-marker'];
const failMarker = values['fail-marker'];
const text = (body: FakeChatRequest): string => (body.messages ?? []).map((m) => m.content).join('\n');
const reply =
  matchMarker === undefined && failMarker === undefined
    ? fallback
    : (body: FakeChatRequest): FakeReply => {
        const all = text(body);
        if (failMarker !== undefined && all.includes(failMarker)) return { kind: 'status', status: 500 };
        if (matchMarker !== undefined) return all.includes(matchMarker) ? match : noMatch;
        return typeof fallback === 'function' ? fallback() : fallback;
      };

const fake = await startFakeOpenAI({ port, latencyMs, fallback: reply, record: false });
process.stdout.write(`LISTENING ${fake.baseURL}\n`);

const stop = (): void => {
  // One stats line on stderr so a benchmark can report the fake's own cost.
  const cpu = process.cpuUsage();
  process.stderr.write(
    `STATS calls=${fake.callCount} cpu_ms=${((cpu.user + cpu.system) / 1000).toFixed(0)} max_inflight=${fake.maxInflight}\n`,
  );
  fake.close().then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
