import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

import { RewardError } from '../../../src/errors.js';
import {
  CRITIC_STRICTNESS,
  createOfflineBackend,
  OFFLINE_MODEL,
  SEED_JITTER,
} from '../../../src/judge/backends/offline.js';
import type { LlmRequest } from '../../../src/judge/types.js';
import { getRole, ROLES } from '../../../src/roles/index.js';
import { methodSimilarity, SIMILARITY_THRESHOLDS } from '../../../src/text/similarity.js';
import type { Focus, RoleContext, VisibleMessage } from '../../../src/roles/types.js';

const DATASET = fileURLToPath(new URL('../../../../shared/datasets/openreview-pairs.jsonl', import.meta.url));
const HAVE_DATASET = existsSync(DATASET);

interface Pair {
  question: string;
  candidate: string;
  ground_truth: string;
  label: 0 | 1;
  kind: 'positive' | 'hard_negative' | 'easy_negative';
}

function loadPairs(): Pair[] {
  return readFileSync(DATASET, 'utf8')
    .split('\n')
    .filter((l) => l.trim().length > 0)
    .map((l) => JSON.parse(l) as Pair);
}

// Written for this test (not dataset text).
const GROUND_TRUTH =
  'We train image classifiers so that their input Jacobian matrices look like natural images: a discriminator ' +
  'adversarially regularizes the Jacobian during training, which improves robustness to adversarial attacks ' +
  'without adversarial training.';
const MATCHING =
  'Regularize the classifier input Jacobian with a discriminator so Jacobian matrices resemble images, improving adversarial robustness.';
const UNRELATED =
  'Predict protein folding energy landscapes using equivariant message passing over residue contact graphs.';

function ctx(candidate: string, extra: Partial<RoleContext> = {}): RoleContext {
  return {
    question: 'Can Jacobian regularization make classifiers robust?',
    candidate,
    groundTruth: GROUND_TRUTH,
    nonce: 'feedfacecafebeef',
    round: 1,
    rounds: 1,
    node: { id: 'n1' },
    visible: [],
    ...extra,
  };
}

function request(role: string, context: RoleContext, extra: Partial<LlmRequest> = {}): LlmRequest {
  const r = getRole(role)!;
  const prompt = r.render(context);
  return {
    role,
    nodeId: context.node.id,
    model: OFFLINE_MODEL,
    messages: [
      { role: 'system', content: prompt.system },
      { role: 'user', content: prompt.user },
    ],
    schemaName: role,
    jsonSchema: r.jsonSchema,
    focus: context.node.focus,
    context,
    ...extra,
  };
}

const options = () => ({ signal: new AbortController().signal, deadline: Date.now() + 10_000 });
const backend = createOfflineBackend();

async function ask(role: string, context: RoleContext, extra: Partial<LlmRequest> = {}) {
  const reply = await backend.complete(request(role, context, extra), options());
  return { reply, output: getRole(role)!.output.parse(JSON.parse(reply.text)) as Record<string, unknown> };
}

function auc(pos: number[], neg: number[]): number {
  let s = 0;
  for (const p of pos) for (const n of neg) s += p > n ? 1 : p === n ? 0.5 : 0;
  return s / (pos.length * neg.length);
}

