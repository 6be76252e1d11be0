import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

import { createOfflineBackend } from '../../../src/judge/backends/offline.js';
import {
  offlineComparativeAnswer,
  offlineCriterionValue,
} from '../../../src/judge/backends/offline-compare.js';
import type { LlmRequest } from '../../../src/judge/types.js';
import { comparison, pick, rating } from '../../../src/roles/index.js';
import { CRITERION_NAMES } from '../../../src/roles/criteria.js';
import type { ComparativeContext, PairContext } from '../../../src/roles/types.js';

const DATASET = fileURLToPath(new URL('../../../../shared/datasets/openreview-pairs.jsonl', import.meta.url));

// Written for this test (not dataset text).
const QUESTION = 'How can image classifiers be made robust to adversarial perturbations?';
const GT =
  'We train classifiers so that their input Jacobian matrices look like natural images: a discriminator ' +
  'adversarially regularizes the Jacobian during training, improving robustness without adversarial training.';
const CLOSE =
  'Regularize the input Jacobian of the classifier with an adversarial discriminator so the Jacobian resembles ' +
  'natural images, which should give robustness without generating adversarial examples.';
const FAR =
  'Use a larger model and more data augmentation such as random crops and colour jitter for robust image classifiers.';

function pairCtx(a: string, b: string, over: Partial<PairContext> = {}): PairContext {
  return {
    kind: 'pair',
    question: QUESTION,
    groundTruth: GT,
    criterion: 'match',
    nonce: 'n0nce',
    a,
    b,
    ...over,
  };
}

describe('offline comparative answers', () => {
  it('prefers the idea closer to the ground truth on `match`, whichever position it is shown in', () => {
    const ab = offlineComparativeAnswer(pairCtx(CLOSE, FAR));
    const ba = offlineComparativeAnswer(pairCtx(FAR, CLOSE));
    expect(ab['winner']).toBe('A');
    expect(ba['winner']).toBe('B');
    expect(ab['margin']).toBe('clear');
    expect(ab['confidence']).toBe(ba['confidence']);
    expect(comparison.output.safeParse(ab).success).toBe(true);
  });

  it('calls a tie (toss-up) for the same idea in both positions', () => {
    const same = offlineComparativeAnswer(pairCtx(CLOSE, CLOSE));
    expect(same).toMatchObject({ winner: 'tie', margin: 'toss-up', confidence: 0.5 });
  });

  it('scores novelty as the share of terms found in neither the question nor the ground truth', () => {
    const parrot = 'Make image classifiers robust to adversarial perturbations.';
    const fresh =
      'Certify robustness with randomized smoothing via Gaussian noise and Neyman-Pearson bounds.';
    const base = { question: QUESTION, groundTruth: null, criterion: 'novelty' } as const;
    expect(offlineCriterionValue(base, parrot)).toBe(0);
    expect(offlineCriterionValue(base, fresh)).toBeGreaterThan(0.8);
    const r = offlineComparativeAnswer(pairCtx(parrot, fresh, { groundTruth: null, criterion: 'novelty' }));
    expect(r['winner']).toBe('B');
  });

  it('answers every kind and criterion with a schema-valid, deterministic object', () => {
    for (const criterion of CRITERION_NAMES) {
      const contexts: ComparativeContext[] = [
        pairCtx(CLOSE, FAR, { criterion }),
        {
          kind: 'pick',
          question: QUESTION,
          groundTruth: GT,
          criterion,
          nonce: 'n',
          candidates: [FAR, CLOSE, FAR],
        },
        { kind: 'rating', question: QUESTION, groundTruth: GT, criterion, nonce: 'n', idea: CLOSE },
      ];
      const schemas = [comparison.output, pick.output, rating.output];
      contexts.forEach((ctx, k) => {
        const first = offlineComparativeAnswer(ctx);
        expect(offlineComparativeAnswer(ctx)).toEqual(first);
        expect(schemas[k]!.safeParse(first).success).toBe(true);
      });
    }
    const picked = offlineComparativeAnswer({
      kind: 'pick',
      question: QUESTION,
      groundTruth: GT,
      criterion: 'match',
      nonce: 'n',
      candidates: [FAR, CLOSE, FAR],
    });
    expect(picked['best']).toBe(2);
  });

  it('is served by the offline backend through the same schema check as graph roles', async () => {
    const backend = createOfflineBackend();
    const context = pairCtx(CLOSE, FAR);
    const prompt = comparison.render(context);
    const request: LlmRequest = {
      role: 'comparison',
      nodeId: 'comparison_1',
      model: 'offline',
      messages: [
        { role: 'system', content: prompt.system },
        { role: 'user', content: prompt.user },
      ],
      schemaName: 'comparison',
      jsonSchema: comparison.jsonSchema,
      context,
    };
    const reply = await backend.complete(request, {
      signal: new AbortController().signal,
      deadline: Date.now() + 1000,
    });
    expect(JSON.parse(reply.text)).toMatchObject({ winner: 'A' });
    expect(reply.promptTokens).toBeGreaterThan(0);
  });

  it.skipIf(!existsSync(DATASET))(
    'prefers the positive over the hard negative of the same paper in most OpenReview pairs (measured)',
    () => {
      type Row = { candidate: string; ground_truth: string; question: string; kind: string };
      const rows = readFileSync(DATASET, 'utf8')
        .split('\n')
        .filter((l) => l.trim() !== '')
        .map((l) => JSON.parse(l) as Row);
      const byGt = new Map<string, { pos?: Row; neg?: Row }>();
      for (const r of rows) {
        const e = byGt.get(r.ground_truth) ?? {};
        if (r.kind === 'positive') e.pos = r;
        if (r.kind === 'hard_negative') e.neg = r;
        byGt.set(r.ground_truth, e);
      }
      let right = 0;
      let wrong = 0;
      let ties = 0;
      for (const { pos, neg } of byGt.values()) {
        if (pos === undefined || neg === undefined) continue;
        const w = offlineComparativeAnswer(
          pairCtx(pos.candidate, neg.candidate, { question: pos.question, groundTruth: pos.ground_truth }),
        )['winner'];
        if (w === 'A') right += 1;
        else if (w === 'B') wrong += 1;
        else ties += 1;
      }
      const n = right + wrong + ties;
      // Measured on the dev set: 173 pairs, 160 right, 6 wrong, 7 ties = 0.92 (a lexical heuristic, not a judge).
      expect(n).toBeGreaterThan(100);
      expect(right / n).toBeGreaterThan(0.85);
    },
  );
});
