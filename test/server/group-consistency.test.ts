/**
 * Issue 38 item 7: rollouts of one group that differ only in whitespace (double spaces, a line break for a
 * space, CRLF, a tab, a no-break space, any other character with the Unicode White_Space property) are one
 * rollout: prepared to one text, judged once per group, the same reward. Case is not folded (`ResNet` and
 * `resnet`, `getX` and `getx` may name different things). Property tests over generated variants of the
 * legitimate corpus, and through /v1/reward on the fake backend (real HTTP on 127.0.0.1), whose judge here
 * answers at random per call (a sampling judge): one call per group, one reward.
 */
import { describe, expect, it } from 'vitest';

import { canonicalWhitespace, prepareCandidate, type PreparedCandidate } from '../../src/judge/candidate.js';
import { createRng } from '../../src/math/sampling.js';
import { normalized } from '../../src/text/normalize.js';
import { universalReply, type FakeReply } from '../fakes/openai.js';
import { legitimateSamples, WHITE_SPACE, type Sample } from '../support/markup-fuzz.js';
import { GROUND_TRUTH, QUESTION, useHarness } from './helpers.js';

/**
 * A whitespace variant of `text`: each whitespace run replaced by 1–3 random White_Space characters (CRLF
 * too), except a run beside a bracketed token (`<eos>`, `</think>`, `[EOS]`): there the line layout decides
 * whether the token was emitted or mentioned (src/text/markers.ts), which is markup, not whitespace.
 */
function whitespaceVariant(text: string, rng: () => number): string {
  const run = (): string => {
    let s = '';
    const n = 1 + Math.floor(rng() * 3);
    for (let k = 0; k < n; k++)
      s += rng() < 0.15 ? '\r\n' : (WHITE_SPACE[Math.floor(rng() * WHITE_SPACE.length)] ?? ' ');
    return s;
  };
  const lead = rng() < 0.3 ? run() : '';
  const tail = rng() < 0.3 ? run() : '';
  const varied = text.replace(/\p{White_Space}+/gu, (ws: string, at: number) =>
    /[<>[\]◁▷]/.test(`${text.charAt(at - 1)}${text.charAt(at + ws.length)}`) ? ws : run(),
  );
  return `${lead}${varied}${tail}`;
}

/** The legitimate corpus with each text's own preparation, computed once for the three variant tests. */
let corpus: { s: Sample; options: { question: string }; want: PreparedCandidate }[] | undefined;
function preparedCorpus(): NonNullable<typeof corpus> {
  corpus ??= legitimateSamples().map((s) => {
    const options = { question: normalized(s.question) };
    return { s, options, want: prepareCandidate(s.text, options) };
  });
  return corpus;
}

describe('whitespace-only differences are one rollout (issue 38 item 7)', () => {
  it('covers every White_Space character (no-break and the other separators included)', () => {
    expect(WHITE_SPACE).toHaveLength(25);
    for (const c of ['\t', '\n', '\r', '\u00A0', '\u2028', '\u3000', '\u202F', '\u1680'])
      expect(WHITE_SPACE).toContain(c);
  });

  // One test per variant (each over the whole corpus, its own seed), so no single test carries the
  // corpus three times under a loaded machine's timeout.
  it.each([1, 2, 3])(
    'prepares whitespace variant %i of every corpus text to the same text and outcome',
    (variantNo) => {
      const rng = createRng(3807 + variantNo);
      const bad: string[] = [];
      for (const { s, options, want } of preparedCorpus()) {
        const variant = whitespaceVariant(s.text, rng);
        const got = prepareCandidate(variant, options);
        const same =
          got.rejection === want.rejection &&
          (got.rejection !== undefined || got.candidate === want.candidate);
        if (!same) bad.push(JSON.stringify(variant));
      }
      expect(bad).toEqual([]);
    },
  );

  it('keeps case: rollouts differing in case are different rollouts', () => {
    const idea =
      'Replace the ResNet backbone getX call with a learned contrastive projection over paired web data.';
    expect(prepareCandidate(idea.toLowerCase()).candidate).not.toBe(prepareCandidate(idea).candidate);
  });

  it('the whitespace-canonical form is what is judged: no double space, tab or line break reaches the judge', () => {
    const idea =
      'Align the\u00A0image  and\ttext encoders\r\nwith a symmetric\u2028contrastive loss over pairs.';
    expect(prepareCandidate(idea).candidate).toBe(canonicalWhitespace(idea));
    expect(canonicalWhitespace(idea)).toBe(
      'Align the image and text encoders with a symmetric contrastive loss over pairs.',
    );
  });
});

describe('one group, whitespace variants: judged once, one reward (issue 38 item 7)', () => {
  const harness = useHarness();
  const rng = createRng(7);
  /** A sampling judge: each call a fresh coin flip. */
  const coin = (): FakeReply => ({
    kind: 'json',
    body: universalReply(rng() < 0.5 ? 'match' : 'no_match', 0.9),
  });

  it('8 variants of one idea in a /v1/reward group: one call, 8 equal rewards (5 groups)', async () => {
    const idea =
      'Align the image and text encoders with a symmetric contrastive InfoNCE loss over large batches of paired web data.';
    const variants = createRng(11);
    for (let g = 0; g < 5; g++) {
      const h = await harness({ fake: { fallback: coin } });
      const candidates = Array.from({ length: 8 }, () => whitespaceVariant(`${idea} Group ${g}.`, variants));
      expect(new Set(candidates).size).toBeGreaterThan(1);
      const res = await h.app.inject({
        method: 'POST',
        url: '/v1/reward',
        payload: { question: QUESTION, ground_truth: GROUND_TRUTH, candidates, graph: 'single-judge' },
      });
      expect(res.statusCode).toBe(200);
      const rewards = res.json<{ rewards: number[] }>().rewards;
      expect(new Set(rewards).size).toBe(1);
      expect(h.fake.callCount).toBe(1);
    }
  });
});
