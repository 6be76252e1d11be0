/**
 * Issue 38 item 1: preparation is idempotent on everything. For every input x, preparing x's prepared text
 * gives the same text and the same outcome: `prepare(prepare(x).candidate)` passes with that text exactly
 * when `prepare(x)` passed, and a rejected x keeps its text and reason. Property tests over the legitimate
 * corpus (datasets/legit-corpus.jsonl, the repo's labelled samples, ../shared/datasets/*.jsonl), every
 * reward-hacking probe of the repo over its labelled samples, and seeded random interleavings of the
 * catalogues' markers, chat tokens and White_Space characters.
 */
import { describe, expect, it } from 'vitest';

import { prepareCandidate, type CandidateOptions } from '../../src/judge/candidate.js';
import { normalized } from '../../src/text/normalize.js';
import { fuzzedMarkup, hostileSamples, legitimateSamples, type Sample } from '../support/markup-fuzz.js';

/** The inputs where preparing twice differs from preparing once (empty: idempotent). */
function notIdempotent(
  samples: readonly Sample[],
  formats: CandidateOptions['reasoningFormat'][] = ['auto'],
) {
  const bad: Array<{ text: string; once: unknown; twice: unknown }> = [];
  for (const s of samples) {
    for (const reasoningFormat of formats) {
      const options = { question: normalized(s.question), reasoningFormat };
      const once = prepareCandidate(s.text, options);
      const twice = prepareCandidate(once.candidate, options);
      if (twice.candidate !== once.candidate || twice.rejection !== once.rejection)
        bad.push({ text: s.text, once, twice });
    }
  }
  return bad;
}

describe('prepare is idempotent (issue 38 item 1)', () => {
  it("the issue's example: a closing tag a mention mid-text, first once trimmed", () => {
    const r1 = prepareCandidate('<think>\nreasoning\n</think>\n </think> image text InfoNCE');
    const r2 = prepareCandidate('</think> image text InfoNCE');
    expect(prepareCandidate(r1.candidate).rejection).toBe(r1.rejection);
    expect(r1.rejection).toBe(r2.rejection);
    // The same shape with an answer long enough to judge: both are that answer.
    const idea = 'image and text encoders aligned by a symmetric InfoNCE loss over web-scale pairs';
    const a = prepareCandidate(`<think>\nr\n</think>\n </think> ${idea}`);
    expect(a.candidate).toBe(idea);
    expect(a.rejection).toBeUndefined();
    expect(prepareCandidate(`</think> ${idea}`).candidate).toBe(idea);
  });

  it('on the legitimate corpus', () => {
    const samples = legitimateSamples();
    expect(samples.length).toBeGreaterThan(1000);
    expect(notIdempotent(samples)).toEqual([]);
  });

  it('on every hostile probe of the repo, under auto, think, harmony and none', () => {
    const samples = hostileSamples();
    expect(samples.length).toBeGreaterThan(300);
    expect(notIdempotent(samples, ['auto', 'think', 'harmony', 'none'])).toEqual([]);
  });

  it('on 4000 seeded interleavings of markers, chat tokens and White_Space', () => {
    const samples = fuzzedMarkup(38, 4000).map((text) => ({ source: 'fuzz', text, question: '' }));
    expect(notIdempotent(samples, ['auto', 'deepseek_r1'])).toEqual([]);
  });

  it('on fuzzed markup wrapped around real ideas (the answer long enough to be judged)', () => {
    const ideas = legitimateSamples().slice(0, 400);
    const markup = fuzzedMarkup(3801, ideas.length * 2);
    const samples = ideas.flatMap((s, i) => [
      { ...s, text: `${markup[2 * i] ?? ''}${s.text}` },
      { ...s, text: `${s.text}${markup[2 * i + 1] ?? ''}` },
    ]);
    expect(notIdempotent(samples)).toEqual([]);
  });
});
