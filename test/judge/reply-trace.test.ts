/**
 * A reasoning judge's reply split into trace and final message (issue 37 item 1), for every shape the fake's
 * servers send: each reasoning field, and every family of the catalogue inline (src/text/reasoning-formats.ts).
 */
import { describe, expect, it } from 'vitest';

import { readCompletion } from '../../src/judge/backends/openai-wire.js';
import {
  boundTrace,
  estimateReasoningTokens,
  splitReply,
  TRACE_KEEP_CHARS,
} from '../../src/judge/reply-trace.js';
import { universalReply } from '../fakes/openai.js';
import { inlineContent, TRACE_SHAPES, TRACE_TOKENS, traceText } from '../fakes/thinking.js';

const ANSWER = JSON.stringify(universalReply('match', 0.8));
const DRAFT = JSON.stringify(universalReply('no_match', 0.9));
const TRACE = traceText(300, DRAFT).text;
const INLINE = TRACE_SHAPES.filter((s) => s !== 'reasoning_content' && s !== 'reasoning' && s !== 'hidden');

describe('splitReply: the answer is the final message only', () => {
  for (const shape of INLINE) {
    it(`${shape}: the answer after the trace, the drafted opposite verdict inside it never counts`, () => {
      const split = splitReply(inlineContent(shape, TRACE, ANSWER), undefined);
      expect(split.answer.trim()).toBe(ANSWER);
      expect(split.source).toBe('inline');
      expect(split.unclosed).toBe(false);
      expect(split.reasoning).toContain(DRAFT);
    });
  }

  for (const shape of INLINE.filter((s) => s !== 'template')) {
    it(`${shape}: a trace that never closed is unclosed (a cut reply), with no answer`, () => {
      const split = splitReply(inlineContent(shape, TRACE, undefined), undefined);
      expect([split.answer, split.unclosed, split.source]).toEqual(['', true, 'inline']);
    });
  }

  it('a reasoning field is the trace; the content, JSON, is the answer', () => {
    expect(splitReply(ANSWER, TRACE)).toEqual({
      answer: ANSWER,
      reasoning: TRACE,
      source: 'field',
      unclosed: false,
    });
  });

  it('a JSON answer quoting a marker inside its strings is left whole', () => {
    const quoting = JSON.stringify({
      ...universalReply('match'),
      reasoning: 'the rollout ends with </think> and [/THINK] x',
    });
    expect(splitReply(quoting, undefined)).toEqual({
      answer: quoting,
      reasoning: '',
      source: undefined,
      unclosed: false,
    });
  });

  it('a draft before a lone </think> (template-opened trace) is not the answer', () => {
    const split = splitReply(`${DRAFT}\nno wait\n</think>\n${ANSWER}`, undefined);
    expect(split.answer.trim()).toBe(ANSWER);
  });

  it('text with no trace in any family stays as it is (the executor finds it invalid)', () => {
    expect(splitReply('Sure! Here is the JSON you asked for.', undefined).source).toBeUndefined();
  });
});

describe('readCompletion with a reasoning judge', () => {
  const body = (message: Record<string, unknown>, finish: string, usage: Record<string, unknown> = {}) =>
    JSON.stringify({
      model: 'm',
      choices: [{ message, finish_reason: finish }],
      usage: { prompt_tokens: 10, completion_tokens: 900, ...usage },
    });

  it('takes reasoning_tokens from completion_tokens_details when the server reports them', () => {
    const r = readCompletion(
      body({ content: ANSWER, reasoning_content: TRACE }, 'stop', {
        completion_tokens_details: { reasoning_tokens: 812 },
      }),
      'm',
    );
    expect(
      r.ok && [r.completion.text, r.completion.reasoningTokens, r.completion.reasoningTokensEstimated],
    ).toEqual([ANSWER, 812, false]);
  });

  it('estimates them from the trace, marked, when the server reports none', () => {
    const r = readCompletion(body({ content: inlineContent('inline:think', TRACE, ANSWER) }, 'stop'), 'm');
    expect(r.ok && r.completion.reasoningTokensEstimated).toBe(true);
    expect(r.ok && r.completion.reasoning?.source).toBe('inline');
    expect(r.ok && r.completion.text.trim()).toBe(ANSWER);
  });

  it('a reply that is all trace (content null, field only) comes back, empty, not as a 2xx without content', () => {
    const r = readCompletion(body({ content: null, reasoning: TRACE }, 'length'), 'm');
    expect(r.ok && [r.completion.text, r.completion.finishReason]).toEqual(['', 'length']);
    const stop = readCompletion(body({ content: null, reasoning: TRACE }, 'stop'), 'm');
    expect(stop.ok).toBe(true);
  });

  it('without a trace and without reported reasoning tokens: 0, not estimated', () => {
    const r = readCompletion(body({ content: ANSWER }, 'stop'), 'm');
    expect(
      r.ok && [r.completion.reasoningTokens, r.completion.reasoningTokensEstimated, r.completion.reasoning],
    ).toEqual([0, false, undefined]);
  });
});

describe('estimateReasoningTokens', () => {
  // Minimal effort's 60-token trace is all drafted JSON (denser than prose): not a prose estimate's case.
  for (const [effort, tokens] of Object.entries(TRACE_TOKENS).filter(([e]) => e !== 'minimal')) {
    it(`is within 10 % of the fake's true count at ${effort} effort (${tokens} tokens)`, () => {
      const trace = traceText(tokens, DRAFT);
      const estimate = estimateReasoningTokens(trace.text);
      expect(Math.abs(estimate - trace.tokens) / trace.tokens).toBeLessThan(0.1);
    });
  }
});

describe('boundTrace', () => {
  it('keeps a short trace whole and a long one as head and tail around a marker', () => {
    expect(boundTrace('short')).toBe('short');
    const long = `HEAD${'x'.repeat(10_000)}TAIL`;
    const b = boundTrace(long);
    expect(b.startsWith('HEAD') && b.endsWith('TAIL')).toBe(true);
    expect(b).toContain(`${long.length - 2 * TRACE_KEEP_CHARS} characters of the trace omitted`);
    expect(b.length).toBeLessThan(2 * TRACE_KEEP_CHARS + 100);
  });
});
