/**
 * A/B of server builds or node flags on the /get_reward scenario, variants interleaved round by round, each
 * on fresh fake + server processes (used to measure prototype changes made in a scratch copy):
 *
 *   npx tsx bench/ab.ts --rounds 3 --judgments 10000 \
 *     'base=dist/server/main.js' 'proto=/tmp/proto/dist/server/main.js' \
 *     'semi32=dist/server/main.js::--max-semi-space-size=32'
 *
 * A variant is NAME=ENTRY[::NODE FLAGS[::ENV]] with ENV as space-separated K=V server variables, e.g.
 * 'fixed=dist/server/main.js::--max-semi-space-size=32::JUDGE_ADAPTIVE_INFLIGHT=false'. Prints one line
 * per run and the median per variant.
 */
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { waitQuiet } from './measure.js';
import { DEFAULT_OPTIONS, ROOT, type BenchOptions } from './options.js';
import { runScenario, type ScenarioResult } from './scenarios.js';
import { makeLogDir, startFake, startServer } from './services.js';
import { installCleanup, procMemMb, stopProcess } from './procs.js';
import { fmtSpread, spread } from './stats.js';

const { values, positionals } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    judgments: { type: 'string', default: '10000' },
    warmup: { type: 'string', default: '2000' },
    mode: { type: 'string', default: 'rollouts' },
    'wait-quiet': { type: 'string', default: '300' },
  },
  allowPositionals: true,
  strict: true,
});

interface Variant {
  name: string;
  entry: string;
  nodeArgs: string[];
  env: Record<string, string>;
}

const variants: Variant[] = positionals.map((spec) => {
  const eq = spec.indexOf('=');
  if (eq < 1) throw new Error(`variant ${spec}: expected NAME=ENTRY[::NODE FLAGS[::ENV]]`);
  const [entry = '', flags = '', env = ''] = spec.slice(eq + 1).split('::');
  const pairs = env
    .split(' ')
    .filter((kv) => kv.includes('='))
    .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)] as const);
  return {
    name: spec.slice(0, eq),
    entry: resolve(ROOT, entry),
    nodeArgs: flags.split(' ').filter((f) => f !== ''),
    env: Object.fromEntries(pairs),
  };
});
if (variants.length === 0) throw new Error('give at least one variant NAME=ENTRY[::NODE FLAGS]');
if (values.mode !== 'rollouts' && values.mode !== 'groups') throw new Error('--mode: rollouts or groups');
const mode: 'rollouts' | 'groups' = values.mode;
const judgments = Number(values.judgments);
const warmup = Number(values.warmup);

interface Row {
  scenario: ScenarioResult;
  hwmMb: number;
}

async function once(v: Variant, logDir: string): Promise<Row> {
  const options: BenchOptions = {
    ...DEFAULT_OPTIONS,
    serverEntry: v.entry,
    serverNodeArgs: v.nodeArgs,
    serverEnv: v.env,
    log: (line) => console.error(`[ab] ${line}`),
  };
  const fake = await startFake(options.latencyMs);
  try {
    const server = await startServer(options, fake, logDir);
    try {
      await runScenario(options, server, fake, {
        name: 'warm-up',
        mode: 'rollouts',
        start: 0,
        count: warmup,
        concurrency: options.inflight,
        maxSeconds: options.maxScenarioSeconds,
      });
      const scenario = await runScenario(options, server, fake, {
        name: v.name,
        mode,
        start: Math.ceil(warmup / 16) * 16,
        count: judgments,
        concurrency: mode === 'groups' ? options.inflight / options.groupSize : options.inflight,
        maxSeconds: options.maxScenarioSeconds,
      });
      return { scenario, hwmMb: procMemMb(server.proc.pid).hwmMb };
    } finally {
      await stopProcess(server.proc, 10_000);
    }
  } finally {
    fake.proc.child.stdin?.end();
    await stopProcess(fake.proc, 5_000);
  }
}

const uninstall = installCleanup();
try {
  const logDir = makeLogDir();
  const rows = new Map<string, Row[]>();
  for (let r = 0; r < Number(values.rounds); r++) {
    for (const v of variants) {
      const background = await waitQuiet(Number(values['wait-quiet']), (l) => console.error(`[ab] ${l}`));
      const row = await once(v, logDir);
      const s = row.scenario;
      console.log(
        `${v.name}: ${s.judgmentsPerSecond.toFixed(0)} judgments/s, ${s.serverCpuMsPerCall.toFixed(3)} ms CPU/call, ` +
          `server ${s.serverCores.toFixed(2)} cores, p50 ${s.load.latency.p50.toFixed(1)} ms, peak RSS ${row.hwmMb.toFixed(0)} MB, ` +
          `other processes ${s.otherCores.toFixed(2)} cores (before ${background.toFixed(2)}), failed ${s.load.failed}`,
      );
      rows.set(v.name, [...(rows.get(v.name) ?? []), row]);
    }
  }
  console.log('\n| variant | judgments/s | server CPU ms / call | peak RSS, MB |\n|---|---:|---:|---:|');
  for (const v of variants) {
    const xs = rows.get(v.name) ?? [];
    console.log(
      `| ${v.name} | ${fmtSpread(spread(xs.map((x) => x.scenario.judgmentsPerSecond)))} | ` +
        `${fmtSpread(spread(xs.map((x) => x.scenario.serverCpuMsPerCall)), 3)} | ${fmtSpread(spread(xs.map((x) => x.hwmMb)))} |`,
    );
  }
} finally {
  uninstall();
}
