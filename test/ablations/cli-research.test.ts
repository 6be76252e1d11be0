/**
 * The research workflow end to end (issue 40), each CLI a child process against the fake OpenAI-compatible
 * judge on loopback, on the shared set (../shared/datasets/openreview-pairs.jsonl; datasets/sample.jsonl
 * when the shared set is absent) at a small size: manifest, run kept beside a finished one, seeded prompts,
 * epochs, transcripts, TRANSCRIPTS_PATH, compare, dry run, spend cap and resume; the debate family compared
 * at equal budget (issue 40 item 7).
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { matchedVoteSize } from '../../src/ablations/ablate/baselines.js';
import type { AblationResults } from '../../src/ablations/types.js';
import {
  startFakeOpenAI,
  universalReply,
  type FakeChatRequest,
  type FakeOpenAI,
  type RecordedCall,
} from '../fakes/openai.js';
import { runCli, type CliResult } from '../support/cli.js';
import { useTempDirs } from '../support/temp-dirs.js';

const SHARED = '../shared/datasets/openreview-pairs.jsonl';
const DATASET = existsSync(SHARED) ? SHARED : 'datasets/sample.jsonl';
const tempDir = useTempDirs('cli-research-');

/** Deterministic per prompt: the stance is a hash of the messages (a different nonce → maybe another). */
function hashJudge(body: FakeChatRequest): { kind: 'json'; body: Record<string, unknown> } {
  const text = (body.messages ?? []).map((m) => m.content).join('\n');
  const byte = createHash('sha256').update(text).digest()[0] ?? 0;
  return { kind: 'json', body: universalReply(byte % 2 === 0 ? 'match' : 'no_match', 0.8) };
}

/**
 * The Critic concedes (match) or objects (no_match) by the candidate alone, whatever the nonce or round: on
 * a candidate it concedes, an Analyst that says match agrees from the openings; on the others the debaters
 * disagree every round. Every other call is the hash judge.
 */
function debateJudge(
  body: FakeChatRequest,
  call: RecordedCall,
): { kind: 'json'; body: Record<string, unknown> } {
  if (call.role !== 'critic') return hashJudge(body);
  const user = body.messages?.find((m) => m.role === 'user')?.content ?? '';
  const candidate = /<<<CANDIDATE_[\w-]+>>>\n(.*)\n/.exec(user)?.[1] ?? '';
  const byte = createHash('sha256').update(candidate).digest()[0] ?? 0;
  return { kind: 'json', body: universalReply(byte % 2 === 0 ? 'match' : 'no_match', 0.8) };
}

let fake: FakeOpenAI;
beforeAll(async () => {
  fake = await startFakeOpenAI({ fallback: hashJudge, record: false });
});
afterAll(async () => {
  await fake.close();
});

const cli = (script: string, args: string[], extraEnv: Record<string, string> = {}): Promise<CliResult> =>
  runCli(script, args, {
    JUDGE_BASE_URL: fake.baseURL,
    JUDGE_MODEL: 'big-judge-70b',
    JUDGE_MAX_RETRIES: '1',
    ...extraEnv,
  });

const ABLATE = 'src/ablations/ablate/cli.ts';
const base = (out: string, extra: string[] = []) => [
  '--dataset',
  DATASET,
  '--graphs',
  'single-judge',
  '--reference',
  'none',
  '--no-baseline',
  '--limit',
  '6',
  '--out',
  out,
  ...extra,
];

const lines = async (path: string) =>
  (await readFile(path, 'utf8'))
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as { calls: unknown; label: unknown; kind: unknown; nonce: unknown });

const prompts = (records: { calls: unknown }[]) =>
  records.map((r) => JSON.stringify((r.calls as { messages: unknown }[]).map((c) => c.messages))).sort();