describe('offline backend', () => {
  it('is named offline and always ready', async () => {
    expect(backend.name).toBe('offline');
    expect(await backend.ping!(new AbortController().signal)).toBe(true);
    expect(backend.isSaturated!()).toBe(false);
  });

  it.each([...ROLES.keys()])('answers the %s schema validly', async (role) => {
    const { reply, output } = await ask(role, ctx(MATCHING));
    expect(Object.keys(output)[0]).toBe(role === 'lexical' ? 'similarity' : 'reasoning');
    expect(reply).toMatchObject({ model: 'offline', attempts: 1 });
    expect(reply.promptTokens).toBe(
      Math.ceil(request(role, ctx(MATCHING)).messages.reduce((n, m) => n + m.content.length, 0) / 4),
    );
    expect(reply.completionTokens).toBe(Math.ceil(reply.text.length / 4));
    expect(reply.latencyMs).toBeGreaterThanOrEqual(0);
  });

  it('is deterministic for the same request', async () => {
    for (const role of ROLES.keys()) {
      const a = await backend.complete(request(role, ctx(MATCHING), { seed: 7 }), options());
      const b = await backend.complete(request(role, ctx(MATCHING), { seed: 7 }), options());
      expect(a.text, role).toBe(b.text);
    }
  });

  it('says match for a paraphrase and no_match for an unrelated idea, for every stance role', async () => {
    for (const role of ['analyst', 'critic', 'reviewer', 'judge', 'evaluator']) {
      const field = role === 'judge' || role === 'evaluator' ? 'verdict' : 'stance';
      expect((await ask(role, ctx(MATCHING))).output[field], role).toBe('match');
      expect((await ask(role, ctx(UNRELATED))).output[field], role).toBe('no_match');
    }
  });

  it('gives seed-dependent but bounded thresholds to parallel analysts', async () => {
    const texts = new Set<string>();
    for (const seed of [1, 2, 3]) {
      const { reply } = await ask('analyst', ctx(MATCHING), { seed });
      texts.add(reply.text);
      const threshold = Number(/threshold (\d\.\d+)/.exec(reply.text)![1]);
      expect(Math.abs(threshold - SIMILARITY_THRESHOLDS.methodology)).toBeLessThanOrEqual(SEED_JITTER);
    }
    expect(texts.size).toBe(3);
  });

  it('critic is stricter than the analyst', async () => {
    // A candidate scored between the analyst's and the critic's thresholds.
    const t = SIMILARITY_THRESHOLDS.methodology;
    const words = GROUND_TRUTH.split(' ');
    let between: string | undefined;
    for (let n = 4; n <= words.length && between === undefined; n++) {
      const candidate = `${words.slice(0, n).join(' ')} using quantum annealers for sparse biology surveys`;
      const s = methodSimilarity({ question: '', candidate, groundTruth: GROUND_TRUTH });
      if (s >= t && s < t + CRITIC_STRICTNESS) between = candidate;
    }
    expect(between).toBeDefined();
    expect((await ask('analyst', ctx(between!))).output['stance']).toBe('match');
    expect((await ask('critic', ctx(between!))).output['stance']).toBe('no_match');
  });

  it('reviewers weigh terms by focus', async () => {
    const outputs = await Promise.all(
      (['methodology', 'statistics', 'novelty'] as Focus[]).map(
        async (focus) => (await ask('reviewer', ctx(MATCHING, { node: { id: `r_${focus}`, focus } }))).output,
      ),
    );
    for (const [i, focus] of ['methodology', 'statistics', 'novelty'].entries()) {
      expect(outputs[i]!['reasoning']).toContain(`${focus} term cosine`);
    }
    expect(new Set(outputs.map((o) => o['reasoning'])).size).toBe(3);
  });

  it('evaluator weighs the visible stances with its own score', async () => {
    const vote = (stance: 'match' | 'no_match', confidence: number, id: string): VisibleMessage => ({
      nodeId: id,
      role: 'analyst',
      round: 1,
      stance,
      confidence,
      summary: 's',
    });
    const alone = (await ask('evaluator', ctx(MATCHING))).output;
    const against = (
      await ask(
        'evaluator',
        ctx(MATCHING, { visible: [vote('no_match', 0.99, 'a1'), vote('no_match', 0.99, 'a2')] }),
      )
    ).output;
    expect(alone['verdict']).toBe('match');
    expect(against['confidence']).toBeLessThan(alone['confidence'] as number);
    expect(against['reasoning']).toContain('committee P(match) 0.0100 over 2 stance(s)');
  });

  it('moderator extracts a core sentence and a checklist from the ground truth', async () => {
    const { output } = await ask('moderator', ctx(MATCHING));
    expect(GROUND_TRUTH).toContain(output['core_method'] as string);
    expect((output['checklist'] as string[]).length).toBeGreaterThan(0);
    expect((output['checklist'] as string[]).join(' ')).toContain('"jacobian"');
  });

  it('rejects with the signal reason when already aborted', async () => {
    const controller = new AbortController();
    const reason = new RewardError('RW_JUDGE_TIMEOUT', 'deadline');
    controller.abort(reason);
    await expect(
      backend.complete(request('analyst', ctx(MATCHING)), {
        signal: controller.signal,
        deadline: Date.now(),
      }),
    ).rejects.toBe(reason);
  });

  it('rejects an unknown role with RW_INTERNAL (every registered role has an answer)', async () => {
    const req = { ...request('analyst', ctx(MATCHING)), role: 'oracle' };
    await expect(backend.complete(req, options())).rejects.toMatchObject({ code: 'RW_INTERNAL' });
  });
});

describe.skipIf(!HAVE_DATASET)('offline backend on ../shared/datasets/openreview-pairs.jsonl', () => {
  it('says match for a dataset positive and no_match for an easy negative', async () => {
    const pairs = loadPairs();
    // The first positive and the first easy negative (the file's order is fixed).
    for (const kind of ['positive', 'easy_negative'] as const) {
      const pair = pairs.find((p) => p.kind === kind)!;
      const context = ctx(pair.candidate, { question: pair.question, groundTruth: pair.ground_truth });
      const expected = kind === 'positive' ? 'match' : 'no_match';
      expect((await ask('analyst', context, { seed: 1 })).output['stance'], kind).toBe(expected);
      expect((await ask('judge', context)).output['verdict'], kind).toBe(expected);
    }
  });

  it('separates positives from hard negatives (AUC ≥ 0.9) and from easy negatives', () => {
    const pairs = loadPairs();
    const score = (p: Pair) =>
      methodSimilarity({ question: p.question, candidate: p.candidate, groundTruth: p.ground_truth });
    const of = (kind: Pair['kind']) => pairs.filter((p) => p.kind === kind).map(score);
    const pos = of('positive');
    expect(auc(pos, of('hard_negative'))).toBeGreaterThanOrEqual(0.9);
    expect(auc(pos, of('easy_negative'))).toBeGreaterThanOrEqual(0.98);
    const t = SIMILARITY_THRESHOLDS.methodology;
    const tp = pos.filter((s) => s >= t).length;
    const fp =
      of('hard_negative').filter((s) => s >= t).length + of('easy_negative').filter((s) => s >= t).length;
    const precision = tp / (tp + fp);
    const recall = tp / pos.length;
    expect(precision).toBeGreaterThanOrEqual(0.8);
    expect(recall).toBeGreaterThanOrEqual(0.8);
  });
});
