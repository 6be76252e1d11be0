/**
 * Issue 37, "Must show": the same labelled items through each reply shape of a reasoning judge at default
 * settings (POST /v1/reward, default graph, default budgets): every item judged, rewards equal to the same
 * judge's without a trace, at most 1.05× its calls, `usage.reasoning_tokens` within 10 % of the tokens the
 * judge generated thinking; the transcript keeps each node's trace; `reward_llm_tokens_total{kind="reasoning"}`
 * counts them.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, describe, expect, it } from 'vitest';

import { createFileTranscriptSink, type TranscriptSink } from '../../src/server/observe/transcripts.js';
import { universalReply, type FakeChatRequest, type FakeReply } from '../fakes/openai.js';
import { createThinkingJudge, TRACE_SHAPES, type ThinkingJudge, type TraceShape } from '../fakes/thinking.js';
import { startHarness, type Harness } from './helpers.js';

interface Item {
  id: string;
  question: string;
  candidate: string;
  ground_truth: string;
  label: 0 | 1;
}

const ITEMS: Item[] = readFileSync(new URL('../../datasets/sample.jsonl', import.meta.url), 'utf8')
  .split('\n')
  .filter((l) => l.trim() !== '')
  .map((l) => JSON.parse(l) as Item);

/** The labelled judge: right on every item (found by its candidate, JSON-escaped in the prompt). */
function labelled(body: FakeChatRequest): Record<string, unknown> {
  const user = body.messages?.find((m) => m.role === 'user')?.content ?? '';
  const item = ITEMS.find((i) => user.includes(JSON.stringify(i.candidate).slice(1, 60)));
  return universalReply(item?.label === 1 ? 'match' : 'no_match', 0.85);
}

interface Run {
  rewards: Array<number | null>;
  statuses: string[];
  calls: number;
  reasoningTokens: number;
  estimated: boolean;
  transcripts: Array<{ transcript: Array<{ reasoning?: string }> }>;
  metric: number;
}

let h: Harness | undefined;
let sink: TranscriptSink | undefined;
let dir: string | undefined;
afterEach(async () => {
  await h?.close();
  await sink?.close();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  h = sink = dir = undefined;
});

/** Every item through POST /v1/reward, one request per ground truth (a GRPO group), on `reply`. */
async function judgeAll(reply: (body: FakeChatRequest) => FakeReply): Promise<Run> {
  dir = mkdtempSync(join(tmpdir(), 'reasoning-'));
  const path = join(dir, 't.jsonl');
  sink = await createFileTranscriptSink(path);
  h = await startHarness({ fake: { fallback: reply }, transcripts: sink });
  const groups = new Map<string, Item[]>();
  for (const i of ITEMS) groups.set(i.ground_truth, [...(groups.get(i.ground_truth) ?? []), i]);
  const run: Run = {
    rewards: [],
    statuses: [],
    calls: 0,
    reasoningTokens: 0,
    estimated: false,
    transcripts: [],
    metric: 0,
  };
  for (const [groundTruth, items] of groups) {
    const res = await h.app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: {
        question: items[0]!.question,
        ground_truth: groundTruth,
        candidates: items.map((i) => i.candidate),
      },
    });
    expect(res.statusCode).toBe(200);
    const body = res.json<{
      rewards: Array<number | null>;
      results: Array<{ status: string }>;
      usage: { calls: number; reasoning_tokens: number; reasoning_tokens_estimated: boolean };
    }>();
    run.rewards.push(...body.rewards);
    run.statuses.push(...body.results.map((r) => r.status));
    run.calls += body.usage.calls;
    run.reasoningTokens += body.usage.reasoning_tokens;
    run.estimated ||= body.usage.reasoning_tokens_estimated;
  }
  await sink.close();
  run.transcripts = readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Run['transcripts'][number]);
  const text = await h.metrics.registry.metrics();
  for (const line of text.split('\n'))
    if (line.startsWith('reward_llm_tokens_total{') && line.includes('kind="reasoning"'))
      run.metric += Number(line.split(' ').at(-1));
  return run;
}

const near = (value: number, truth: number): number => Math.abs(value - truth) / truth;

describe('the same labelled items through each reply shape, default settings', () => {
  let baseline: Run | undefined;
  const plain = async (): Promise<Run> =>
    (baseline ??= await judgeAll((b) => ({ kind: 'json', body: labelled(b) })));

  it('the judge without a trace judges every item, right by the labels', async () => {
    const run = await plain();
    expect(run.statuses.every((s) => s === 'ok')).toBe(true);
    const inOrder = [...new Set(ITEMS.map((i) => i.ground_truth))].flatMap((g) =>
      ITEMS.filter((i) => i.ground_truth === g),
    );
    expect(run.rewards).toEqual(inOrder.map((i) => i.label));
    expect(run.reasoningTokens).toBe(0);
  });

  const shapes: Array<[TraceShape, 'reported' | 'none']> = [
    ...TRACE_SHAPES.map((s): [TraceShape, 'reported'] => [s, 'reported']),
    ['inline:think', 'none'],
    ['inline:harmony', 'none'],
    ['reasoning_content', 'none'],
  ];
  for (const [shape, usage] of shapes) {
    it(`${shape} (reasoning_tokens ${usage}): every item judged, same rewards, ≤ 1.05× the calls`, async () => {
      const base = await plain();
      const judge: ThinkingJudge = createThinkingJudge({ shape, answer: labelled, usage });
      const run = await judgeAll((b) => judge.reply(b));
      expect(run.statuses.every((s) => s === 'ok')).toBe(true);
      expect(run.rewards).toEqual(base.rewards);
      expect(run.calls).toBeLessThanOrEqual(1.05 * base.calls);
      expect(near(run.reasoningTokens, judge.generated.reasoningTokens)).toBeLessThan(0.1);
      expect(run.estimated).toBe(usage === 'none' && shape !== 'hidden');
      expect(run.metric).toBe(run.reasoningTokens);
      const traces = run.transcripts.flatMap((t) => t.transcript.map((m) => m.reasoning));
      if (usage === 'reported' && shape === 'hidden') expect(traces.every((t) => t === undefined)).toBe(true);
      else expect(traces.every((t) => typeof t === 'string' && t.includes('Draft:'))).toBe(true);
    });
  }
});
