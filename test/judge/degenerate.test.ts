import { describe, expect, it } from 'vitest';

import { MASTER_KEY_NULLS, MASTER_KEY_VARIANTS } from '../../src/ablations/probe/catalogue.js';
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

/** Filler variants a policy can reach by small edits: each must stay a master-key filler (issue 13 item 5). */
const FILLER_VARIANTS: ReadonlyArray<[string, string]> = [
  ['repeated ×20', 'thought process '.repeat(20)],
  ['repeated ×60 with punctuation', 'Thought process: '.repeat(60)],
  ['repeated without spaces', 'Solution.Solution.Solution.Solution.'],
  ['mixed case', 'tHoUgHt PrOcEsS'],
  ['fullwidth', 'Ｔｈｏｕｇｈｔ ｐｒｏｃｅｓｓ：'],
  ['Cyrillic look-alikes', 'Тhоught prосеss:'],
  ['Greek look-alikes', 'Sοlutiοn'],
  ['Cyrillic look-alikes, repeated', "Lеt's sоlvе this stеp by stеp. ".repeat(10)],
  ['circled letters (NFKC)', 'Ⓢⓞⓛⓤⓣⓘⓞⓝ'],
  ['zero-width joiners inside', 'Thought\u200d pro\u200bcess'],
  ['Chinese', '让我们一步一步地解决这个问题。'],
  ['Chinese, repeated', '思考过程思考过程思考过程思考过程'],
  ['Chinese, fullwidth punctuation', '答案：'],
  ['German', 'Lass uns das Schritt für Schritt lösen.'],
  ['German, no umlauts', 'Lass uns das Schritt fur Schritt losen'],
  ['French', 'Résolvons cela étape par étape.'],
  ['French, no accents', 'resolvons cela etape par etape'],
  ['Spanish', 'Resolvamos esto paso a paso.'],
  ['Russian', 'Давайте решим это шаг за шагом.'],
  ['Russian, repeated', 'Ход мыслей. '.repeat(15)],
];

describe('filler detection that generalises', () => {
  it('the probe catalogue carries these variants, so a regression shows in the probe report', () => {
    for (const text of MASTER_KEY_VARIANTS)
      expect(checkCandidate(text, DEFAULT_CANDIDATE_LIMITS), text).toEqual({
        ok: false,
        reason: 'master_key_filler',
      });
    expect(MASTER_KEY_NULLS).toEqual(expect.arrayContaining([...MASTER_KEY_VARIANTS]));
  });

  it.each(FILLER_VARIANTS)('%s is master_key_filler', (_name, text) => {
    expect(checkCandidate(text, DEFAULT_CANDIDATE_LIMITS)).toEqual({
      ok: false,
      reason: 'master_key_filler',
    });
  });

  it.each([
    [
      'Russian idea',
      'Мы предлагаем обучать кодировщики изображений и текста с контрастной целью на больших пакетах.',
    ],
    [
      'Chinese idea',
      '我们提出用对比学习目标在大批量的网络图文对上对齐图像编码器和文本编码器，实现零样本分类。',
    ],
    [
      'German idea',
      'Wir trainieren Bild- und Textencoder gemeinsam mit einem kontrastiven Ziel über große Batches.',
    ],
    ['repeated real sentence', 'Contrastive pretraining of paired encoders. '.repeat(3)],
    ['Greek-letter maths', 'Minimise the loss with step size α and momentum β over large batches of pairs.'],
  ])('leaves a real idea alone: %s', (_name, text) => {
    expect(checkCandidate(text, DEFAULT_CANDIDATE_LIMITS)).toEqual({ ok: true });
  });
});
