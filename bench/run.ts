/**
 * Load benchmark of the reward server against the fake OpenAI backend (issue 6). `npm run bench` builds
 * the server and runs this file:
 *
 *   npm run bench                      # full suite: 3 runs × 8000 judgments per scenario → bench/results/<date>.md
 *   npm run bench -- --quick           # 3 short runs (< 2 min), prints the ratios, writes nothing
 *   npm run bench -- --soak            # 5 min of /get_reward at 256 in flight, RSS every 30 s → <date>-soak.md
 *   npm run bench -- --profile         # /get_reward under node --cpu-prof, top functions → <date>-profile.md
 *
 * Options: --runs N --judgments N --warmup N --light-groups N --latency-ms L --inflight N
 * --judge-max-inflight N --max-seconds S (per scenario) --soak-seconds S --soak-interval S --server dist|src
 * --node-args="FLAGS" (extra node flags for the server; note the =) --server-entry PATH (another build's main.js) --wait-quiet S (wait up to S s for other processes to
 * go idle before each run) --out FILE (--out - prints the markdown to stdout). Everything runs on 127.0.0.1; every child is killed on exit.
 */
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { parseArgs } from 'node:util';
import { runProfiled, runSoak, runSuite } from './harness.js';
import { DEFAULT_OPTIONS, ROOT, type BenchOptions } from './options.js';
import { installCleanup } from './procs.js';
import { loadProfile, profileMarkdown, summarizeProfile } from './profile.js';
import { environment, soakMarkdown, suiteConsole, suiteMarkdown } from './report.js';
import { fmt } from './stats.js';

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    soak: { type: 'boolean', default: false },
    profile: { type: 'boolean', default: false },
    runs: { type: 'string' },
    judgments: { type: 'string' },
    warmup: { type: 'string' },
    'light-groups': { type: 'string' },
    'latency-ms': { type: 'string' },
    inflight: { type: 'string' },
    'judge-max-inflight': { type: 'string' },
    'soak-seconds': { type: 'string', default: '300' },
    'soak-interval': { type: 'string', default: '30' },
    'max-seconds': { type: 'string' },
    'wait-quiet': { type: 'string', default: '0' },
    'node-args': { type: 'string', default: '--max-semi-space-size=32' }, // as `npm start` runs it
    'server-entry': { type: 'string' },
    server: { type: 'string', default: 'dist' },
    out: { type: 'string' },
  },
  strict: true,
});

function positiveInt(name: string, raw: string | undefined, fallback: number): number {
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name}: expected a positive integer, got ${raw}`);
  return n;
}

const quick = values.quick;
const server = values.server;
if (server !== 'dist' && server !== 'src') throw new Error(`--server: dist or src, got ${server}`);
const inflight = positiveInt('inflight', values.inflight, DEFAULT_OPTIONS.inflight);
const options: BenchOptions = {
  ...DEFAULT_OPTIONS,
  runs: positiveInt('runs', values.runs, 3),
  judgments: positiveInt('judgments', values.judgments, quick ? 2000 : DEFAULT_OPTIONS.judgments),
  warmupJudgments: positiveInt('warmup', values.warmup, quick ? 500 : DEFAULT_OPTIONS.warmupJudgments),
  lightGroups: positiveInt('light-groups', values['light-groups'], quick ? 10 : DEFAULT_OPTIONS.lightGroups),
  latencyMs: positiveInt('latency-ms', values['latency-ms'], DEFAULT_OPTIONS.latencyMs),
  inflight,
  judgeMaxInflight: positiveInt('judge-max-inflight', values['judge-max-inflight'], 2 * inflight),
  quietWaitSeconds: Number(values['wait-quiet']),
  serverEntry: values['server-entry'],
  serverNodeArgs: values['node-args'].split(' ').filter((a) => a !== ''),
  budgetSeconds: quick ? 90 : DEFAULT_OPTIONS.budgetSeconds,
  maxScenarioSeconds: positiveInt(
    'max-seconds',
    values['max-seconds'],
    quick ? 20 : DEFAULT_OPTIONS.maxScenarioSeconds,
  ),
  server,
  log: (line) => console.error(`[bench] ${line}`),
};

if (server === 'dist' && !existsSync(values['server-entry'] ?? join(ROOT, 'dist/server/main.js'))) {
  throw new Error('dist/server/main.js is missing: run `npm run build` first (npm run bench does)');
}

const date = new Date().toISOString().slice(0, 10);
const defaultOut = (suffix: string): string => join(ROOT, 'bench', 'results', `${date}${suffix}.md`);

function write(markdown: string, fallback: string | undefined, title: string, command: string): void {
  const out = values.out ?? fallback;
  const doc = `# ${title} (${date})\n\nReproduce: \`${command}\`\n\n${markdown}\n`;
  if (out === undefined || out === '-') {
    console.log(`\n${doc}`);
    return;
  }
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, doc);
  console.error(`[bench] wrote ${relative(process.cwd(), out)}`);
}

const uninstall = installCleanup();
try {
  if (values.soak) {
    const seconds = positiveInt('soak-seconds', values['soak-seconds'], 300);
    const result = await runSoak(options, seconds, positiveInt('soak-interval', values['soak-interval'], 30));
    write(soakMarkdown(result), defaultOut('-soak'), 'Soak', 'npm run bench -- --soak');
    console.log(`soak: RSS growth minute 1 → end ${fmt(result.growth * 100, 1)}%`);
  } else if (values.profile) {
    const dir = mkdtempSync(join(tmpdir(), 'reward-prof-'));
    const run = await runProfiled(options, dir);
    const summary = summarizeProfile(loadProfile(run.profilePath), 25);
    const sc = run.scenario;
    const head =
      `CPU profile of \`node --cpu-prof dist/server/main.js\` during /get_reward at ${options.inflight} in flight ` +
      `(${sc.load.judgments} judgments after a ${options.warmupJudgments}-judgment warm-up, L = ${options.latencyMs} ms; ` +
      `the profile covers the whole server life). Under the profiler: ${fmt(sc.judgmentsPerSecond)} judgments/s, ` +
      `${fmt(sc.serverCpuMsPerCall, 3)} ms server CPU per backend call. ${environment()}. Profile: \`${run.profilePath}\`.`;
    write(
      `${head}\n\n${profileMarkdown(summary)}`,
      defaultOut('-profile'),
      'Server CPU profile',
      'npm run bench -- --profile',
    );
  } else {
    const result = await runSuite(options);
    const command = quick ? 'npm run bench -- --quick' : 'npm run bench';
    write(suiteMarkdown(result), quick ? undefined : defaultOut(''), 'Benchmark', command);
    console.log(suiteConsole(result));
    console.error(`[bench] done in ${fmt(result.durationMs / 1000, 1)} s`);
  }
} finally {
  uninstall();
}
