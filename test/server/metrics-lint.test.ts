/**
 * `/metrics` passes `promtool check metrics`: the real exposition, after real traffic, checked with
 * promlint's rules (test/server/promlint.ts), and by the real binary (`promtool` on the PATH, or
 * `PROMTOOL=/path/to/promtool`; Debian package `prometheus`): without it those checks are skipped with a
 * loud warning, except under CI=true, where they fail (`.ci/run` installs it).
 */
import { execFile } from 'node:child_process';
import { describe, expect, it } from 'vitest';

import { describeWithTools, PROMTOOL, PROMTOOL_TOOL } from '../deploy/tools.js';
import { candidate, GROUND_TRUTH, QUESTION, useHarness } from './helpers.js';
import { parseExposition, promlint, type Problem } from './promlint.js';

const harness = useHarness();

/** The app's /metrics after a group (ok, ok, rejected), a judge failure, a 404 and a 400. */
async function scrapeAfterTraffic(): Promise<string> {
  const h = await harness();
  const reward = (candidates: string[]) =>
    h.app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: { question: QUESTION, ground_truth: GROUND_TRUTH, candidates },
    });
  expect((await reward([candidate(0), candidate(1), ':'])).statusCode).toBe(200);
  h.fake.setScript([], { kind: 'status', status: 500 }); // every call fails: a judge_error
  await reward([candidate(2)]);
  expect((await h.app.inject({ method: 'GET', url: '/nope' })).statusCode).toBe(404);
  expect((await h.app.inject({ method: 'POST', url: '/v1/reward', payload: {} })).statusCode).toBe(400);
  const res = await h.app.inject({ method: 'GET', url: '/metrics' });
  expect(res.statusCode).toBe(200);
  return res.body;
}

describe('GET /metrics and promtool check metrics', () => {
  it('passes every promlint rule, with samples for every labelled reward_ metric', async () => {
    const text = await scrapeAfterTraffic();
    expect(promlint(text)).toEqual([]);
    const families = parseExposition(text);
    const own = families.filter((f) => f.name.startsWith('reward_'));
    for (const f of own.filter((f) => f.name.includes('llm') || f.name.includes('request'))) {
      expect(f.samples.length, f.name).toBeGreaterThan(0);
    }
    // Every family is ours (reward_) or prom-client's default process/runtime metrics.
    expect(families.filter((f) => !/^(reward|process|nodejs)_/.test(f.name)).map((f) => f.name)).toEqual([]);
  });

  it("leaves out prom-client's three _total gauges and keeps their per-type gauges", async () => {
    const names = new Set(parseExposition(await scrapeAfterTraffic()).map((f) => f.name));
    for (const total of ['nodejs_active_handles', 'nodejs_active_requests', 'nodejs_active_resources']) {
      expect(names.has(`${total}_total`), total).toBe(false);
    }
    expect(names.has('nodejs_active_handles')).toBe(true);
    expect(names.has('nodejs_active_resources')).toBe(true);
  });
});

const family = (name: string, type: string, samples: string[], help = 'h') =>
  [`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, ...samples, ''].join('\n');

/** Each rule, broken once; the expected problems are promtool 2.42's output for the same text. */
const LINT_CASES: { rule: string; text: string; problems: Problem[] }[] = [
  {
    rule: 'help',
    text: '# TYPE reward_calls_total counter\nreward_calls_total 1\n',
    problems: [{ metric: 'reward_calls_total', text: 'no help text' }],
  },
  {
    rule: 'counter _total',
    text: family('reward_calls', 'counter', ['reward_calls 1']),
    problems: [{ metric: 'reward_calls', text: 'counter metrics should have "_total" suffix' }],
  },
  {
    rule: 'non-counter _total',
    text: family('nodejs_active_handles_total', 'gauge', ['nodejs_active_handles_total 3']),
    problems: [
      { metric: 'nodejs_active_handles_total', text: 'non-counter metrics should not have "_total" suffix' },
    ],
  },
  {
    rule: 'abbreviated unit',
    text: family('reward_latency_ms', 'gauge', ['reward_latency_ms 1']),
    problems: [{ metric: 'reward_latency_ms', text: 'metric names should not contain abbreviated units' }],
  },
  {
    rule: 'base unit',
    text: family('reward_latency_milliseconds', 'histogram', [
      'reward_latency_milliseconds_bucket{le="+Inf"} 1',
      'reward_latency_milliseconds_sum 1',
      'reward_latency_milliseconds_count 1',
    ]),
    problems: [
      { metric: 'reward_latency_milliseconds', text: 'use base unit "seconds" instead of "milliseconds"' },
    ],
  },
  {
    rule: '_count clash',
    text: family('reward_items_count', 'gauge', ['reward_items_count 1']),
    problems: [
      {
        metric: 'reward_items_count',
        text: 'non-histogram and non-summary metrics should not have "_count" suffix',
      },
    ],
  },
  {
    rule: '_sum clash',
    text: family('reward_tokens_sum', 'gauge', ['reward_tokens_sum 1']),
    problems: [
      {
        metric: 'reward_tokens_sum',
        text: 'non-histogram and non-summary metrics should not have "_sum" suffix',
      },
    ],
  },
  {
    rule: '_bucket clash and le label',
    text: family('reward_wait_bucket', 'gauge', ['reward_wait_bucket{le="1"} 1']),
    problems: [
      { metric: 'reward_wait_bucket', text: 'non-histogram metrics should not have "_bucket" suffix' },
      { metric: 'reward_wait_bucket', text: 'non-histogram metrics should not have "le" label' },
    ],
  },
  {
    rule: 'quantile label',
    text: family('reward_wait', 'gauge', ['reward_wait{quantile="0.5"} 1']),
    problems: [{ metric: 'reward_wait', text: 'non-summary metrics should not have "quantile" label' }],
  },
  {
    rule: 'camelCase',
    text: family('reward_requestCount_total', 'counter', ['reward_requestCount_total{modelName="x"} 1']),
    problems: [
      {
        metric: 'reward_requestCount_total',
        text: "label names should be written in 'snake_case' not 'camelCase'",
      },
      {
        metric: 'reward_requestCount_total',
        text: "metric names should be written in 'snake_case' not 'camelCase'",
      },
    ],
  },
  {
    rule: 'type in name',
    text: family('reward_calls_counter', 'gauge', ['reward_calls_counter 1']),
    problems: [{ metric: 'reward_calls_counter', text: "metric name should not include type 'counter'" }],
  },
  {
    rule: 'colon',
    text: family('reward:calls_total', 'counter', ['reward:calls_total 1']),
    problems: [{ metric: 'reward:calls_total', text: "metric names should not contain ':'" }],
  },
];

/** Texts promtool refuses to parse (exit 1); the parser refuses them too. */
const PARSE_CASES: { what: string; text: string }[] = [
  {
    what: 'a duplicate label name',
    text: family('reward_dup_total', 'counter', ['reward_dup_total{x="1",x="2"} 1']),
  },
  {
    what: 'a second TYPE line',
    text: '# HELP reward_wait h\n# TYPE reward_wait gauge\n# TYPE reward_wait gauge\nreward_wait 1\n',
  },
  {
    what: 'a second HELP line',
    text: `${family('reward_wait', 'gauge', ['reward_wait 1'])}# HELP reward_wait h\n`,
  },
  { what: 'a value that is no float', text: family('reward_wait', 'gauge', ['reward_wait abc']) },
];

