/** Issue 14 item 4: cascade graphs (a cheap first stage stops when confident, else the committee). */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

import { RewardError } from '../../src/errors.js';
import { createOfflineBackend } from '../../src/judge/backends/offline.js';
import { allNodes, compileGraph } from '../../src/judge/graph.js';
import { compileSpec, getPreset } from '../../src/judge/presets.js';
import { createRouter } from '../../src/judge/routing.js';
import { runJudgment } from '../../src/judge/run.js';
import type { JudgmentInput } from '../../src/judge/types.js';
import { universalReply, type FakeReply } from '../fakes/openai.js';
import { useFakeRouter } from './helpers.js';

const input: JudgmentInput = {
  question: 'How can language models verify their own reasoning?',
  candidate: 'Train a step-level verifier on labelled reasoning traces and rerank sampled solutions.',
  groundTruth: 'We train a process reward model on step-level labels and use it to select among samples.',
};

const judge = (stance: 'match' | 'no_match', confidence: number): FakeReply => ({
  kind: 'json',
  body: universalReply(stance, confidence),
});

function invalidMessage(spec: unknown): string {
  try {
    compileSpec(spec);
  } catch (err) {
    expect(err).toBeInstanceOf(RewardError);
    return (err as RewardError).message;
  }
  throw new Error('compiled');
}

const firstStage = {
  decision: { rule: 'evaluator', node: 'judge' },
  nodes: [{ id: 'judge', role: 'judge', temperature: 0 }],
} as const;

describe('cascade spec', () => {
  it('the preset escalates single-judge to the default committee; counts are the sum', () => {
    const cascade = getPreset('cascade')!;
    expect(cascade.cascade?.then).toBe(getPreset('default'));
    expect(cascade.cascade?.first.hash).toBe(getPreset('single-judge')!.hash);
    expect(cascade.cascade).toMatchObject({ stopOn: 'no_match', threshold: 0.8 });
    expect(cascade.llmCallsPerJudgment).toBe(4);
    expect(cascade.criticalPathCalls).toBe(3);
    expect(allNodes(cascade).map((r) => r.node.id)).toEqual(['judge', 'analyst_1', 'analyst_2', 'evaluator']);
  });

  it('the threshold and the escalation target are part of the hash', () => {
    const a = compileSpec({ ...firstStage, cascade: { escalate_to: 'default', threshold: 0.8 } });
    const b = compileSpec({ ...firstStage, cascade: { escalate_to: 'default', threshold: 0.9 } });
    const c = compileSpec({ ...firstStage, cascade: { escalate_to: 'ordinary', threshold: 0.8 } });
    expect(new Set([a.hash, b.hash, c.hash, getPreset('single-judge')!.hash]).size).toBe(4);
    expect(a.hash).toBe(getPreset('cascade')!.hash);
  });

  it('takes an inline escalation spec', () => {
    const g = compileGraph({
      ...firstStage,
      cascade: {
        escalate_to: {
          decision: { rule: 'evaluator', node: 'final' },
          nodes: [{ id: 'final', role: 'evaluator' }],
        },
        stop_on: 'match',
        threshold: 0.95,
      },
    });
    expect(g.cascade).toMatchObject({ stopOn: 'match', threshold: 0.95 });
    expect(g.llmCallsPerJudgment).toBe(2);
  });

  it('rejects unknown targets, nested cascades, shared node ids and thresholds below 0.5', () => {
    expect(invalidMessage({ ...firstStage, cascade: { escalate_to: 'nope', threshold: 0.8 } })).toMatch(
      /unknown graph 'nope'/,
    );
    expect(invalidMessage({ ...firstStage, cascade: { escalate_to: 'cascade', threshold: 0.8 } })).toMatch(
      /cannot escalate to a cascade/,
    );
    expect(
      invalidMessage({ ...firstStage, cascade: { escalate_to: 'single-judge', threshold: 0.8 } }),
    ).toMatch(/node id 'judge' is used by both stages/);
    expect(invalidMessage({ ...firstStage, cascade: { escalate_to: 'default', threshold: 0.4 } })).toMatch(
      /threshold/,
    );
    // Without a preset resolver (graph.ts alone) a name cannot be resolved.
    expect(() =>
      compileGraph({ ...firstStage, cascade: { escalate_to: 'default', threshold: 0.8 } }),
    ).toThrow(/unknown graph 'default'/);
  });
});

