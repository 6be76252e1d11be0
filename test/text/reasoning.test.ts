import { describe, expect, it } from 'vitest';

import { extractAnswer, traceOpenedBy } from '../../src/text/reasoning.js';

const ANSWER = 'Align the two encoders with a symmetric contrastive loss over large batches.';
const TRACE = 'The ground truth probably mentions InfoNCE and zero-shot transfer, so I should say those.';

describe('extractAnswer: think blocks', () => {
  it('takes the answer after a closed <think>, <thinking> or <reasoning> block, in any case', () => {
    for (const [open, close] of [
      ['<think>', '</think>'],
      ['<THINK>', '</Think>'],
      ['<thinking>', '</thinking>'],
      ['<reasoning>', '</reasoning>'],
      ['< think >', '< / think >'],
    ]) {
      const text = `${open}${TRACE}${close}\n\n${ANSWER}`;
      const e = extractAnswer(text, 'think');
      expect(e).toEqual({
        kind: 'answer',
        answer: `\n\n${ANSWER}`,
        reasoningChars: text.length - ANSWER.length - 2,
      });
    }
  });

  it('takes the answer after the last closed block when there are several', () => {
    const e = extractAnswer(`<think>a</think>draft<think>b</think>${ANSWER}`, 'auto');
    expect(e).toMatchObject({ kind: 'answer', answer: ANSWER });
  });

  it('takes the answer after a closing tag whose opening tag was in the prompt (Qwen3, DeepSeek-R1)', () => {
    expect(extractAnswer(`${TRACE}\n</think>\n${ANSWER}`, 'auto')).toMatchObject({
      kind: 'answer',
      answer: `\n${ANSWER}`,
    });
  });

  it('calls an opening tag never closed a truncated trace, also after a closed block', () => {
    expect(extractAnswer(`<think>${TRACE}`, 'think').kind).toBe('truncated');
    expect(extractAnswer(`<think>a</think>${ANSWER}\n<thinking>more`, 'auto').kind).toBe('truncated');
    expect(extractAnswer(`<think>a</think>  <think>more`, 'auto').kind).toBe('truncated');
    expect(extractAnswer(`${ANSWER}\n <reasoning>`, 'auto')).toEqual({
      kind: 'truncated',
      reasoningChars: ANSWER.length + 13,
    });
  });

  it('keeps a tag mentioned inside a sentence as text (an idea about reasoning models)', () => {
    const idea = `Train the policy to emit <think> tags only when a verifier is uncertain. ${ANSWER}`;
    expect(extractAnswer(idea, 'auto')).toEqual({ kind: 'answer', answer: idea, reasoningChars: 0 });
  });

  it('answers an empty answer after a closed block (the degenerate checks make it `empty`)', () => {
    expect(extractAnswer(`<think>${TRACE}</think>   `, 'auto')).toMatchObject({
      kind: 'answer',
      answer: '   ',
    });
  });

  it('leaves text without tags alone, and `none` leaves everything alone', () => {
    expect(extractAnswer(ANSWER, 'auto')).toEqual({ kind: 'answer', answer: ANSWER, reasoningChars: 0 });
    const tagged = `<think>${TRACE}`;
    expect(extractAnswer(tagged, 'none')).toEqual({ kind: 'answer', answer: tagged, reasoningChars: 0 });
    // `harmony` does not read think tags.
    expect(extractAnswer(tagged, 'harmony')).toEqual({ kind: 'answer', answer: tagged, reasoningChars: 0 });
  });
});

describe('extractAnswer: gpt-oss harmony channels', () => {
  const analysis = `<|channel|>analysis<|message|>${TRACE}<|end|>`;
  const final = `<|start|>assistant<|channel|>final<|message|>${ANSWER}`;

  it('takes the body of the last final message, with or without its <|return|>', () => {
    for (const text of [`${analysis}${final}<|return|>`, `${analysis}${final}`]) {
      const e = extractAnswer(text, 'harmony');
      expect(e).toEqual({ kind: 'answer', answer: ANSWER, reasoningChars: text.indexOf(ANSWER) });
      expect(extractAnswer(text, 'auto')).toEqual(e);
    }
  });

  it('skips a commentary (tool call) message before the final one', () => {
    const text = `${analysis}<|start|>assistant<|channel|>commentary to=functions.search <|constrain|>json<|message|>{"q":"x"}<|call|>${final}`;
    expect(extractAnswer(text, 'auto')).toMatchObject({ kind: 'answer', answer: ANSWER });
  });

  it('calls an analysis message that never ended truncated', () => {
    expect(extractAnswer(`<|channel|>analysis<|message|>${TRACE}`, 'harmony').kind).toBe('truncated');
    expect(
      extractAnswer(`${analysis}${final}<|end|><|start|>assistant<|channel|>analysis<|message|>more`, 'auto')
        .kind,
    ).toBe('truncated');
  });

  it('answers what follows an ended analysis when no final message came', () => {
    expect(extractAnswer(`${analysis}`, 'harmony')).toMatchObject({ kind: 'answer', answer: '' });
  });

  it('reads the decode with special tokens skipped by its assistantfinal marker', () => {
    expect(extractAnswer(`analysis${TRACE}assistantfinal${ANSWER}`, 'auto')).toMatchObject({
      kind: 'answer',
      answer: ANSWER,
    });
    // Not at the start: an ordinary text that happens to hold the word.
    const text = `An analysis of assistantfinal tokens. ${ANSWER}`;
    expect(extractAnswer(text, 'auto')).toMatchObject({ answer: text });
  });

  it('ignores harmony channels under `think`', () => {
    const text = `<|channel|>analysis<|message|>${TRACE}`;
    expect(extractAnswer(text, 'think')).toMatchObject({ kind: 'answer', answer: text });
  });
});

describe('traceOpenedBy', () => {
  it('finds a trailing <think> (and harmony analysis opener) in a templated prompt', () => {
    expect(traceOpenedBy('<|im_start|>assistant\n<think>\n', 'auto')).toBe('<think>\n');
    expect(traceOpenedBy('<|start|>assistant<|channel|>analysis<|message|>', 'auto')).toBe(
      '<|channel|>analysis<|message|>',
    );
    expect(traceOpenedBy('<|im_start|>assistant\n<think>\n\n</think>\n\n', 'auto')).toBeUndefined();
    expect(traceOpenedBy('<|im_start|>assistant\n<think>\n', 'none')).toBeUndefined();
    expect(traceOpenedBy('<|im_start|>assistant\n<think>\n', 'harmony')).toBeUndefined();
  });
});
