/**
 * Issue 38 item 11: a flood of what joins one grapheme cluster (combining marks of every script, and the
 * other characters Unicode's cluster rules chain: halfwidth sound marks, emoji modifiers, Thai/Lao AM,
 * Hangul jamo, Prepend letters) is cut before a judge sees it, with the platform's UAX #29 segmenter as
 * the catalogue over every assigned code point; writing in every script is left as it is, and no text of
 * the legitimate corpus is cut.
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { describe, expect, it } from 'vitest';

import { legitTexts, SHARED_SETS } from '../../src/ablations/docs/inputs.js';
import { prepareCandidate } from '../../src/judge/candidate.js';
import { cutClusterRuns, MAX_COMBINING_RUN, normalizeText } from '../../src/text/normalize.js';

const segmenter = new Intl.Segmenter('en', { granularity: 'grapheme' });
const clusters = (text: string): string[] => [...segmenter.segment(text)].map((s) => s.segment);
const codePointsOf = (s: string): number => [...s].length;
const longestCluster = (text: string): number => Math.max(0, ...clusters(text).map(codePointsOf));
const UNASSIGNED = /[\p{Cn}\p{Co}\p{Cs}]/u;

/** Every assigned code point that the segmenter chains into one cluster with copies of itself or a base. */
function chainingCodePoints(): Array<{ cp: number; shape: 'after' | 'before' | 'self' }> {
  const out: Array<{ cp: number; shape: 'after' | 'before' | 'self' }> = [];
  for (let cp = 0x80; cp <= 0x10ffff; cp++) {
    const c = String.fromCodePoint(cp);
    if (UNASSIGNED.test(c)) continue;
    if (clusters(`a${c}${c}`).length === 1) out.push({ cp, shape: 'after' });
    else if (clusters(`${c}${c}a`).length === 1) out.push({ cp, shape: 'before' });
    else if (clusters(`${c}${c}${c}`).length === 1) out.push({ cp, shape: 'self' });
  }
  return out;
}

describe('runs that join one grapheme cluster', () => {
  it('are cut for every code point the segmenter chains (the UAX #29 catalogue)', () => {
    const chaining = chainingCodePoints();
    // The catalogue is not empty or tiny: every script's marks, jamo, modifiers, Prepend letters.
    expect(chaining.length).toBeGreaterThan(2000);
    const escaped: string[] = [];
    for (const { cp, shape } of chaining) {
      const c = String.fromCodePoint(cp);
      const flood =
        shape === 'after' ? `a${c.repeat(40)}` : shape === 'before' ? `${c.repeat(40)}a` : c.repeat(40);
      const text = `The answer is 42 ${flood} because the series converges.`;
      const longest = longestCluster(normalizeText(text).text);
      if (longest > MAX_COMBINING_RUN + 1) escaped.push(`U+${cp.toString(16)}:${longest}`);
    }
    expect(escaped).toEqual([]);
  }, 120_000);

  it('are cut when they are mixed and interleaved with invisible characters', () => {
    const floods = [
      `e${'\u0301\u0316\u0E33\uFF9E\u{1F3FB}'.repeat(20)}`,
      `x${'\u0301\u200B\u034F'.repeat(50)}`,
      `가${'\u11A8'.repeat(60)}`,
      `${'\u1100'.repeat(30)}${'\u1161'.repeat(30)}${'\u11A8'.repeat(30)}`,
      `${'\u0D4E'.repeat(50)}ക`,
      `👍${'\u{1F3FD}'.repeat(50)}`,
      `ｶ${'\uFF9E\uFF9F'.repeat(40)}`,
    ];
    for (const flood of floods) {
      const once = normalizeText(`Idea: ${flood} end.`).text;
      // At most a run of each Hangul jamo class (L, V, T) around one syllable.
      expect(longestCluster(once)).toBeLessThanOrEqual(3 * MAX_COMBINING_RUN + 1);
      expect(normalizeText(once).text).toBe(once);
    }
  });

  it('never reach the judge: a prepared candidate carries at most the cap', () => {
    const flood = `The answer is x${'\uFF9E'.repeat(200)} = 42 because the sum of the series converges.`;
    const prepared = prepareCandidate(flood);
    expect(prepared.rejection).toBeUndefined();
    expect(longestCluster(prepared.candidate)).toBeLessThanOrEqual(MAX_COMBINING_RUN + 1);
  });

  it('leave writing in every script as it is', () => {
    const writing = [
      'Nguyễn Thị Minh Khai, phở bò, Việt Nam, người, trường, nghiêng', // Vietnamese: 2 marks
      'संस्कृत में अ॒ग्निमी॑ळे पु॒रोहि॑तं, क्षत्रिय, स्त्रीं, द्व्यर्थक', // Devanagari, Vedic accents, conjuncts
      'ภาษาไทย น้ำ ที่ นั่น กี่ ผู้ใหญ่ ก็ได้', // Thai: vowel + tone, SARA AM
      'ພາສາລາວ ນ້ຳ', // Lao
      'العَرَبِيَّةُ مُحَمَّدٌ شَدَّة', // Arabic harakat with shadda
      'בְּרֵאשִׁ֖ית בָּרָ֣א אֱלֹהִ֑ים הַשָּׁ֣מַיִם', // Hebrew niqqud and cantillation (4 marks on שָּׁ֣)
      'བསྒྲུབས་ ཧཱུྃ', // Tibetan stacks
      'ᄒᆞᆫ글 ᄀᆞᄅᆞᆷ 한국어 조선말', // archaic Hangul jamo beside syllables
      '👍🏽 🇩🇪 ｶﾞｷﾞ', // emoji modifier, flag, halfwidth katakana with its sound mark
      'Ελληνικά ἀλήθεια ᾅδης', // polytonic Greek
    ];
    for (const text of writing) {
      const nfc = text.normalize('NFC');
      expect(cutClusterRuns(nfc)).toBe(nfc);
      expect(normalizeText(text).text).toBe(nfc);
    }
  });

  it('cut no text of the legitimate corpus', () => {
    const path = (p: string): string => fileURLToPath(new URL(`../../${p}`, import.meta.url));
    const sets = SHARED_SETS.map((name): [string, string] => [name, path(`../shared/datasets/${name}.jsonl`)])
      .filter(([, file]) => existsSync(file))
      .map(([name, file]): [string, string] => [name, readFileSync(file, 'utf8')]);
    const texts = legitTexts(sets, readFileSync(path('datasets/legit-corpus.jsonl'), 'utf8'));
    expect(texts.length).toBeGreaterThan(500);
    const cut = texts.filter((t) => {
      const nfc = t.text.normalize('NFC');
      return cutClusterRuns(nfc) !== nfc;
    });
    expect(cut.map((t) => t.text.slice(0, 60))).toEqual([]);
  });
});
