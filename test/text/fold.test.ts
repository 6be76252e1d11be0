import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { describe, expect, it } from 'vitest';

import { confusablesModule, parseConfusables } from '../../src/ablations/docs/confusables.js';
import { CONFUSABLES_VERSION } from '../../src/text/confusables-data.js';
import { fold, foldText } from '../../src/text/fold.js';

const root = (p: string): string => fileURLToPath(new URL(`../../${p}`, import.meta.url));

describe('the confusables table (Unicode UTS #39 data)', () => {
  const data = readFileSync(root('src/text/unicode/confusables.txt'), 'utf8');

  it('is what `npm run data:confusables` makes of the vendored file, byte for byte', () => {
    expect(readFileSync(root('src/text/confusables-data.ts'), 'utf8')).toBe(confusablesModule(data));
  });

  it("is Unicode's own file: its header, its declared total, every mapping read", () => {
    const t = parseConfusables(data);
    expect(t.version).toBe(CONFUSABLES_VERSION);
    expect(data).toContain('# Unicode Security Mechanisms for UTS #39');
    expect(t.total).toBeGreaterThan(6000);
    // Only ASCII sources are left out (see src/ablations/docs/confusables.ts).
    const ascii = data.split('\n').filter((l) => /^00[0-7][0-9A-F] ;/.test(l) && l.length > 0);
    expect(t.entries.length).toBe(t.total - ascii.length);
    expect(() => parseConfusables(`${data}\nnot a mapping line\n`)).toThrow(/unreadable line/);
  });
});

describe('fold', () => {
  it.each([
    ['Cyrillic and Greek look-alikes', 'Тhоught prосеss', 'thought process'],
    ['fullwidth forms', '＜ｔｈｉｎｋ＞', '<think>'],
    ['a Cyrillic і inside a tag', '<thіnk>', '<think>'],
    ['math alphanumerics', '𝐭𝐡𝐢𝐧𝐤', 'think'],
    ['case, full folding', 'Straße THINK', 'strasse think'],
    ['ligatures', 'ﬁne', 'fine'],
    ['compatibility superscripts (matching only)', '10⁻⁴ m²', '10-4 m2'],
  ])('%s', (_name, text, folded) => {
    expect(fold(text)).toBe(folded);
  });

  it('folds both cases of a letter alike and is idempotent', () => {
    expect(fold('ΟΦΑ')).toBe(fold('οφα'));
    for (const t of [
      'Тhоught',
      '我们提出一种方法',
      'Größe résumé',
      'ответ',
      'हिन्दी',
      'مرحبا',
      '한국어',
      '½ µm Å',
    ]) {
      expect(fold(fold(t))).toBe(fold(t));
    }
  });

  it('leaves scripts without look-alikes as they are (NFD aside)', () => {
    expect(fold('我们提出的方法')).toBe('我们提出的方法');
    expect(fold('résumé')).toBe('résumé'.normalize('NFD'));
  });
});

describe('foldText: offsets back to the source', () => {
  it('maps a match on the folded copy to the source span it came from', () => {
    const source = 'Idea ＜ｔｈｉｎｋ＞ plan ﬁx 𝐭𝐡𝐢𝐧𝐤 end';
    const f = foldText(source);
    const at = f.text.indexOf('<think>');
    expect(source.slice(f.sourceAt(at), f.sourceAt(at + 7))).toBe('＜ｔｈｉｎｋ＞');
    const bold = f.text.indexOf('think', at + 7);
    expect(source.slice(f.sourceAt(bold), f.sourceAt(bold + 5))).toBe('𝐭𝐡𝐢𝐧𝐤');
    expect(f.sourceAt(f.text.length)).toBe(source.length);
    expect(f.foldedAt(source.indexOf('plan'))).toBe(f.text.indexOf('plan'));
  });

  it('slices without folding again, with offsets relative to the slice', () => {
    const source = 'ＡＢ ﬁ CD ß end';
    const f = foldText(source);
    const s = f.slice(3, 9);
    expect(s.source).toBe(source.slice(3, 9));
    expect(s.text).toBe(fold(source.slice(3, 9)));
    expect(s.sourceAt(s.text.indexOf('cd'))).toBe(s.source.indexOf('CD'));
    expect(foldText('plain ASCII').slice(6).text).toBe('ascii');
  });

  it('handles many expansions in one text (the offset buffer grows)', () => {
    const source = `${'½ﬃ'.repeat(400)}tail`;
    const f = foldText(source);
    expect(f.text.endsWith('tail')).toBe(true);
    expect(source.slice(f.sourceAt(f.text.length - 4))).toBe('tail');
  });
});
