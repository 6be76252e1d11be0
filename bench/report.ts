/** Markdown and console reports for benchmark results, with the issue-6 targets checked. */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { relative } from 'node:path';
import { across, type RepetitionResult, type SoakResult, type SuiteResult } from './harness.js';
import { ROOT } from './options.js';
import type { ScenarioResult } from './scenarios.js';
import { fmt, fmtSpread, spread, type Spread } from './stats.js';

export interface Target {
  what: string;
  goal: string;
  measured: string;
  pass: boolean;
}

export function environment(): string {
  let commit = 'unknown';
  try {
    commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--', 'src'], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    if (dirty.trim() !== '') commit += ' + uncommitted changes in src/';
  } catch {
    // not a git checkout
  }
  let model = cpus()[0]?.model ?? 'unknown CPU';
  try {
    const m = /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'));
    if (m?.[1] !== undefined) model = m[1];
  } catch {
    // not Linux
  }
  return `Node ${process.version}, ${cpus().length} cores (${model}), commit ${commit}`;
}

const ratio = (s: Spread): string => fmtSpread(s, 2);

/** Per-run ratio, then median over runs. */
function ratioAcross(
  runs: RepetitionResult[],
  num: (r: RepetitionResult) => number,
  den: (r: RepetitionResult) => number,
): Spread {
  return spread(runs.map((r) => num(r) / den(r)));
}

export function targets(s: SuiteResult): Target[] {
  const { runs } = s;
  const L = s.options.latencyMs;
  const rolloutRate = across(runs, (r) => r.rollouts.judgmentsPerSecond);
  const floorRatio = ratioAcross(
    runs,
    (r) => r.rollouts.judgmentsPerSecond,
    (r) => r.floor.judgmentsPerSecond,
  );
  const cpu = across(runs, (r) => r.rollouts.serverCpuMsPerCall);
  const light = across(runs, (r) => r.light.load.latency.p50);
  const rss = across(runs, (r) => r.peakRssMb);
  const hits = across(runs, (r) => r.groupsCached.judgmentsPerSecond);
  return [
    {
      what: `judgments/s, /get_reward at ${s.options.inflight} in flight`,
      goal: '≥ 1000',
      measured: fmtSpread(rolloutRate),
      pass: rolloutRate.median >= 1000,
    },
    {
      what: '… ratio to the floor client',
      goal: '≥ 0.6',
      measured: ratio(floorRatio),
      pass: floorRatio.median >= 0.6,
    },
    {
      what: 'server CPU per backend call (/get_reward)',
      goal: '≤ 0.3 ms',
      measured: `${fmtSpread(cpu, 3)} ms`,
      pass: cpu.median <= 0.3,
    },
    {
      what: 'light-load group latency p50 (one group of 16 at a time)',
      goal: `≤ ${fmt(1.2 * 2 * L, 0)} ms (1.2 × 2L)`,
      measured: `${fmtSpread(light, 1)} ms`,
      pass: light.median <= 1.2 * 2 * L,
    },
    {
      what: 'server peak RSS (VmHWM)',
      goal: '≤ 250 MB',
      measured: `${fmtSpread(rss, 0)} MB`,
      pass: rss.max <= 250,
    },
    {
      what: 'cache-hit judgments/s (/v1/reward groups)',
      goal: '≥ 10000',
      measured: fmtSpread(hits),
      pass: hits.median >= 10_000,
    },
  ];
}

function serverCommand(o: SuiteResult['options']): string {
  const entry =
    o.server === 'src'
      ? '--import tsx src/server/main.ts'
      : o.serverEntry === undefined
        ? 'dist/server/main.js'
        : relative(ROOT, o.serverEntry);
  return ['node', ...o.serverNodeArgs, entry].join(' ');
}

type ScenarioPick = (r: RepetitionResult) => ScenarioResult;

/** Cells joined as a Markdown table row. */
const row = (cells: string[]): string => cells.join(' | ').replace(/^/, '| ').concat(' |');

