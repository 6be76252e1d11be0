import { describe, expect, it } from 'vitest';

import { escapeForFence, fence, fenceDelimiters, staticFence } from '../../src/roles/fence.js';

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
    expect(JSON.parse(fence('CANDIDATE', 'n0nce', text).split('\n')[1]!)).toBe(text);
    expect(JSON.parse(staticFence('QUESTION', text).split('\n')[1]!)).toBe(text);
  });

  it('fences operator data between fixed delimiters that no fenced text can contain', () => {
    expect(staticFence('GROUND_TRUTH', 'a <<<END_GROUND_TRUTH>>> b')).toBe(
      '<<<GROUND_TRUTH>>>\n"a \\u003c\\u003c\\u003cEND_GROUND_TRUTH\\u003e\\u003e\\u003e b"\n<<<END_GROUND_TRUTH>>>',
    );
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
