import { describe, expect, it } from 'vitest';
import { classifyObjection, monitorRound } from '../../src/judge/monitor.js';
import { compileSpec } from '../../src/judge/presets.js';
import { runJudgment } from '../../src/judge/run.js';
import type { TranscriptMessage } from '../../src/judge/types.js';
import { universalReply } from '../fakes/openai.js';
import { useFakeRouter } from './helpers.js';

const startFake = useFakeRouter();
const FAKE_SETTINGS = { api_key: 'test', model: 'fake' };

const input = {
  question: 'How to train dense retrievers?',
  candidate: 'Order contrastive negatives from easy to hard while training the retriever.',
  groundTruth: 'We propose a staged negative curriculum for training dense retrievers.',
};

function debateGraph(earlyStop: unknown) {
  return compileSpec({
    rounds: 4,
    early_stop: earlyStop,
    decision: { rule: 'unanimous', nodes: ['proposer', 'critic'] },
    nodes: [
      { id: 'proposer', role: 'analyst', temperature: 0 },
      { id: 'critic', role: 'critic', sees: ['proposer'], temperature: 0 },
    ],
  });
}

const OBJECTIONS = ['The training objective differs from the curriculum.', 'The wording is vague.'];

/** A fake backend answering every call with `reply()`, and a router on it. */
const fakeFor = (reply: () => Record<string, unknown>) =>
  startFake({ fallback: () => ({ kind: 'json', body: reply() }) }, FAKE_SETTINGS);

describe('early_stop converged', () => {
  it('stops a scripted repeating debate after the first repeat and records why', async () => {
    const { fake, router } = await fakeFor(() => ({ ...universalReply('no_match'), objections: OBJECTIONS }));
    const graph = debateGraph({ kind: 'converged', similarity: 0.9 });
    const j = await runJudgment(graph, input, { router, deadline: Date.now() + 10_000 });
    expect(j.status).toBe('ok');
    expect(j.reward).toBe(0);
    expect(j.rounds).toBe(2);
    expect(j.stopReason).toBe('converged');
    expect(fake.calls).toHaveLength(4);
    const d = j.debate!;
    expect(d.threshold).toBe(0.9);
    expect(d.rounds.map((r) => r.round)).toEqual([1, 2]);
    expect(d.rounds[0]).toMatchObject({ similarity: {}, repeated: false });
    expect(d.rounds[1]).toMatchObject({ similarity: { proposer: 1, critic: 1 }, repeated: true });
    // One substantive (objective, training) and one stylistic (wording, vague) objection per critic turn.
    expect(d.rounds[1]?.objections).toEqual({ substantive: 1, stylistic: 1, unclassified: 0 });
    expect(d.rounds[1]?.substantiveShare).toBe(0.5);
    expect(d.rounds[1]!.tokens).toBe(j.usage.promptTokens + j.usage.completionTokens);
    expect(d.stop).toEqual({
      reason: 'converged',
      round: 2,
      detail: 'turns repeat round 1 (proposer 1, critic 1) ≥ 0.9',
    });
  });

  it('a debate whose turns change runs every round; a stance change is never a repeat', async () => {
    let n = 0;
    const topics = [
      'curriculum negatives',
      'distillation teacher',
      'memory tokens chunk',
      'irrigation reward',
    ];
    const { router } = await fakeFor(() => {
      const topic = topics[Math.floor(n++ / 2) % topics.length]!;
      return {
        ...universalReply('no_match'),
        reasoning: `About ${topic}.`,
        core_method: topic,
        objections: [topic],
      };
    });
    const j = await runJudgment(debateGraph({ kind: 'converged', similarity: 0.9 }), input, {
      router,
      deadline: Date.now() + 10_000,
    });
    expect(j.rounds).toBe(4);
    expect(j.stopReason).toBe('max_rounds');
    expect(j.debate?.rounds.map((r) => r.repeated)).toEqual([false, false, false, false]);
    expect(j.debate?.stop).toBeUndefined();
    expect(Math.max(...Object.values(j.debate!.rounds[1]!.similarity))).toBeLessThan(0.9);
  });

  it('stops once the token budget is spent', async () => {
    let n = 0;
    const { router } = await fakeFor(() => ({
      ...universalReply('match'),
      reasoning: `turn ${n++} ${'x'.repeat(n)}`,
    }));
    const j = await runJudgment(debateGraph({ kind: 'converged', similarity: 1, budget_tokens: 1 }), input, {
      router,
      deadline: Date.now() + 10_000,
    });
    expect(j.rounds).toBe(1);
    expect(j.stopReason).toBe('token_budget');
    expect(j.debate?.stop?.reason).toBe('token_budget');
    expect(j.reward).toBe(1);
  });

  it('a backend failure mid-debate is still a failure (reward null), not a converged stop', async () => {
    let n = 0;
    const { router } = await startFake(
      {
        fallback: () =>
          n++ < 2 ? { kind: 'json', body: universalReply('match') } : { kind: 'status', status: 500 },
      },
      FAKE_SETTINGS,
    );
    const j = await runJudgment(debateGraph({ kind: 'converged' }), input, {
      router,
      deadline: Date.now() + 10_000,
    });
    expect(j.status).toBe('judge_error');
    expect(j.reward).toBeNull();
  });

  it('rejects a threshold outside (0, 1] and changes the graph hash', () => {
    expect(() => debateGraph({ kind: 'converged', similarity: 0 })).toThrow();
    expect(() => debateGraph({ kind: 'converged', similarity: 0.9, extra: 1 })).toThrow();
    expect(debateGraph({ kind: 'converged' }).hash).not.toBe(debateGraph({ kind: 'unanimous' }).hash);
    expect(debateGraph({ kind: 'converged' }).hash).toBe(
      debateGraph({ kind: 'converged', similarity: 0.9 }).hash,
    );
  });
});

describe('objection classification rule', () => {
  it.each([
    ['The method differs: it distils from a teacher instead of a curriculum', 'substantive'],
    ['Assumes labelled hard negatives exist', 'substantive'],
    ['The method description is vague', 'substantive'],
    ['Wording is unclear', 'stylistic'],
    ['Formatting and typos throughout', 'stylistic'],
    ['I do not like it', 'unclassified'],
  ])('%s → %s', (text, kind) => {
    expect(classifyObjection(text)).toBe(kind);
  });

  it('monitorRound compares each node with its own previous turn only', () => {
    const msg = (
      nodeId: string,
      round: number,
      reasoning: string,
      stance: 'match' | 'no_match',
    ): TranscriptMessage => ({
      round,
      stage: 'debate',
      nodeId,
      role: 'analyst',
      model: 'm',
      stance,
      confidence: 0.9,
      output: { reasoning },
      promptTokens: 0,
      completionTokens: 0,
      cachedPromptTokens: null,
      latencyMs: 0,
      attempts: 1,
      reasks: 0,
    });
    const t = [
      msg('a', 1, 'negative curriculum retriever', 'match'),
      msg('b', 1, 'teacher distillation', 'no_match'),
      msg('a', 2, 'negative curriculum retriever', 'no_match'),
      msg('b', 2, 'teacher distillation', 'no_match'),
    ];
    const row = monitorRound(t, 2, 0.9, 10);
    expect(row.similarity).toEqual({ a: 1, b: 1 });
    // a changed its stance: the debate did not converge.
    expect(row.repeated).toBe(false);
    expect(row.substantiveShare).toBeNull();
  });
});