/** A throughput scenario's row: rates, latency, server CPU, and its ratios to the limit and the floor. */
function scenarioRow(s: SuiteResult, label: string, pick: ScenarioPick, latencyLabel: string): string {
  const { runs } = s;
  const limit = s.limitJudgmentsPerSecond;
  const j = across(runs, (r) => pick(r).judgmentsPerSecond);
  return row([
    label,
    fmtSpread(j),
    fmtSpread(across(runs, (r) => pick(r).backendCallsPerSecond)),
    `${latencyLabel} ${fmtSpread(
      across(runs, (r) => pick(r).load.latency.p50),
      1,
    )} / ${fmtSpread(
      across(runs, (r) => pick(r).load.latency.p99),
      1,
    )}`,
    fmtSpread(
      across(runs, (r) => pick(r).serverCpuMsPerCall),
      3,
    ),
    fmtSpread(
      across(runs, (r) => pick(r).serverCores),
      2,
    ),
    ratio(spread(runs.map((r) => pick(r).judgmentsPerSecond / limit))),
    ratio(
      ratioAcross(
        runs,
        (r) => pick(r).judgmentsPerSecond,
        (r) => r.floor.judgmentsPerSecond,
      ),
    ),
  ]);
}

/** A cache-hit scenario's row: rates, latency, the hit share (the server's count when scrapeable). */
function cachedRow(runs: RepetitionResult[], label: string, pick: ScenarioPick): string {
  const hitShare = spread(
    runs.map((r) => {
      const sc = pick(r);
      return sc.metricCacheHits !== undefined
        ? sc.metricCacheHits / sc.load.judgments
        : sc.load.cached / sc.load.judgments;
    }),
  );
  return row([
    label,
    fmtSpread(across(runs, (r) => pick(r).judgmentsPerSecond)),
    fmtSpread(across(runs, (r) => pick(r).backendCallsPerSecond)),
    `request ${fmtSpread(
      across(runs, (r) => pick(r).load.latency.p50),
      1,
    )} / ${fmtSpread(
      across(runs, (r) => pick(r).load.latency.p99),
      1,
    )}`,
    `hits ${ratio(hitShare)}`,
    fmtSpread(
      across(runs, (r) => pick(r).serverCores),
      2,
    ),
    '',
    '',
  ]);
}

/** The floor client's row: what the same backend calls reach with no server. */
function floorRow(s: SuiteResult): string {
  const { runs, options: o } = s;
  return row([
    `floor client (${o.inflight} judgments in flight, no server)`,
    fmtSpread(across(runs, (r) => r.floor.judgmentsPerSecond)),
    fmtSpread(across(runs, (r) => r.floor.callsPerSecond)),
    `judgment ${fmtSpread(
      across(runs, (r) => r.floor.result.latency.p50),
      1,
    )} / ${fmtSpread(
      across(runs, (r) => r.floor.result.latency.p99),
      1,
    )}`,
    `(client) ${fmtSpread(
      across(runs, (r) => r.floor.clientCpuMsPerCall),
      3,
    )}`,
    '',
    ratio(spread(runs.map((r) => r.floor.judgmentsPerSecond / s.limitJudgmentsPerSecond))),
    '1.00',
  ]);
}

/** The throughput table: the theoretical limit, the floor client, (a) and (b), and their cache-hit replays. */
function throughputTable(s: SuiteResult): string[] {
  const { options: o } = s;
  const L = o.latencyMs;
  const limit = s.limitJudgmentsPerSecond;
  return [
    '| scenario | judgments/s | backend calls/s | latency p50 / p99, ms | server CPU ms / backend call | server cores | ratio to limit | ratio to floor |',
    '|---|---:|---:|---|---:|---:|---:|---:|',
    `| theoretical limit (${o.inflight} / (${s.criticalPathCalls} × ${L} ms)) | ${fmt(limit)} | ${fmt(limit * s.callsPerJudgment)} | judgment ${fmt(s.criticalPathCalls * L)} | | | 1.00 | |`,
    floorRow(s),
    scenarioRow(
      s,
      `(a) /v1/reward, groups of ${o.groupSize}, ${Math.floor(o.inflight / o.groupSize)} groups in flight`,
      (r) => r.groups,
      'group',
    ),
    scenarioRow(
      s,
      `(b) /get_reward, one rollout per request, ${o.inflight} in flight`,
      (r) => r.rollouts,
      'rollout',
    ),
    cachedRow(s.runs, '(c) cache hits, /v1/reward groups (same groups again)', (r) => r.groupsCached),
    cachedRow(s.runs, '(c) cache hits, /get_reward rollouts (same rollouts again)', (r) => r.rolloutsCached),
  ];
}