describe('cascade on the fake backend', () => {
  const start = useFakeRouter();
  const setup = (script: FakeReply[], fallback: FakeReply = { kind: 'status', status: 500 }) =>
    start({ script, fallback });

  it('a confident no_match stops after one call (cascade_stop)', async () => {
    const { fake, router } = await setup([judge('no_match', 0.9)]);
    const j = await runJudgment(getPreset('cascade')!, input, { router, deadline: Date.now() + 5_000 });
    expect(j).toMatchObject({ status: 'ok', verdict: 'no_match', reward: 0, stopReason: 'cascade_stop' });
    expect(j.graph).toEqual({ name: 'cascade', hash: getPreset('cascade')!.hash });
    expect(j.usage.calls).toBe(1);
    expect(fake.callCount).toBe(1);
    expect(j.transcript.map((m) => m.nodeId)).toEqual(['judge']);
  });

  it.each([
    ['a match', judge('match', 0.99)],
    ['a no_match below the threshold', judge('no_match', 0.7)],
  ])('%s escalates to the committee (escalated)', async (_case, first) => {
    const { fake, router } = await setup([
      first,
      judge('match', 0.8),
      judge('match', 0.8),
      judge('no_match', 0.6),
    ]);
    const j = await runJudgment(getPreset('cascade')!, input, { router, deadline: Date.now() + 5_000 });
    // The committee's (Evaluator's) verdict decides, not the first stage's.
    expect(j).toMatchObject({ status: 'ok', verdict: 'no_match', stopReason: 'escalated' });
    expect(j.usage.calls).toBe(4);
    expect(fake.callCount).toBe(4);
    expect(j.transcript.map((m) => m.nodeId)).toEqual(['judge', 'analyst_1', 'analyst_2', 'evaluator']);
    expect(j.usage.promptTokens).toBe(j.transcript.reduce((a, m) => a + m.promptTokens, 0));
    // One nonce for both stages.
    const nonces = new Set(
      fake.calls.map((c) => /nonce "([^"]+)"/.exec(c.body.messages?.[1]?.content ?? '')?.[1]),
    );
    expect(nonces.size).toBe(1);
  });

  it('a failed first stage escalates', async () => {
    const { router } = await setup([
      { kind: 'status', status: 500 },
      judge('match', 0.8),
      judge('match', 0.8),
      judge('match', 0.9),
    ]);
    const j = await runJudgment(getPreset('cascade')!, input, { router, deadline: Date.now() + 5_000 });
    expect(j).toMatchObject({ status: 'ok', verdict: 'match', reward: 1, stopReason: 'escalated' });
    expect(j.transcript[0]?.error?.code).toBe('RW_JUDGE_UNAVAILABLE');
  });

  it('a failed committee is a judge_error with reward null, never 0', async () => {
    const { router } = await setup([
      judge('match', 0.9),
      judge('match', 0.8),
      { kind: 'status', status: 500 },
    ]);
    const failed = await runJudgment(getPreset('cascade')!, input, { router, deadline: Date.now() + 5_000 });
    expect(failed).toMatchObject({
      status: 'judge_error',
      reward: null,
      verdict: null,
      stopReason: 'node_failed',
    });
    expect(failed.usage.calls).toBeGreaterThanOrEqual(3);
  });

  it('does not escalate past the deadline: a hung first stage is a timeout', async () => {
    const { fake, router } = await setup([{ kind: 'hang' }]);
    // 1 s: at 200 ms a loaded machine had not delivered the first call to the fake before the deadline.
    const j = await runJudgment(getPreset('cascade')!, input, { router, deadline: Date.now() + 1_000 });
    expect(j).toMatchObject({ status: 'timeout', reward: null, stopReason: 'deadline' });
    expect(fake.callCount).toBe(1);
  });
});

describe('cascade on the shared OpenReview set (offline backend)', () => {
  const path = fileURLToPath(new URL('../../../shared/datasets/openreview-pairs.jsonl', import.meta.url));
  const rows = readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as { question: string; candidate: string; ground_truth: string });

  it('spends fewer calls per judgment than default, and every escalated verdict equals default’s', async () => {
    const router = createRouter({ default: 'offline', offline: createOfflineBackend });
    const cascade = getPreset('cascade')!;
    const committee = getPreset('default')!;
    let cascadeCalls = 0;
    let defaultCalls = 0;
    let escalated = 0;
    let stopped = 0;
    for (const row of rows) {
      const triple = { question: row.question, candidate: row.candidate, groundTruth: row.ground_truth };
      const options = { router, deadline: Date.now() + 30_000 };
      const [c, d] = await Promise.all([
        runJudgment(cascade, triple, options),
        runJudgment(committee, triple, options),
      ]);
      expect(c.status).toBe(d.status);
      cascadeCalls += c.usage.calls;
      defaultCalls += d.usage.calls;
      if (c.stopReason === 'escalated') {
        escalated++;
        expect(c.verdict).toBe(d.verdict);
        expect(c.score).toBe(d.score);
      } else if (c.stopReason === 'cascade_stop') {
        stopped++;
        expect(c.verdict).toBe('no_match');
      }
    }
    expect(rows.length).toBe(600);
    expect(stopped + escalated).toBe(rows.length);
    expect(stopped).toBeGreaterThan(0);
    expect(escalated).toBeGreaterThan(0);
    // Measured: 2.695 vs 3.000 calls per judgment (261 stopped, 339 escalated).
    expect(cascadeCalls / rows.length).toBeLessThan(defaultCalls / rows.length);
  });
});
