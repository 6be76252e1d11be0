import { describe, expect, it } from 'vitest';

import {
  hasChatTokens,
  lastUserTurn,
  responseAfterPrompt,
  stripChatTokens,
} from '../../src/text/chat-tokens.js';

const Q = 'How can vision and language be aligned?';
const SYS = 'You propose research ideas.';

describe('lastUserTurn', () => {
  it.each([
    [
      'ChatML',
      `<|im_start|>system\n${SYS}<|im_end|>\n<|im_start|>user\nold<|im_end|>\n<|im_start|>assistant\nx<|im_end|>\n<|im_start|>user\n${Q}<|im_end|>\n<|im_start|>assistant\n`,
    ],
    [
      'Llama 3',
      `<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n${SYS}<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n${Q}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n`,
    ],
    ['Gemma', `<bos><start_of_turn>user\n${Q}<end_of_turn>\n<start_of_turn>model\n`],
    ['DeepSeek', `<｜begin▁of▁sentence｜>${SYS}<｜User｜>${Q}<｜Assistant｜>`],
    ['Llama 2', `<s>[INST] <<SYS>>\n${SYS}\n<</SYS>>\n\n${Q} [/INST]`],
    ['Mistral, two turns', `<s>[INST] old [/INST] x</s>[INST] ${Q} [/INST]`],
    ['Phi-3', `<|system|>\n${SYS}<|end|>\n<|user|>\n${Q}<|end|>\n<|assistant|>\n`],
  ])('%s → the last user turn, without the system text', (_family, prompt) => {
    expect(lastUserTurn(prompt)).toBe(Q);
  });

  it('is undefined for a plain prompt', () => {
    expect(lastUserTurn(Q)).toBeUndefined();
  });
});

describe('responseAfterPrompt', () => {
  const prompt = `<|im_start|>user\n${Q}<|im_end|>\n<|im_start|>assistant\n`;
  it('finds the response despite pad/BOS tokens, whitespace and NFKC differences', () => {
    // The response as the query spells it: its own end-of-turn token stays (preparation cuts there).
    expect(responseAfterPrompt(`<pad><pad><|endoftext|>${prompt}The idea.<|im_end|>`, prompt)).toBe(
      'The idea.<|im_end|>',
    );
    expect(responseAfterPrompt(`${prompt.replace(' and ', '  and\n')}The idea.`, `<s>${prompt}`)).toBe(
      'The idea.',
    );
    expect(responseAfterPrompt(`${prompt.replace('How', 'Ｈｏｗ')}The idea.`, prompt)).toBe('The idea.');
  });

  it('is undefined when the query does not start with the prompt', () => {
    expect(
      responseAfterPrompt(`<|im_start|>user\nanother question<|im_end|>The idea.`, prompt),
    ).toBeUndefined();
    expect(responseAfterPrompt('short', prompt)).toBeUndefined();
  });
});

describe('stripChatTokens', () => {
  it('keeps ordinary brackets and angle text', () => {
    const text = 'Compare a < b and [1] with <think> tags and $& replacement patterns.';
    expect(stripChatTokens(text)).toBe(text);
    expect(hasChatTokens(text)).toBe(false);
  });

  it('keeps words on either side of a removed token apart', () => {
    expect(stripChatTokens('first<|im_end|>second')).toBe('first\nsecond');
    expect(hasChatTokens('first<|im_end|>second')).toBe(true);
  });
});