/** Refused here, accepted by promtool 2.42's parser, forbidden by the text format's spec. */
const STRICTER_CASES: { what: string; text: string }[] = [
  {
    what: 'a family split in two groups',
    text:
      family('reward_wait', 'gauge', ['reward_wait{x="1"} 1']) +
      family('reward_other', 'gauge', ['reward_other 1']) +
      'reward_wait{x="2"} 1\n',
  },
  {
    what: 'a histogram bucket without le',
    text: family('reward_wait', 'histogram', ['reward_wait_bucket 1']),
  },
  { what: 'a reserved label name', text: family('reward_wait', 'gauge', ['reward_wait{__x="1"} 1']) },
];

describe('promlint rules', () => {
  it.each(LINT_CASES)('reports $rule', ({ text, problems }) => {
    expect(promlint(text)).toEqual(problems);
  });

  it.each([...PARSE_CASES, ...STRICTER_CASES])('refuses $what', ({ text }) => {
    expect(() => parseExposition(text)).toThrow();
  });

  it('accepts a well-formed counter, gauge, histogram and summary with escaped label values', () => {
    const text =
      family('reward_calls_total', 'counter', ['reward_calls_total{role="a\\"b\\\\c"} 1']) +
      family('reward_queue_depth', 'gauge', ['reward_queue_depth NaN']) +
      family('reward_wait_seconds', 'histogram', [
        'reward_wait_seconds_bucket{le="0.5"} 1',
        'reward_wait_seconds_bucket{le="+Inf"} 2',
        'reward_wait_seconds_sum 1.5e0',
        'reward_wait_seconds_count 2',
      ]) +
      family('reward_size_bytes', 'summary', [
        'reward_size_bytes{quantile="0.5"} 3',
        'reward_size_bytes_sum 3',
      ]);
    expect(promlint(text)).toEqual([]);
    expect(parseExposition(text)[0]!.samples[0]!.labels).toEqual([['role', 'a"b\\c']]);
  });
});

/** Runs `promtool check metrics` on `text`: its exit code and problems (stdout and stderr lines). */
function promtool(text: string): Promise<{ code: number; problems: Problem[]; output: string }> {
  return new Promise((resolve, reject) => {
    const child = execFile(PROMTOOL!, ['check', 'metrics'], { timeout: 10_000 }, (err, stdout, stderr) => {
      if (err !== null && typeof err.code !== 'number')
        return reject(new Error(`promtool did not run: ${err.message}`, { cause: err })); // or was killed
      const code = err === null ? 0 : Number(err.code);
      const output = `${stdout}${stderr}`;
      const problems = output
        .split('\n')
        .filter((line) => line !== '' && !line.startsWith('error while linting'))
        .map((line) => ({
          metric: line.slice(0, line.indexOf(' ')),
          text: line.slice(line.indexOf(' ') + 1),
        }));
      resolve({ code, problems, output });
    });
    child.stdin!.end(text);
  });
}

describeWithTools('the real promtool check metrics', [PROMTOOL_TOOL], () => {
  it('accepts the real /metrics text', async () => {
    const result = await promtool(await scrapeAfterTraffic());
    expect(result.output).toBe('');
    expect(result.code).toBe(0);
  });

  it('reports exactly the problems the rules above report', async () => {
    // One promtool per case, all at once: each run waits on its own process start, not on the one before.
    const [lint, parse] = await Promise.all([
      Promise.all(LINT_CASES.map(({ text }) => promtool(text))),
      Promise.all(PARSE_CASES.map(({ text }) => promtool(text))),
    ]);
    LINT_CASES.forEach(({ rule, problems }, i) => {
      expect(lint[i]!.code, rule).toBe(3);
      expect(lint[i]!.problems, rule).toEqual(problems);
    });
    PARSE_CASES.forEach(({ what }, i) => {
      expect(parse[i]!.code, what).toBe(1);
      expect(parse[i]!.output, what).toMatch(/parsing error/);
    });
  });
});