describe('the research workflow against the fake judge', () => {
  it('writes a manifest, keeps a finished run, repeats prompts for a seed, and compares two runs', async () => {
    const dir = await tempDir();
    const out = join(dir, 'out');
    const transcripts = join(dir, 'transcripts.jsonl');
    const first = await cli(ABLATE, base(out, ['--seed', '7', '--epochs', '2']), {
      TRANSCRIPTS_PATH: transcripts,
    });
    expect(first.code, first.stderr).toBe(0);
    const results = JSON.parse(await readFile(join(out, 'results.json'), 'utf8'));
    const m = results.manifest;
    expect(m.command).toEqual(['npm', 'run', 'ablate', '--', ...base(out, ['--seed', '7', '--epochs', '2'])]);
    expect(m.git_commit === null || /^[0-9a-f]{40}(-dirty)?$/.test(m.git_commit)).toBe(true);
    expect(new Date(m.started_at).toISOString()).toBe(m.started_at);
    expect(Date.parse(m.finished_at)).toBeGreaterThanOrEqual(Date.parse(m.started_at));
    expect(m).toMatchObject({ limit: 6, epochs: 2, seed: 7, backend: 'openai-compatible' });
    expect(m.nodes).toEqual([
      expect.objectContaining({
        graph: 'single-judge',
        node: 'judge',
        model: 'big-judge-70b',
        base_url: fake.baseURL,
        temperature: 0,
        retries: { max_retries: 1, http_retries: 0, reasks: 0 },
      }),
    ]);
    expect(results.epochs.epochs).toBe(2);
    expect(first.stdout).toMatch(/## Repeats \(2 epochs\)/);

    const records = await lines(join(out, 'items.jsonl'));
    expect(records).toHaveLength(12);
    for (const r of records) {
      expect([0, 1]).toContain(r.label);
      expect(['positive', 'hard_negative', 'easy_negative']).toContain(r.kind);
      const calls = r.calls as { messages: { content: string }[]; reply: string }[];
      expect(calls[0]!.messages.some((msg) => msg.content.includes(String(r.nonce)))).toBe(true);
      expect(JSON.parse(calls[0]!.reply)).toHaveProperty('stance');
    }
    // Two epochs of one item carry distinct nonces.
    const nonces = new Set(records.map((r) => r.nonce));
    expect(nonces.size).toBe(12);
    const sunk = await lines(transcripts);
    expect(sunk).toHaveLength(12);
    expect(sunk[0]).toMatchObject({ source: 'ablate', run: out });
    expect(await readFile(join(out, 'transcripts.html'), 'utf8')).toContain('<!doctype html>');

    // The same command again: the finished run is kept, a new one goes beside it with the same prompts.
    const before = await readFile(join(out, 'results.json'), 'utf8');
    const again = await cli(ABLATE, base(out, ['--seed', '7', '--epochs', '2']));
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toContain(`this run goes to ${join(out, 'run-2')}`);
    expect(await readFile(join(out, 'results.json'), 'utf8')).toBe(before);
    expect(prompts(await lines(join(out, 'run-2', 'items.jsonl')))).toEqual(prompts(records));

    // Another seed: other nonces, other prompts.
    const other = await cli(ABLATE, base(join(dir, 'seed8'), ['--seed', '8']));
    expect(other.code, other.stderr).toBe(0);
    const otherPrompts = prompts(await lines(join(dir, 'seed8', 'items.jsonl')));
    expect(otherPrompts.filter((p) => prompts(records).includes(p))).toEqual([]);

    const same = await cli('src/ablations/compare/cli.ts', [out, join(out, 'run-2')]);
    expect(same.code, same.stderr).toBe(0);
    expect(same.stdout).toMatch(/\| single-judge \| 6 \| 0\.000 .*\| 0 \|\n/);
    const json = join(dir, 'cmp.json');
    const diff = await cli('src/ablations/compare/cli.ts', [out, join(dir, 'seed8'), '--json', json]);
    expect(diff.code, diff.stderr).toBe(0);
    const cmp = JSON.parse(await readFile(json, 'utf8'));
    // The hash judge answers another prompt independently: some verdicts flip, each listed.
    const flips = cmp.graphs[0].flips as { item: string }[];
    expect(diff.stdout).toContain(`## Flipped verdicts: single-judge (${flips.length})`);
    for (const f of flips) expect(diff.stdout).toContain(f.item);
  }, 120_000);

  it('prints an estimate on --dry-run without a call; --max-tokens stops cleanly and the same command resumes', async () => {
    const dir = await tempDir();
    const out = join(dir, 'out');
    const calls = fake.callCount;
    const dry = await cli(ABLATE, base(out, ['--dry-run']));
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toMatch(/estimate: 6 judgments, 6 LLM calls, ~\d+ tokens/);
    expect(fake.callCount).toBe(calls);
    expect(existsSync(join(out, 'items.jsonl'))).toBe(false);

    // The fake reports ~1 token per 4 prompt characters; one judgment is ~1000 tokens.
    const capped = base(out, ['--max-tokens', '3000', '--concurrency', '1']);
    const stopped = await cli(ABLATE, capped);
    expect(stopped.code).toBe(3);
    expect(stopped.stderr).toMatch(
      /spend cap reached: \d+ tokens spent this invocation \(--max-tokens 3000\)/,
    );
    const partial = await lines(join(out, 'items.jsonl'));
    expect(partial.length).toBeGreaterThan(0);
    expect(partial.length).toBeLessThan(6);
    let last = stopped;
    for (let i = 0; i < 6 && last.code !== 0; i++) last = await cli(ABLATE, capped);
    expect(last.code, last.stderr).toBe(0);
    expect(await lines(join(out, 'items.jsonl'))).toHaveLength(6);
    expect(existsSync(join(out, 'run-2'))).toBe(false);
  }, 120_000);

  it('probe: --dry-run estimates without a call; --max-tokens stops cleanly and the same command resumes', async () => {
    const dir = await tempDir();
    const out = join(dir, 'probe');
    const PROBE = 'src/ablations/probe/cli.ts';
    const args = ['--dataset', DATASET, '--graph', 'single-judge', '--limit', '2', '--out', out];
    const calls = fake.callCount;
    const dry = await cli(PROBE, [...args, '--dry-run']);
    expect(dry.code, dry.stderr).toBe(0);
    const estimate =
      /estimate: (\d+) judgments, (\d+) LLM calls(?: \(at most \d+ [^)]*\))?, ~(\d+) tokens/.exec(dry.stdout);
    expect(estimate).not.toBeNull();
    const cases = Number(estimate![1]);
    expect(cases).toBeGreaterThan(20);
    expect(Number(estimate![3])).toBeGreaterThan(0);
    expect(fake.callCount).toBe(calls);
    expect(existsSync(out)).toBe(false);

    const capped = [...args, '--max-tokens', '8000', '--concurrency', '1'];
    const stopped = await cli(PROBE, capped);
    expect(stopped.code, stopped.stderr).toBe(3);
    expect(stopped.stderr).toMatch(
      /spend cap reached: (\d+) tokens spent this invocation \(--max-tokens 8000\)/,
    );
    const spent = Number(/spend cap reached: (\d+)/.exec(stopped.stderr)![1]);
    expect(spent).toBeLessThanOrEqual(8000);
    const partial = await lines(join(out, 'probe-cases.jsonl'));
    expect(partial.length).toBeGreaterThan(0);
    expect(partial.length).toBeLessThan(cases);
    expect(existsSync(join(out, 'probes.json'))).toBe(false);
    let last = stopped;
    const counts = [partial.length];
    for (let i = 0; i < 30 && last.code === 3; i++) {
      last = await cli(PROBE, capped);
      counts.push((await lines(join(out, 'probe-cases.jsonl'))).length);
    }
    // Each invocation adds cases, never judges one again; the last scores every case.
    expect([0, 1], last.stderr).toContain(last.code);
    for (let i = 1; i < counts.length; i++) expect(counts[i]).toBeGreaterThan(counts[i - 1]!);
    const records = (await lines(join(out, 'probe-cases.jsonl'))) as unknown as { id: string }[];
    expect(records).toHaveLength(cases);
    expect(new Set(records.map((r) => r.id)).size).toBe(cases);
    const results = JSON.parse(await readFile(join(out, 'probes.json'), 'utf8'));
    expect(results.manifest).toMatchObject({ limit: 2, seed: null, backend: 'openai-compatible' });
    expect(results.manifest.command).toEqual(['npm', 'run', 'probe', '--', ...capped]);
    expect(existsSync(join(out, 'run-2'))).toBe(false);
  }, 240_000);
});

