import { describe, expect, it } from 'vitest';

import {
  cosine,
  marginConfidence,
  matchProbability,
  methodSimilarity,
  stem,
  termVector,
  tokenize,
  topTerms,
} from '../../src/text/similarity.js';

describe('text utilities', () => {
  it('tokenizes content words, dropping stopwords, generic academic words and numbers', () => {
    expect(
      tokenize('We propose a novel method: 3 Jacobian regularizers for GANs.').map((t) => t.surface),
    ).toEqual(['jacobian', 'regularizers', 'gans']);
  });

  it('stems inflections of a word to the same term', () => {
    expect(stem('regularization')).toBe(stem('regularized'));
    expect(stem('networks')).toBe(stem('network'));
    expect(stem('studies')).toBe(stem('study'));
    expect(stem('gan')).toBe('gan');
  });

  it('cosine is 1 for the same text, 0 for disjoint or empty, symmetric', () => {
    const a = termVector('graph neural network message passing');
    const b = termVector('protein folding energy landscape');
    expect(cosine(a, a)).toBeCloseTo(1, 10);
    expect(cosine(a, b)).toBe(0);
    expect(cosine(a, new Map())).toBe(0);
    const c = termVector('message passing over protein graphs');
    expect(cosine(a, c)).toBeCloseTo(cosine(c, a), 12);
    expect(cosine(a, c)).toBeGreaterThan(0);
  });

  it('sublinear tf: repeating a word does not dominate the vector', () => {
    const v = termVector('jacobian jacobian jacobian jacobian robustness');
    expect(v.get(stem('jacobian'))).toBeCloseTo(1 + Math.log(4));
    expect(v.get(stem('robustness'))).toBe(1);
  });

  it('statistics weighting discounts question terms; novelty adds bigrams', () => {
    const stats = termVector('graph attention for molecules', 'statistics', 'molecules');
    expect(stats.get(stem('molecules'))).toBeCloseTo(0.6);
    expect(stats.get(stem('graph'))).toBe(1);
    const novelty = termVector('graph attention', 'novelty');
    expect(novelty.has(`${stem('graph')} ${stem('attention')}`)).toBe(true);
  });

  it('methodSimilarity ranks a paraphrase above an unrelated text', () => {
    const groundTruth =
      'We regularize the input Jacobian of classifiers adversarially to improve robustness.';
    const para = methodSimilarity({
      question: '',
      candidate: 'Adversarial Jacobian regularization improves robustness.',
      groundTruth,
    });
    const other = methodSimilarity({
      question: '',
      candidate: 'Contrastive pretraining of speech encoders.',
      groundTruth,
    });
    expect(para).toBeGreaterThan(0.32);
    expect(other).toBeLessThan(0.1);
  });

  it('confidence grows with the margin and is symmetric', () => {
    expect(marginConfidence(0)).toBe(0.5);
    expect(marginConfidence(0.1)).toBeGreaterThan(0.75);
    expect(marginConfidence(-0.1)).toBe(marginConfidence(0.1));
    expect(matchProbability(-0.1)).toBeCloseTo(1 - matchProbability(0.1), 12);
  });

  it('topTerms orders by count then first occurrence, excluding given terms', () => {
    expect(topTerms('beta alpha beta gamma alpha beta', 2)).toEqual(['beta', 'alpha']);
    expect(topTerms('beta alpha beta gamma', 5, new Set([stem('beta')]))).toEqual(['alpha', 'gamma']);
  });
});
