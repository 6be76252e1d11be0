/**
 * Every REASONING_FORMAT name (each vLLM and SGLang `--reasoning-parser` name): a completion in its family's
 * format is judged on its answer, never on its trace, and a trace that never closed is `truncated_reasoning`.
 */
import { describe, expect, it } from 'vitest';

import { canonicalWhitespace, prepareCandidate } from '../../src/judge/candidate.js';
import { extractAnswer, markersOf, traceOpenedBy } from '../../src/text/reasoning.js';
import {
  engineOf,
  FAMILIES,
  familyOf,
  REASONING_FORMATS,
  type FamilyId,
} from '../../src/text/reasoning-formats.js';

const ANSWER =
  'Align the image and text encoders with a symmetric contrastive loss over large batches of paired data.';
const TRACE =
  'TRACEMARK: the reference says InfoNCE over web-scale pairs and zero-shot transfer, so I say that.';

/** A completion in each family's format (answer after a closed trace) and the same trace cut off. */
const SAMPLES: Record<FamilyId, { judged: string; cut: string }> = {
  think: { judged: `<think>\n${TRACE}\n</think>\n\n${ANSWER}`, cut: `<think>\n${TRACE}` },
  'think-answer': {
    judged: `<think>\n${TRACE}\n</think>\n<answer>\n${ANSWER}\n</answer>`,
    cut: `<think>\n${TRACE}`,
  },
  'think-response': {
    judged: `${TRACE}\n</think>\n\n<response>\n${ANSWER}\n</response>\n`,
    cut: `<think>${TRACE}`,
  },
  mistral: { judged: `[THINK]${TRACE}[/THINK]${ANSWER}`, cut: `[THINK]${TRACE}` },
  kimi: { judged: `◁think▷${TRACE}◁/think▷${ANSWER}`, cut: `◁think▷${TRACE}` },
  seed: { judged: `<seed:think>${TRACE}</seed:think>${ANSWER}`, cut: `<seed:think>${TRACE}` },
  'minimax-m3': { judged: `<mm:think>${TRACE}</mm:think>${ANSWER}`, cut: `<mm:think>${TRACE}` },
  gemma4: { judged: `<|channel>thought\n${TRACE}<channel|>${ANSWER}`, cut: `<|channel>thought\n${TRACE}` },
  solar: { judged: `${TRACE}<|think:end|>${ANSWER}`, cut: `<|think:start|>${TRACE}` },
  apertus: { judged: `<|inner_prefix|>${TRACE}<|inner_suffix|>${ANSWER}`, cut: `<|inner_prefix|>${TRACE}` },
  cohere: {
    judged: `<|START_THINKING|>${TRACE}<|END_THINKING|><|START_RESPONSE|>${ANSWER}<|END_RESPONSE|>`,
    cut: `<|START_THINKING|>${TRACE}`,
  },
  'kimi-k3': {
    judged: `<|open|>think<|sep|>${TRACE}<|close|>think<|sep|><|open|>response<|sep|>${ANSWER}<|close|>response<|sep|>`,
    cut: `<|open|>think<|sep|>${TRACE}`,
  },
  inkling: {
    judged: `<|message_model|><|content_thinking|>${TRACE}<|end_message|><|message_model|><|content_text|>${ANSWER}<|end_message|>`,
    cut: `<|message_model|><|content_thinking|>${TRACE}`,
  },
  'thought-solution': {
    judged: `<|begin_of_thought|>\n\n${TRACE}\n\n<|end_of_thought|>\n\n<|begin_of_solution|>\n\n${ANSWER}\n\n<|end_of_solution|>`,
    cut: `<|begin_of_thought|>\n\n${TRACE}`,
  },
  granite: {
    judged: `Here is my thought process:\n${TRACE}\nHere is my response:\n${ANSWER}`,
    cut: `Here's my thought process: ${TRACE}`,
  },
  harmony: {
    judged: `<|channel|>analysis<|message|>${TRACE}<|end|><|start|>assistant<|channel|>final<|message|>${ANSWER}<|return|>`,
    cut: `<|channel|>analysis<|message|>${TRACE}`,
  },
  glimmer: {
    judged: `to=self<|message|>${TRACE}<|eom|><|start|>assistant to=user<|message|>${ANSWER}<|eot|>`,
    cut: `to=self<|message|>${TRACE}`,
  },
};

const family = (name: (typeof REASONING_FORMATS)[number]) => familyOf(name);