/** Failed judgments over every scenario and run, with the first error (escaped for a table cell). */
function failuresCell(runs: RepetitionResult[]): string {
  const scenarios = (r: RepetitionResult): ScenarioResult[] => [
    r.groups,
    r.rollouts,
    r.light,
    r.groupsCached,
    r.rolloutsCached,
  ];
  const failures = runs.reduce((n, r) => n + scenarios(r).reduce((m, x) => m + x.load.failed, 0), 0);
  const firstError = runs
    .flatMap((r) => scenarios(r).map((x) => x.load.firstError))
    .find((e) => e !== undefined);
  return `${failures}${firstError === undefined ? '' : ` — first: ${firstError.replace(/\|/g, '\\|').slice(0, 200)}`}`;
}

/** The latency and resources table: light load, per-item latency, memory, CPU, the fake's and others' load. */
function resourcesTable(s: SuiteResult): string[] {
  const { runs, options: o } = s;
  const L = o.latencyMs;
  return [
    '| latency and resources | value |',
    '|---|---|',
    `| light-load group latency p50 / p99 (one group of ${o.groupSize} at a time) | ${fmtSpread(
      across(runs, (r) => r.light.load.latency.p50),
      1,
    )} / ${fmtSpread(
      across(runs, (r) => r.light.load.latency.p99),
      1,
    )} ms (2L = ${2 * L} ms; ratio p50 / 2L ${ratio(across(runs, (r) => r.light.load.latency.p50 / (2 * L)))}) |`,
    `| floor client, same light load (group p50 / p99) | ${fmtSpread(
      across(runs, (r) => r.floorLight.result.groupLatency.p50),
      1,
    )} / ${fmtSpread(
      across(runs, (r) => r.floorLight.result.groupLatency.p99),
      1,
    )} ms |`,
    `| (a) per-item latency inside groups (server-reported p50 / p99) | ${fmtSpread(
      across(runs, (r) => r.groups.load.itemLatency?.p50 ?? NaN),
      1,
    )} / ${fmtSpread(
      across(runs, (r) => r.groups.load.itemLatency?.p99 ?? NaN),
      1,
    )} ms |`,
    `| server peak RSS (VmHWM over the whole run) | ${fmtSpread(across(runs, (r) => r.peakRssMb))} MB (RSS at end ${fmtSpread(across(runs, (r) => r.rssEndMb))} MB) |`,
    `| server CPU per judgment, (b) | ${fmtSpread(
      across(runs, (r) => r.rollouts.serverCpuMsPerJudgment),
      3,
    )} ms |`,
    `| fake backend during (b): cores / CPU ms per call | ${fmtSpread(
      across(runs, (r) => r.rollouts.fakeCores),
      2,
    )} / ${fmtSpread(
      across(runs, (r) => r.rollouts.fakeCpuMsPerCall),
      3,
    )} |`,
    `| fake backend during the floor run: cores / CPU ms per call | ${fmtSpread(
      across(runs, (r) => r.floor.fakeCores),
      2,
    )} / ${fmtSpread(
      across(runs, (r) => r.floor.fakeCpuMsPerCall),
      3,
    )} |`,
    `| other processes on the machine just before each run: cores | ${fmtSpread(
      across(runs, (r) => r.backgroundCores),
      2,
    )} |`,
    `| other processes on the machine during (b) / during the floor run: cores | ${fmtSpread(
      across(runs, (r) => r.rollouts.otherCores),
      2,
    )} / ${fmtSpread(
      across(runs, (r) => r.floor.otherCores),
      2,
    )} |`,
    `| load generator during (b): cores | ${fmtSpread(
      across(runs, (r) => r.rollouts.loadCores),
      2,
    )} |`,
    `| peak backend calls in flight during (b) | ${fmtSpread(across(runs, (r) => r.rollouts.fakeMaxInflight))} |`,
    `| server log bytes per judgment, (b) at LOG_LEVEL=info | ${fmtSpread(
      across(runs, (r) => r.rollouts.logBytes / Math.max(1, r.rollouts.load.judgments)),
      1,
    )} |`,
    `| failed judgments (all scenarios, all runs) | ${failuresCell(runs)} |`,
  ];
}

