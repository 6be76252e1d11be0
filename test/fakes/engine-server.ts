/**
 * Fake continuous-batching engines (engine.ts) in their own process, so their timing is not the reward
 * server's event loop (a GPU engine is not inside it either):
 *
 *   node --import tsx test/fakes/engine-server.ts '[{"slots": 8, "stepMs": 15}, {"slots": 32, "stepMs": 15}]'
 *
 * Starts one fake OpenAI server per engine spec (every reply `universalReply('match')`, no call recording),
 * prints `LISTENING <baseURL>` per engine in order, then answers `STATS` on stdin with
 * `STATS [<engine stats>, …]` and `RESET` by clearing them. Exits when stdin closes (bench/child.ts).
 */
import { onCommand, send } from '../../bench/child.js';
import type { EngineOptions } from './engine.js';
import { startFakeOpenAI, universalReply, type FakeOpenAI } from './openai.js';

const specs = JSON.parse(process.argv[2] ?? '[]') as EngineOptions[];
if (!Array.isArray(specs) || specs.length === 0 || specs.length > 16) throw new Error('1–16 engine specs');
const fakes: FakeOpenAI[] = [];
for (const engine of specs) {
  const fake = await startFakeOpenAI({
    engine,
    fallback: { kind: 'json', body: universalReply('match', 0.9) },
    record: false,
  });
  fakes.push(fake);
  process.stdout.write(`LISTENING ${fake.baseURL}\n`);
}
onCommand('STATS', () =>
  send(
    'STATS',
    fakes.map((f) => f.engine?.stats()),
  ),
);
onCommand('RESET', () => {
  for (const f of fakes) f.engine?.resetStats();
});
