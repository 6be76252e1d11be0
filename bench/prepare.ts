/**
 * CPU per candidate of the "what is judged" path (src/judge/candidate.ts: normaliser, reasoning-trace
 * extraction, chat tokens, degenerate and no-method checks), which serving runs once per item and the
 * engine once more. Median of `--rounds` timed rounds of `--n` calls each, per kind of rollout.
 *
 *   npx tsx bench/prepare.ts [--n 500] [--rounds 5]
 */
import { parseArgs } from 'node:util';

import { prepareCandidate } from '../src/judge/candidate.js';

const { values } = parseArgs({
  options: { n: { type: 'string', default: '500' }, rounds: { type: 'string', default: '5' } },
  strict: true,
});
const n = Number(values.n);
const rounds = Number(values.rounds);

const IDEA =
  'Align the image and text encoders with a symmetric contrastive loss over large batches of paired web data. ';
const QUESTION = 'How can vision and language representations be aligned without labels?';
let trace = '';
while (trace.length < 11_000)
  trace += 'Step: consider whether the encoders share weights and what it implies. ';

const ZH = '我们提出一种对比学习方法，通过大批量图文对齐图像编码器与文本编码器，实现零样本分类。';
const MIXED =
  'Les résultats montrent une amélioration de 12 % sur ImageNet (lr 10⁻⁴, 2⁸ pas). Мы проверяем при 300 K. ';
let sentences = '';
for (let i = 0; sentences.length < 9000; i++)
  sentences += `Sentence ${i} adds its own words about encoders. `;

const KINDS: Record<string, string> = {
  'idea, 1k chars': IDEA.repeat(9),
  'idea, 9k chars, every sentence new (ASCII)': sentences,
  'idea, 9k chars (Chinese)': ZH.repeat(Math.ceil(9000 / ZH.length)),
  'idea, 9k chars (French, Russian, superscripts)': MIXED.repeat(Math.ceil(9000 / MIXED.length)),
  'think trace + answer, 12k chars (ASCII)': `<think>${trace}</think>${IDEA.repeat(5)}`,
  'think trace + answer, 12k chars (accents, zero-width)': `<think>${trace.replace(/e/g, 'é\u200B')}</think>${IDEA.repeat(5)}`,
  'harmony analysis + final, 12k chars': `<|channel|>analysis<|message|>${trace}<|end|><|start|>assistant<|channel|>final<|message|>${IDEA.repeat(5)}<|return|>`,
};

for (const [kind, text] of Object.entries(KINDS)) {
  const times: number[] = [];
  for (let r = 0; r < rounds + 1; r++) {
    const start = performance.now();
    for (let i = 0; i < n; i++) prepareCandidate(text, { question: QUESTION });
    if (r > 0) times.push(((performance.now() - start) / n) * 1000);
  }
  times.sort((a, b) => a - b);
  const median = times[Math.floor(times.length / 2)] ?? Number.NaN;
  process.stdout.write(`${kind.padEnd(56)} ${median.toFixed(0).padStart(6)} µs per candidate\n`);
}