/** The suite's Markdown: what was run, the throughput table, the latency and resources table, the targets. */
export function suiteMarkdown(s: SuiteResult): string {
  const { runs, options: o } = s;
  return [
    `Graph \`${o.graph}\` (${s.callsPerJudgment} LLM calls per judgment, critical path ${s.criticalPathCalls} calls), ` +
      `fake backend L = ${o.latencyMs} ms, ${o.inflight} judgments in flight, ${o.judgments} judgments per scenario, ` +
      `${runs.length} runs (fresh fake + server each); values are median (min–max) over runs. ` +
      `Server: \`${serverCommand(o)}\`, ` +
      `JUDGE_MAX_INFLIGHT=${o.judgeMaxInflight}, CACHE_SIZE=${o.cacheSize}, LOG_LEVEL=info. ${environment()}.`,
    '',
    ...throughputTable(s),
    '',
    ...resourcesTable(s),
    '',
    '| target (issue 6) | goal | measured | met |',
    '|---|---|---|---|',
    ...targets(s).map((t) => `| ${t.what} | ${t.goal} | ${t.measured} | ${t.pass ? 'yes' : '**no**'} |`),
  ].join('\n');
}

export function soakMarkdown(s: SoakResult): string {
  return [
    `Soak: ${s.seconds} s of /get_reward, one rollout per request, ${s.inflight} in flight ` +
      `(${s.scenario.load.judgments} judgments, ${fmt(s.scenario.judgmentsPerSecond)} judgments/s, ` +
      `${s.scenario.load.failed} failed), RSS sampled every ${s.intervalSeconds} s. ${environment()}.`,
    '',
    '| t, s | RSS, MB | peak RSS, MB | judgments/s (interval) | server cores | fake cores | all processes, cores |',
    '|---:|---:|---:|---:|---:|---:|---:|',
    ...s.samples.map(
      (x) =>
        `| ${x.t} | ${fmt(x.rssMb, 1)} | ${fmt(x.hwmMb, 1)} | ${fmt(x.judgmentsPerSecond)} | ` +
        `${fmt(x.serverCores, 2)} | ${fmt(x.fakeCores, 2)} | ${fmt(x.machineCores, 2)} |`,
    ),
    '',
    'Server RSS is dominated by V8 heap sizing, not by live data: see the profile notes in the main results file.',
    '',
    `RSS growth from minute 1 to the end: ${fmt(s.growth * 100, 1)}% (target < 10%: ${s.growth < 0.1 ? 'met' : '**not met**'}).`,
  ].join('\n');
}

/** The console summary: ratios first. */
export function suiteConsole(s: SuiteResult): string {
  const { runs } = s;
  const limit = s.limitJudgmentsPerSecond;
  const j = across(runs, (r) => r.rollouts.judgmentsPerSecond);
  return [
    `theoretical limit ${fmt(limit)} judgments/s; floor client ${fmtSpread(across(runs, (r) => r.floor.judgmentsPerSecond))} judgments/s`,
    `/get_reward ${fmtSpread(j)} judgments/s = ${ratio(spread(runs.map((r) => r.rollouts.judgmentsPerSecond / limit)))} × limit, ` +
      `${ratio(
        ratioAcross(
          runs,
          (r) => r.rollouts.judgmentsPerSecond,
          (r) => r.floor.judgmentsPerSecond,
        ),
      )} × floor`,
    `/v1/reward ${fmtSpread(across(runs, (r) => r.groups.judgmentsPerSecond))} judgments/s = ` +
      `${ratio(spread(runs.map((r) => r.groups.judgmentsPerSecond / limit)))} × limit, ` +
      `${ratio(
        ratioAcross(
          runs,
          (r) => r.groups.judgmentsPerSecond,
          (r) => r.floor.judgmentsPerSecond,
        ),
      )} × floor`,
    ...targets(s).map((t) => `${t.pass ? 'ok  ' : 'MISS'} ${t.what}: ${t.measured} (goal ${t.goal})`),
  ].join('\n');
}