describe('the debate family at equal budget (issue 40 item 7)', () => {
  it('compares rebuttals, openings only and a stop on consensus, each against its budget-matched vote', async () => {
    const dir = await tempDir();
    const out = join(dir, 'out');
    fake.setScript([], debateJudge);
    try {
      const args = ['--dataset', DATASET, '--graphs', 'debate,debate-opening,debate-consensus'];
      const run = await cli(ABLATE, [
        ...args,
        '--reference',
        'debate',
        '--limit',
        '6',
        '--seed',
        '1',
        '--out',
        out,
      ]);
      expect(run.code, run.stderr).toBe(0);
      const results = JSON.parse(await readFile(join(out, 'results.json'), 'utf8')) as AblationResults;
      const graph = (name: string) => results.graphs.find((g) => g.name === name)!;
      const [full, opening, consensus] = ['debate', 'debate-opening', 'debate-consensus'].map(graph);

      // At most 7 calls each for the rebuttal debates, 3 for the openings; the full debate spends its 7.
      expect([
        full!.llmCallsPerJudgment,
        opening!.llmCallsPerJudgment,
        consensus!.llmCallsPerJudgment,
      ]).toEqual([7, 3, 7]);
      expect(full!.usage.callsPerJudgment).toBe(7);
      expect(opening!.usage.callsPerJudgment).toBe(3);
      // The consensus debate stopped in the first round the debaters agreed in, else ran all 3 rounds.
      const stops = consensus!.dynamics!;
      const agreed = stops.stopReasons['unanimous'] ?? 0;
      const argued = stops.stopReasons['max_rounds'] ?? 0;
      expect(agreed).toBeGreaterThan(0);
      expect(argued).toBeGreaterThan(0);
      expect(agreed + argued).toBe(6);
      const used = Object.entries(stops.roundsUsed).map(([r, n]) => [Number(r), n] as const);
      expect(used.filter(([r]) => r < 3).reduce((a, [, n]) => a + n, 0)).toBe(agreed);
      // 2 debaters a round, then the Evaluator.
      const mean = used.reduce((a, [r, n]) => a + (2 * r + 1) * n, 0) / 6;
      expect(mean).toBeLessThan(7);
      expect(consensus!.usage.callsPerJudgment).toBeCloseTo(mean, 9);
      expect(full!.dynamics!.stopReasons).toEqual({ max_rounds: 6 });

      // Each graph's vote baseline matches what it measurably spent, not its maximum.
      expect(full!.budget!.byCalls!.baseline).toBe('vote-7');
      expect(opening!.budget!.byCalls!.baseline).toBe('vote-3');
      expect(consensus!.budget!.meanCalls).toBeCloseTo(mean, 9);
      expect(consensus!.budget!.byCalls!.baseline).toBe(`vote-${matchedVoteSize(mean)}`);
      for (const g of [full!, opening!, consensus!]) {
        expect(
          results.baselines.some((b) => b.graph === g.name && b.against === g.budget!.byCalls!.baseline),
        ).toBe(true);
      }
      // Paired with the rebuttal debate: the rule is the only difference.
      expect(results.reference).toBe('debate');
      expect(opening!.paired).not.toBeNull();
      expect(consensus!.paired).not.toBeNull();

      // The report shows the maximum, the mean actually spent, and the rounds used with their stop reasons.
      const report = await readFile(join(out, 'report.md'), 'utf8');
      expect(report).toMatch(
        /### debate-consensus\n\ngraph `debate-consensus` hash `[0-9a-f]{16}` · 7 LLM calls max/,
      );
      expect(report).toContain(`Spend per LLM-reaching judgment: ${mean.toFixed(2)} calls`);
      const roundsText = used.map(([r, n]) => `${r}: ${n}`).join(', ');
      expect(report).toMatch(
        new RegExp(
          `rounds used ${roundsText}; stop reasons (unanimous: ${agreed}, max_rounds: ${argued}|max_rounds: ${argued}, unanimous: ${agreed});`,
        ),
      );
    } finally {
      fake.setScript([], hashJudge);
    }
  }, 120_000);
});
