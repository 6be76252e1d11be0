/**
 * Issue 38 item 2 (and item 6's "the question taken the same way on every route"): the rollout is the LAST
 * assistant turn on every route. `/get_reward` without `prompts` judged the first assistant turn of a
 * few-shot or multi-turn query (the example answer, not the rollout). Few-shot and multi-turn queries in
 * several chat-template families, through /get_reward and /get_reward/rank on the fake backend; with and
 * without `prompts` the same text is judged with the same question.
 */
import { describe, expect, it } from 'vitest';

import { candidateFromQuery, questionOfQuery } from '../../src/server/http/routes/adapters.js';
import { comparisonReply } from '../fakes/comparative.js';
import type { FakeChatRequest } from '../fakes/openai.js';
import { GROUND_TRUTH, useHarness } from './helpers.js';

const FEW_SHOT_ANSWER = 'FEWSHOTANSWER: fine-tune a bigger classifier on more labelled images of each class.';
const ROLLOUT =
  'ROLLOUTANSWER: align image and text encoders with a symmetric contrastive loss over web pairs.';
const Q1 = 'How can image classifiers be trained with fewer labels?';
const Q2 = 'How can vision and language representations be aligned without labels?';

type Turn = { role: 'system' | 'user' | 'assistant'; content: string };
/** Each family's template: the turns rendered, ending with the generation prompt. */
const FAMILIES: Record<string, (turns: Turn[]) => string> = {
  chatml: (t) =>
    t.map((m) => `<|im_start|>${m.role}\n${m.content}<|im_end|>\n`).join('') + '<|im_start|>assistant\n',
  llama3: (t) =>
    '<|begin_of_text|>' +
    t.map((m) => `<|start_header_id|>${m.role}<|end_header_id|>\n\n${m.content}<|eot_id|>`).join('') +
    '<|start_header_id|>assistant<|end_header_id|>\n\n',
  gemma: (t) =>
    '<bos>' +
    t
      .filter((m) => m.role !== 'system')
      .map((m) => `<start_of_turn>${m.role === 'assistant' ? 'model' : 'user'}\n${m.content}<end_of_turn>\n`)
      .join('') +
    '<start_of_turn>model\n',
  phi3: (t) => t.map((m) => `<|${m.role}|>\n${m.content}<|end|>\n`).join('') + '<|assistant|>\n',
  mistral: (t) =>
    '<s>' +
    t
      .filter((m) => m.role !== 'system')
      .map((m) => (m.role === 'user' ? `[INST] ${m.content} [/INST]` : `${m.content}</s>`))
      .join(''),
};

/** A few-shot prompt: a system turn, one worked example (user + assistant), then the real question. */
const fewShot = (): Turn[] => [
  { role: 'system', content: 'You propose research ideas.' },
  { role: 'user', content: Q1 },
  { role: 'assistant', content: FEW_SHOT_ANSWER },
  { role: 'user', content: Q2 },
];

describe('the rollout is the last assistant turn (issue 38 item 2)', () => {
  for (const [family, render] of Object.entries(FAMILIES)) {
    it(`${family}: without prompts, the rollout and the question are those with prompts`, () => {
      const prompt = render(fewShot());
      const query = `${prompt}${ROLLOUT}`;
      expect(candidateFromQuery(query, undefined).trim()).toBe(candidateFromQuery(query, prompt).trim());
      expect(candidateFromQuery(query, undefined)).toBe(ROLLOUT);
      expect(questionOfQuery(undefined, query, undefined)).toBe(questionOfQuery(undefined, query, prompt));
      expect(questionOfQuery(undefined, query, undefined)).toBe(Q2);
    });
  }

  const harness = useHarness();
  const judged = (calls: ReadonlyArray<{ body: FakeChatRequest }>) =>
    calls.map((c) => (c.body.messages ?? []).map((m) => m.content).join('\n'));

  it('/get_reward without prompts judges the rollout, never the few-shot answer (every family)', async () => {
    const h = await harness();
    const queries = Object.values(FAMILIES).map((render) => `${render(fewShot())}${ROLLOUT}`);
    const res = await h.app.inject({
      method: 'POST',
      url: '/get_reward',
      payload: { query: queries, labels: queries.map(() => GROUND_TRUTH) },
    });
    expect(res.statusCode).toBe(200);
    const texts = judged(h.fake.calls);
    expect(texts.length).toBeGreaterThan(0);
    expect(texts.some((t) => t.includes('ROLLOUTANSWER'))).toBe(true);
    expect(texts.some((t) => t.includes('FEWSHOTANSWER'))).toBe(false);
  });

  it('/get_reward/rank without prompts ranks the rollouts, never the few-shot answers', async () => {
    const h = await harness({ fake: { fallback: () => comparisonReply('A') } });
    const render = FAMILIES['chatml']!;
    const queries = [0, 1].map((k) => `${render(fewShot())}${ROLLOUT} Variant ${k} with its own words.`);
    const res = await h.app.inject({
      method: 'POST',
      url: '/get_reward/rank',
      payload: { query: queries, labels: queries.map(() => GROUND_TRUTH) },
    });
    expect(res.statusCode).toBe(200);
    const texts = judged(h.fake.calls);
    expect(texts.some((t) => t.includes('ROLLOUTANSWER'))).toBe(true);
    expect(texts.some((t) => t.includes('FEWSHOTANSWER'))).toBe(false);
  });
});
