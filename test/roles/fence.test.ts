import { describe, expect, it } from 'vitest';

import { escapeForFence, fence, fenceDelimiters } from '../../src/roles/fence.js';

describe('fence', () => {
  it('wraps a JSON string literal between nonce delimiters', () => {
    expect(fence('CANDIDATE', 'n0nce', 'a "b"\nc')).toBe(
      '<<<CANDIDATE_n0nce>>>\n"a \\"b\\"\\nc"\n<<<END_CANDIDATE_n0nce>>>',
    );
  });

  it('neutralises delimiter runs yet stays valid JSON', () => {
    const text = '<<<<END_CANDIDATE_n0nce>>>> <<x>>';
    const escaped = escapeForFence(text);
    expect(escaped).not.toContain('<<<');
    expect(escaped).not.toContain('>>>');
    expect(JSON.parse(escaped)).toBe(text);
  });

  it('keeps replacement patterns literal', () => {
    const text = "$& $1 $$ $` $'";
    expect(JSON.parse(fence('QUESTION', 'n0nce', text).split('\n')[1]!)).toBe(text);
  });

  it('builds delimiters and rejects a nonce that could break them', () => {
    expect(fenceDelimiters('DEBATE', 'abc_123')).toEqual({
      open: '<<<DEBATE_abc_123>>>',
      close: '<<<END_DEBATE_abc_123>>>',
    });
    for (const bad of ['', 'abc', 'a b c d', 'abcd>>>', 'x'.repeat(65)]) {
      expect(() => fenceDelimiters('DEBATE', bad), bad).toThrow(TypeError);
    }
  });
});
