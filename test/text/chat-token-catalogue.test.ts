/**
 * Issue 38 item 8: control tokens come from the tokenizers' catalogue (src/text/chat-tokens-data.ts: the
 * special tokens of Llama 3/4, Qwen, Gemma 2–4, GLM, Mistral, DeepSeek, Phi, Command R, gpt-oss, Granite,
 * OLMo, Kimi, MiniMax, Seed, ERNIE, EXAONE, Nemotron, Hunyuan, InternLM): every one of them, wherever a
 * rollout puts it, is removed before a judge reads the answer or makes the rollout a real 0 without a
 * judgment; no text of the legitimate corpus loses anything to them.
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { describe, expect, it } from 'vitest';

import { legitTexts, SHARED_SETS } from '../../src/ablations/docs/inputs.js';
import { prepareCandidate } from '../../src/judge/candidate.js';
import { CONTROL_TOKEN_CATALOGUE, CONTROL_TOKENS } from '../../src/text/chat-tokens-data.js';
import { chatTokenSpans, stripChatTokens } from '../../src/text/chat-tokens.js';
import { fold, foldText } from '../../src/text/fold.js';

const IDEA = 'Use a contrastive loss over paired encoders with hard negatives mined per batch';
const PLACES: ReadonlyArray<(t: string) => string> = [
  (t) => `${IDEA.slice(0, 40)} ${t} ${IDEA.slice(40)}.`,
  (t) => `${IDEA.slice(0, 40)}${t}${IDEA.slice(40)}.`,
  (t) => `${t}${IDEA}.`,
  (t) => `${IDEA}.\n${t}\n${t}`,
];

/** Whether the judge could read `token` in what preparation gives it. */
function reachesJudge(text: string, token: string): boolean {
  const prepared = prepareCandidate(text);
  if (prepared.rejection !== undefined) return false; // a real 0, never judged
  return foldText(prepared.candidate).text.includes(fold(token));
}

describe('the control-token catalogue', () => {
  it('covers the families the issue names, with their one-sided and bracketed tokens', () => {
    const families = CONTROL_TOKEN_CATALOGUE.map((f) => f.family).join(' ');
    for (const name of ['Llama 4', 'Qwen3', 'Gemma 4', 'GLM', 'Mistral', 'DeepSeek', 'Phi', 'Command'])
      expect(families).toContain(name);
    for (const name of ['harmony', 'Granite', 'OLMo', 'Kimi', 'MiniMax', 'Seed', 'ERNIE'])
      expect(families).toContain(name);
    for (const token of ['<|turn>', '<turn|>', '<|channel>', '[gMASK]', '<sop>', '<eop>', '[INST]'])
      expect(CONTROL_TOKENS).toContain(token);
    expect(CONTROL_TOKENS).toContain('<｜begin▁of▁sentence｜>');
  });

  it('never lets a catalogue token reach the judge, wherever the rollout puts it', () => {
    const leaks: string[] = [];
    for (const token of CONTROL_TOKENS) {
      for (const [i, place] of PLACES.entries())
        if (reachesJudge(place(token), token)) leaks.push(`${token} @${i}`);
    }
    expect(leaks).toEqual([]);
  });

  it('strips each token from an answer and keeps the words around it apart', () => {
    for (const token of CONTROL_TOKENS) {
      const stripped = stripChatTokens(`alpha${token}beta`);
      expect(foldText(stripped).text.includes(fold(token)), token).toBe(false);
      expect(stripped, token).toMatch(/^alpha\s+beta$/);
    }
  });

  it('takes the one-sided and numbered shapes beyond the listed members (Gemma 4 siblings, reserved runs)', () => {
    for (const token of [
      '<|video>',
      '<video|>',
      '<unused57>',
      '<extra_id_42>',
      '<SPECIAL_999>',
      '<mask:7>',
    ]) {
      expect(stripChatTokens(`alpha${token}beta`), token).toMatch(/^alpha\s+beta$/);
    }
  });

  it('finds no new token in the legitimate corpus: 0 rejected, only the tokens texts mention by name', () => {
    const path = (p: string): string => fileURLToPath(new URL(`../../${p}`, import.meta.url));
    const sets = SHARED_SETS.map((name): [string, string] => [name, path(`../shared/datasets/${name}.jsonl`)])
      .filter(([, file]) => existsSync(file))
      .map(([name, file]): [string, string] => [name, readFileSync(file, 'utf8')]);
    const texts = legitTexts(sets, readFileSync(path('datasets/legit-corpus.jsonl'), 'utf8'));
    expect(texts.length).toBeGreaterThan(500);
    const rejected = texts.filter((t) => prepareCandidate(t.text, { question: t.question }).rejection);
    expect(rejected.map((t) => t.text.slice(0, 60))).toEqual([]);
    // The texts that name a token (a paper on BERT's [MASK], the corpus's mentions_tokens form) lost it
    // before the catalogue too: the catalogue adds no token found in any legitimate text.
    const found = texts.flatMap((t) =>
      chatTokenSpans(foldText(t.text)).map(([s, e]) => fold(t.text.slice(s, e))),
    );
    expect([...new Set(found)].sort()).toEqual(
      [
        '</s>',
        '<eos>',
        '<|begin_of_thought|>',
        '<|endoftext|>',
        '<|eot_id|>',
        '<|im_end|>',
        '[eos]',
        '[mask]',
      ].sort(),
    );
  });
});
