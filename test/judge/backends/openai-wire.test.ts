import { describe, expect, it } from 'vitest';

import { readCompletion } from '../../../src/judge/backends/openai-wire.js';

const body = (usage: unknown): string =>
  JSON.stringify({ model: 'm', choices: [{ message: { content: '{"a":1}' } }], usage });

function cached(usage: unknown): number | null {
  const read = readCompletion(body(usage), 'm');
  if (!read.ok) throw new Error(read.message);
  return read.completion.cachedPromptTokens;
}

describe('readCompletion: cached prompt tokens', () => {
  it('reads usage.prompt_tokens_details.cached_tokens (vLLM, OpenAI)', () => {
    expect(cached({ prompt_tokens: 900, prompt_tokens_details: { cached_tokens: 640 } })).toBe(640);
    expect(cached({ prompt_tokens: 900, prompt_tokens_details: { cached_tokens: 0 } })).toBe(0);
  });

  it('is null (unknown), not 0, when the backend does not report it', () => {
    expect(cached({ prompt_tokens: 900 })).toBeNull();
    expect(cached(undefined)).toBeNull();
    expect(cached({ prompt_tokens: 900, prompt_tokens_details: null })).toBeNull();
    expect(cached({ prompt_tokens: 900, prompt_tokens_details: {} })).toBeNull();
  });

  it('is null for a value that is not a count', () => {
    for (const bad of [-1, '640', Number.NaN, null, true]) {
      expect(cached({ prompt_tokens_details: { cached_tokens: bad } }), String(bad)).toBeNull();
    }
  });
});