describe('REASONING_FORMAT: every engine parser name', () => {
  it('takes every vLLM name and SGLang name the registries hold (read from their sources)', () => {
    const vllm = REASONING_FORMATS.filter((n) => engineOf(n) === 'vllm');
    const sglang = REASONING_FORMATS.filter((n) => engineOf(n) === 'sglang');
    expect(vllm).toEqual(
      expect.arrayContaining(['deepseek_r1', 'qwen3', 'mistral', 'kimi_k2', 'seed_oss', 'glm45', 'granite']),
    );
    expect(vllm).toEqual(
      expect.arrayContaining(['hunyuan_a13b', 'minimax_m2', 'openai_gptoss', 'ernie45', 'step3', 'olmo3']),
    );
    expect(vllm).toEqual(
      expect.arrayContaining(['nemotron_v3', 'gemma4', 'kimi_k3', 'minimax_m3', 'inkling']),
    );
    // vLLM's registry read: 32 names in vllm/frontend/processing/reasoning/__init__.py, and solar_open2.
    expect(vllm.length).toBe(33);
    // Every family is some name's.
    for (const f of FAMILIES)
      expect(
        REASONING_FORMATS.some((n) => familyOf(n) === f.id),
        f.id,
      ).toBe(true);
    expect(sglang).toEqual(expect.arrayContaining(['deepseek-r1', 'gpt-oss', 'kimi', 'qwen3-thinking']));
    expect(new Set(REASONING_FORMATS).size).toBe(REASONING_FORMATS.length);
  });

  for (const name of REASONING_FORMATS) {
    const f = family(name);
    if (f === 'none' || f === 'all') continue;
    const sample = SAMPLES[f];
    it(`${name} (${f}): judged on its answer; a trace that never closed is truncated_reasoning`, () => {
      const p = prepareCandidate(sample.judged, { reasoningFormat: name });
      expect(p.rejection).toBeUndefined();
      expect(p.candidate).toBe(ANSWER);
      expect(p.reasoningChars).toBeGreaterThan(TRACE.length - 1);
      expect(prepareCandidate(sample.cut, { reasoningFormat: name }).rejection).toBe('truncated_reasoning');
    });
  }

  for (const f of FAMILIES.filter((x) => x.prose !== true)) {
    it(`auto reads ${f.id} (its markers cannot occur in prose)`, () => {
      const sample = SAMPLES[f.id];
      expect(prepareCandidate(sample.judged).candidate).toBe(ANSWER);
      expect(prepareCandidate(sample.cut).rejection).toBe('truncated_reasoning');
    });
  }

  it("auto leaves granite's plain-English markers to the text (they occur in prose)", () => {
    const idea = `Here is my thought process: ${ANSWER}`;
    expect(prepareCandidate(idea).candidate).toBe(idea);
    expect(markersOf('auto')).not.toContain('here is my response:');
  });

  it('none leaves every format as it is', () => {
    expect(extractAnswer(SAMPLES.mistral.judged, 'none')).toMatchObject({ answer: SAMPLES.mistral.judged });
  });
});

describe('markers in any spelling, blocks interleaved, a closing marker alone, answer blocks', () => {
  it('finds markers in fullwidth, case and look-alike spellings (matched on the folded copy)', () => {
    expect(prepareCandidate(`［ＴＨＩＮＫ］${TRACE}［/ＴＨＩＮＫ］${ANSWER}`).candidate).toBe(ANSWER);
    expect(prepareCandidate(`<Seed:Think>${TRACE}</SEED:THINK>${ANSWER}`).candidate).toBe(ANSWER);
    // A Cyrillic і in the tag.
    expect(prepareCandidate(`<thіnk>${TRACE}</thіnk>${ANSWER}`).candidate).toBe(ANSWER);
  });

  it('takes the answer after the last of blocks interleaved with text, and after a closing marker alone', () => {
    const text = `[THINK]a[/THINK]draft one. ◁think▷b◁/think▷${ANSWER}`;
    expect(prepareCandidate(text).candidate).toBe(ANSWER);
    expect(prepareCandidate(`${TRACE}\n[/THINK]\n${ANSWER}`).candidate).toBe(ANSWER);
    expect(prepareCandidate(`${TRACE}</mm:think>${ANSWER}`).candidate).toBe(ANSWER);
  });

  it('judges the answer block, and an answer block only after a trace or at the start of the text', () => {
    expect(prepareCandidate(`<answer>${ANSWER}</answer>`).candidate).toBe(ANSWER);
    const example = `${ANSWER} The policy is asked to write\n<answer>42</answer>\nwhich a verifier checks.`;
    expect(prepareCandidate(example).candidate).toBe(canonicalWhitespace(example));
  });

  it('keeps a marker a sentence mentions or quotes as text', () => {
    const idea = `Fine-tune with [THINK] and ◁think▷ delimiters mixed in, then ${ANSWER}`;
    expect(prepareCandidate(idea).candidate).toBe(idea);
    const quoted = `Strip the \`◁/think▷\` marker before scoring. ${ANSWER}`;
    expect(prepareCandidate(quoted).candidate).toBe(quoted);
  });
});

describe('REASONING_MARKERS: a custom pair', () => {
  const spec = { format: 'auto' as const, markers: [{ open: '<scratchpad>', close: '</scratchpad>' }] };

  it('adds a pair to the format: judged on the answer, an unclosed trace truncated', () => {
    expect(
      prepareCandidate(`<scratchpad>${TRACE}</scratchpad>${ANSWER}`, { reasoningFormat: spec }).candidate,
    ).toBe(ANSWER);
    expect(prepareCandidate(`<scratchpad>\n${TRACE}`, { reasoningFormat: spec }).rejection).toBe(
      'truncated_reasoning',
    );
    // The format's own families still hold.
    expect(prepareCandidate(SAMPLES.mistral.judged, { reasoningFormat: spec }).candidate).toBe(ANSWER);
    // Without the pair the scratchpad is text.
    expect(prepareCandidate(`<scratchpad>${TRACE}</scratchpad>${ANSWER}`).candidate).toContain('TRACEMARK');
  });

  it('finds the opener a prompt ends with, in every family', () => {
    expect(traceOpenedBy('<|im_start|>assistant\n<think>\n', 'qwen3')).toBe('<think>\n');
    expect(traceOpenedBy('…<|start|>assistant<|think:start|>', 'solar_open2')).toBe('<|think:start|>');
    expect(traceOpenedBy('<|im_assistant|>assistant<|im_middle|><|open|>think<|sep|>', 'kimi_k3')).toBe(
      '<|open|>think<|sep|>',
    );
    expect(traceOpenedBy('<|im_start|>assistant\n<scratchpad>', spec)).toBe('<scratchpad>');
    expect(traceOpenedBy('<|im_start|>assistant\n<think>\n\n</think>\n\n', 'auto')).toBeUndefined();
  });
});
