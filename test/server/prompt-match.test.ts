/**
 * Issue 38 item 3: any comparison of two texts uses one normalisation on both sides; canonically equivalent
 * texts never mismatch. OpenRLHF's prompt is found at the start of its query whatever canonical spelling
 * either side uses (`e` + U+0301, Vietnamese, conjoining Hangul): a property test over generated NFC, NFD
 * and mixed variants of the legitimate corpus, and the route itself (no `400 RW_PROMPT_MISMATCH`).
 */
import { describe, expect, it } from 'vitest';

import { createRng } from '../../src/math/sampling.js';
import { candidateFromQuery } from '../../src/server/http/routes/adapters.js';
import { sameText } from '../../src/text/same-text.js';
import { legitimateSamples } from '../support/markup-fuzz.js';
import { GROUND_TRUTH, useHarness } from './helpers.js';

const CHATML = (user: string) =>
  `<|im_start|>system\nYou propose research ideas.<|im_end|>\n<|im_start|>user\n${user}<|im_end|>\n<|im_start|>assistant\n`;
const RESPONSE = 'Align the image and text encoders with a symmetric contrastive loss over paired web data.';

/** A canonically equivalent spelling of `text`: NFC, NFD, or each word in one of them at random. */
function spelling(text: string, rng: () => number): string {
  const r = rng();
  if (r < 0.3) return text.normalize('NFC');
  if (r < 0.6) return text.normalize('NFD');
  return text
    .split(' ')
    .map((w) => w.normalize(rng() < 0.5 ? 'NFC' : 'NFD'))
    .join(' ');
}

const EXAMPLES = [
  'Can re\u0301sume\u0301 parsing be learned?',
  'Làm thế nào để mô hình ngôn ngữ học được suy luận?',
  'Tie\u0302\u0301ng Vie\u0323\u0302t có dấu',
  '\u1112\u1161\u11AB\u1100\u116E\u11A8\u110B\u1165 reasoning', // conjoining jamo: 한국어
  '한국어 모델은 어떻게 정렬할 수 있습니까?',
];

describe('canonically equivalent prompts never mismatch (issue 38 item 3)', () => {
  it('the issue examples, each side in NFC and NFD', () => {
    for (const q of EXAMPLES)
      for (const a of ['NFC', 'NFD'] as const)
        for (const b of ['NFC', 'NFD'] as const) {
          const got = candidateFromQuery(`${CHATML(q.normalize(a))}${RESPONSE}`, CHATML(q.normalize(b)));
          expect(got, `${a}/${b} ${q}`).toBe(RESPONSE);
        }
  });

  it('every corpus text with a non-ASCII letter, prompt and query in independent spellings (2 each)', () => {
    const rng = createRng(383);
    const texts = legitimateSamples()
      .map((s) => s.text)
      .filter((t) => t.normalize('NFD') !== t.normalize('NFC') && !t.includes('<') && !t.includes('['));
    expect(texts.length).toBeGreaterThan(100);
    const bad: string[] = [];
    for (const t of texts)
      for (let k = 0; k < 2; k++) {
        const prompt = CHATML(spelling(t, rng));
        const query = `${CHATML(spelling(t, rng))}${RESPONSE}`;
        let got: string | undefined;
        try {
          got = candidateFromQuery(query, prompt);
        } catch {
          got = undefined;
        }
        if (got !== RESPONSE) bad.push(t.slice(0, 60));
      }
    expect(bad).toEqual([]);
  });

  it('still refuses a query that does not start with its prompt (a different letter, not a spelling)', () => {
    expect(() =>
      candidateFromQuery(
        `${CHATML('Can résumé parsing be learned?')}x`,
        CHATML('Can resume parsing be learned?'),
      ),
    ).toThrow(/does not start/);
    expect(sameText('re\u0301sume\u0301', 'résumé')).toBe(true);
    expect(sameText('resume', 'résumé')).toBe(false);
  });
});

describe('/get_reward with an accent (issue 38 item 3)', () => {
  const harness = useHarness();

  it('judges the batch (no 400) when prompt and query hold e + U+0301 byte for byte, or the query é', async () => {
    const h = await harness();
    const prompts = EXAMPLES.map((q) => CHATML(q.normalize('NFD')));
    const res = await h.app.inject({
      method: 'POST',
      url: '/get_reward',
      payload: {
        query: EXAMPLES.flatMap((q) => [
          `${CHATML(q.normalize('NFD'))}${RESPONSE}`,
          `${CHATML(q.normalize('NFC'))}${RESPONSE}`,
        ]),
        prompts: prompts.flatMap((p) => [p, p]),
        labels: prompts.flatMap(() => [GROUND_TRUTH, GROUND_TRUTH]),
      },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json<{ rewards: number[] }>().rewards).toHaveLength(2 * EXAMPLES.length);
  });
});
