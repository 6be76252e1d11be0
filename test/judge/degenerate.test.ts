import { describe, expect, it } from 'vitest';

import { checkCandidate, DEFAULT_CANDIDATE_LIMITS } from '../../src/judge/degenerate.js';

const IDEA = 'Regularize the input Jacobian adversarially so it resembles natural images.';
const check = (candidate: string) => checkCandidate(candidate, DEFAULT_CANDIDATE_LIMITS);

describe('checkCandidate', () => {
  it('has the documented default limits', () => {
    expect(DEFAULT_CANDIDATE_LIMITS).toEqual({ minChars: 20, maxChars: 8000 });
    expect(Object.isFrozen(DEFAULT_CANDIDATE_LIMITS)).toBe(true);
  });

  it('accepts a real idea', () => {
    expect(check(IDEA)).toEqual({ ok: true });
    expect(check(`  \n${IDEA}\n  `)).toEqual({ ok: true });
  });

  it.each(['', ' ', '\n\t  \r\n', '\u00a0\u3000'])('rejects empty or whitespace-only %j as empty', (c) => {
    expect(check(c)).toEqual({ ok: false, reason: 'empty' });
  });

  it.each(['\u0000', '\u0000\u0000\u0000', '\u0007 \u0000\n\u001b', '\u200b\u200b\ufeff'])(
    'rejects control/format-only %j',
    (c) => {
      expect(check(c)).toEqual({ ok: false, reason: 'control_only' });
    },
  );

  it.each([
    ':',
    '.',
    '...',
    ' : ',
    'Thought process:',
    'THOUGHT PROCESS',
    "Let's solve this step by step.",
    'Let’s solve this problem step by step!',
    'Solution',
    'Solution:',
    'Answer:',
    'The answer is:',
    'Sure!',
    'Sure, here is my idea:',
    '**Final Answer**',
    'N/A',
    '🙂🙂🙂',
    'Here is the solution to the problem below, step by step:',
    'We propose a novel method and show that it achieves improved results.',
    '1234567890 1234567890 1234567890',
  ])('rejects the master-key filler %j', (c) => {
    expect(check(c)).toEqual({ ok: false, reason: 'master_key_filler' });
  });

  it('rejects a short real phrase as too_short, at the boundary', () => {
    expect(check('Jacobian GANs')).toEqual({ ok: false, reason: 'too_short' });
    expect(checkCandidate('Jacobian GAN x', { minChars: 14, maxChars: 100 })).toEqual({ ok: true });
    expect(checkCandidate('Jacobian GAN', { minChars: 14, maxChars: 100 })).toEqual({
      ok: false,
      reason: 'too_short',
    });
  });

  it('counts characters as code points', () => {
    const emojiIdea = 'Jacobian 😀😀😀😀😀😀';
    expect(checkCandidate(emojiIdea, { minChars: 15, maxChars: 100 })).toEqual({ ok: true });
    expect(checkCandidate(emojiIdea, { minChars: 16, maxChars: 100 })).toEqual({
      ok: false,
      reason: 'too_short',
    });
  });

  it('rejects over maxChars as too_long, at the boundary', () => {
    const limits = { minChars: 5, maxChars: IDEA.length };
    expect(checkCandidate(IDEA, limits)).toEqual({ ok: true });
    expect(checkCandidate(`${IDEA}x`, limits)).toEqual({ ok: false, reason: 'too_long' });
    expect(check('word '.repeat(2_000))).toEqual({ ok: false, reason: 'too_long' });
  });

  it('does not treat a long text starting with a filler as filler', () => {
    expect(check(`Thought process: ${IDEA}`)).toEqual({ ok: true });
    expect(check(`Answer: ${IDEA}`)).toEqual({ ok: true });
  });
});
