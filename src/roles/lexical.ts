import { z } from 'zod';
import { Stance, strictJsonSchema } from './common.js';
import { renderPrompt } from './fence.js';
import { marginConfidence, methodSimilarity, round4, SIMILARITY_THRESHOLDS } from '../text/similarity.js';
import type { Role } from './types.js';

/** The lexical floor: no LLM, a corpus-free TF-IDF-style cosine against a fixed threshold. */
export const LexicalOutput = z.object({
  similarity: z.number().min(0).max(1),
  threshold: z.number().min(0).max(1),
  verdict: Stance,
});
export type LexicalOutput = z.infer<typeof LexicalOutput>;

/** Fixed threshold of the lexical baseline: `match` iff similarity ≥ this. */
export const LEXICAL_THRESHOLD = SIMILARITY_THRESHOLDS.methodology;

export const LEXICAL_SYSTEM = [
  'Local role, computed in-process without any LLM call.',
  `similarity = cosine of sublinear-tf vectors of stemmed content words (candidate vs ground truth);`,
  `verdict = "match" iff similarity >= threshold (${LEXICAL_THRESHOLD}).`,
].join('\n');

/** Rounded to 4 decimals so the verdict is computed from exactly the number that is reported. */

export const lexical = {
  name: 'lexical',
  kind: 'local',
  output: LexicalOutput,
  jsonSchema: strictJsonSchema(LexicalOutput),
  canDecide: true,
  render: (ctx) => ({
    ...renderPrompt(ctx, { instruction: 'No LLM call: this prompt is never sent.', debate: false }),
    system: LEXICAL_SYSTEM,
  }),
  compute: (ctx) => {
    const similarity = round4(methodSimilarity(ctx));
    return {
      similarity,
      threshold: LEXICAL_THRESHOLD,
      verdict: similarity >= LEXICAL_THRESHOLD ? 'match' : 'no_match',
    };
  },
  stance: (o) => o.verdict,
  confidence: (o) => marginConfidence(o.similarity - o.threshold),
  summarize: (o) =>
    `Lexical similarity ${o.similarity.toFixed(3)} vs threshold ${o.threshold} → ${o.verdict}.`,
} satisfies Role<typeof LexicalOutput>;
