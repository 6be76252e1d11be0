/**
 * The reasoning formats `REASONING_FORMAT` names: every `--reasoning-parser` name of vLLM and SGLang, each
 * mapped to the family of markers its parser splits on (read from the engines' sources, cited per family).
 * Data only; src/text/reasoning.ts applies it. A leaf.
 */

/** vLLM's registry as read (vllm/frontend/processing/reasoning/__init__.py). */
export const VLLM_REGISTRY =
  'vllm-project/vllm@761f197523b7a355e0fff3e76d6d2fda81987ad6 vllm/frontend/processing/reasoning/__init__.py';
/** SGLang's registry as read (ReasoningParser.DetectorMap). */
export const SGLANG_REGISTRY =
  'sgl-project/sglang@002e9bfc90a037dc912d3e8525dee06d5d789aa8 python/sglang/srt/parser/reasoning_parser.py';

/** A pair of markers as a model writes them (matched on the folded copy, src/text/fold.ts). */
export interface MarkerPair {
  open: string;
  close: string;
}

export type FamilyId =
  | 'think'
  | 'think-answer'
  | 'think-response'
  | 'mistral'
  | 'kimi'
  | 'seed'
  | 'minimax-m3'
  | 'gemma4'
  | 'solar'
  | 'apertus'
  | 'cohere'
  | 'kimi-k3'
  | 'inkling'
  | 'thought-solution'
  | 'granite'
  | 'harmony'
  | 'glimmer';

export interface Family {
  id: FamilyId;
  /** `tags`: trace blocks between markers (src/text/reasoning.ts); the two channel formats have their own. */
  kind: 'tags' | 'harmony' | 'glimmer';
  /** The trace's markers (tags only). */
  trace?: MarkerPair;
  /** Answer blocks: when one follows the trace, its body is the answer. */
  answers?: readonly MarkerPair[];
  /**
   * Markers a sentence could hold (`<think>`, `<answer>`): an opener counts only at the start of a line.
   * Special tokens (`<|…|>`, `[THINK]`, `◁think▷`) count anywhere but inside a sentence that mentions them.
   */
  lineStart: boolean;
  /** Markers that ordinary prose uses: never part of `auto`. */
  prose?: boolean;
  /** Where the family's markers and split come from. */
  source: string;
  /** What the engine does that this server does not, and why. */
  note?: string;
}

const V = 'vllm-project/vllm@761f197523b7a355e0fff3e76d6d2fda81987ad6';
const S = 'sgl-project/sglang@002e9bfc90a037dc912d3e8525dee06d5d789aa8';

export const FAMILIES: readonly Family[] = [
  {
    id: 'think',
    kind: 'tags',
    trace: { open: '<think>', close: '</think>' },
    lineStart: true,
    source: `${V} vllm/frontend/processing/reasoning/basic_parsers.py (BaseThinkingReasoningParser), parser/qwen3.py; ${S} DeepSeekR1Detector, Qwen3Detector`,
    note: 'also `<thinking>`, `<reasoning>` and the Hunyuan per-checkpoint suffix `<think:…>`; a `<tool_call>` inside an unclosed trace does not end it here (no tool call is an idea)',
  },
  {
    id: 'think-answer',
    kind: 'tags',
    trace: { open: '<think>', close: '</think>' },
    answers: [{ open: '<answer>', close: '</answer>' }],
    lineStart: true,
    source: `${V} vllm/frontend/processing/reasoning/hunyuan_a13b_reasoning_parser.py`,
  },
  {
    id: 'think-response',
    kind: 'tags',
    trace: { open: '<think>', close: '</think>' },
    answers: [{ open: '<response>', close: '</response>' }],
    lineStart: true,
    source: `${V} vllm/frontend/processing/reasoning/ernie45_reasoning_parser.py`,
  },
  {
    id: 'mistral',
    kind: 'tags',
    trace: { open: '[THINK]', close: '[/THINK]' },
    lineStart: false,
    source: `${V} vllm/frontend/processing/parser/mistral.py (mistral_common SpecialTokens.begin_think/end_think); ${S} MistralDetector`,
    note: 'vLLM keeps text before a lone `[/THINK]` as content; here, as for every family, text before a closing marker is the trace',
  },
  {
    id: 'kimi',
    kind: 'tags',
    trace: { open: '◁think▷', close: '◁/think▷' },
    lineStart: false,
    source: `${S} KimiDetector`,
  },
  {
    id: 'seed',
    kind: 'tags',
    trace: { open: '<seed:think>', close: '</seed:think>' },
    lineStart: false,
    source: `${V} vllm/reasoning/seedoss_reasoning_parser.py, parser/seed_oss.py`,
  },
  {
    id: 'minimax-m3',
    kind: 'tags',
    trace: { open: '<mm:think>', close: '</mm:think>' },
    lineStart: false,
    source: `${V} vllm/frontend/processing/reasoning/minimax_m3_reasoning_parser.py; ${S} MiniMaxM3Detector`,
  },
  {
    id: 'gemma4',
    kind: 'tags',
    trace: { open: '<|channel>', close: '<channel|>' },
    lineStart: false,
    source: `${V} vllm/frontend/processing/reasoning/gemma4_utils.py, parser/gemma4.py; ${S} Gemma4Detector`,
  },
  {
    id: 'solar',
    kind: 'tags',
    trace: { open: '<|think:start|>', close: '<|think:end|>' },
    lineStart: false,
    source:
      'vllm-project/vllm@0064cc9cb1ae57b1308015d48a57462fa27a68f2 vllm/reasoning/solar_open2_reasoning_parser.py',
  },
  {
    id: 'apertus',
    kind: 'tags',
    trace: { open: '<|inner_prefix|>', close: '<|inner_suffix|>' },
    lineStart: false,
    source: `${S} Apertus2509Detector`,
  },
  {
    id: 'cohere',
    kind: 'tags',
    trace: { open: '<|START_THINKING|>', close: '<|END_THINKING|>' },
    answers: [
      { open: '<|START_RESPONSE|>', close: '<|END_RESPONSE|>' },
      { open: '<|START_TEXT|>', close: '<|END_TEXT|>' },
    ],
    lineStart: false,
    source: `${V} vllm/frontend/processing/reasoning/cohere_command_reasoning_parser.py; ${S} CohereCommand4Detector`,
  },
  {
    id: 'kimi-k3',
    kind: 'tags',
    trace: { open: '<|open|>think<|sep|>', close: '<|close|>think<|sep|>' },
    answers: [{ open: '<|open|>response<|sep|>', close: '<|close|>response<|sep|>' }],
    lineStart: false,
    source: `${V} vllm/frontend/processing/reasoning/kimi_k3_reasoning_parser.py; ${S} KimiK3Detector`,
  },
  {
    id: 'inkling',
    kind: 'tags',
    trace: { open: '<|content_thinking|>', close: '<|end_message|>' },
    answers: [{ open: '<|content_text|>', close: '<|end_message|>' }],
    lineStart: false,
    source: `${V} vllm/frontend/processing/parser/inkling.py; ${S} InklingDetector`,
  },
  {
    id: 'thought-solution',
    kind: 'tags',
    trace: { open: '<|begin_of_thought|>', close: '<|end_of_thought|>' },
    answers: [{ open: '<|begin_of_solution|>', close: '<|end_of_solution|>' }],
    lineStart: false,
    source:
      'NovaSky-AI/SkyThought@2a2d84277c0727383111bdf488c10e7f41f5be88 skythought/skythought_evals/models/model_configs.yaml (the Sky-T1 system prompt; OpenThoughts and Bespoke-Stratos distill the same format)',
    note: 'no engine parser: a format of SFT data, named here `thought_solution`',
  },
  {
    id: 'granite',
    kind: 'tags',
    trace: { open: 'Here is my thought process:', close: 'Here is my response:' },
    lineStart: true,
    prose: true,
    source: `${V} vllm/frontend/processing/reasoning/granite_reasoning_parser.py`,
    note: "also `Here's …`; plain English, so only under REASONING_FORMAT=granite, never `auto`",
  },
  {
    id: 'harmony',
    kind: 'harmony',
    lineStart: false,
    source: `${V} vllm/frontend/processing/reasoning/gptoss_reasoning_parser.py; ${S} GptOssDetector (HarmonyParser)`,
  },
  {
    id: 'glimmer',
    kind: 'glimmer',
    lineStart: false,
    source: `${V} vllm/frontend/processing/reasoning/muse_glimmer_reasoning_parser.py`,
  },
];

/** Every REASONING_FORMAT name, with its family and the engine that registers it: ours, then vLLM's
 * `--reasoning-parser` names, then SGLang's where they differ. */
export const FORMAT_TABLE = [
  ['auto', 'all', 'ours'],
  ['think', 'think', 'ours'],
  ['harmony', 'harmony', 'ours'],
  ['thought_solution', 'thought-solution', 'ours'],
  ['none', 'none', 'ours'],
  ['deepseek_r1', 'think', 'vllm'],
  ['deepseek_v3', 'think', 'vllm'],
  ['deepseek_v4', 'think', 'vllm'],
  ['poolside_v1', 'think', 'vllm'],
  ['cohere_command3', 'cohere', 'vllm'],
  ['cohere_command4', 'cohere', 'vllm'],
  ['ernie45', 'think-response', 'vllm'],
  ['gemma4', 'gemma4', 'vllm'],
  ['glm45', 'think', 'vllm'],
  ['glm47', 'think', 'vllm'],
  ['ling3', 'think', 'vllm'],
  ['openai_gptoss', 'harmony', 'vllm'],
  ['granite', 'granite', 'vllm'],
  ['holo2', 'think', 'vllm'],
  ['hunyuan_a13b', 'think-answer', 'vllm'],
  ['hy_v3', 'think', 'vllm'],
  ['hy_v4', 'think', 'vllm'],
  ['inkling', 'inkling', 'vllm'],
  ['kimi_k2', 'think', 'vllm'],
  ['kimi_k3', 'kimi-k3', 'vllm'],
  ['mimo', 'think', 'vllm'],
  ['minimax_m2', 'think', 'vllm'],
  ['minimax_m2_append_think', 'think', 'vllm'],
  ['minimax_m3', 'minimax-m3', 'vllm'],
  ['mistral', 'mistral', 'vllm'],
  ['muse_glimmer', 'glimmer', 'vllm'],
  ['nemotron_v3', 'think', 'vllm'],
  ['olmo3', 'think', 'vllm'],
  ['qwen3', 'think', 'vllm'],
  ['seed_oss', 'seed', 'vllm'],
  ['solar_open2', 'solar', 'vllm'],
  ['step3', 'think', 'vllm'],
  ['step3p5', 'think', 'vllm'],
  ['apertus2509', 'apertus', 'sglang'],
  ['deepseek-r1', 'think', 'sglang'],
  ['deepseek-v3', 'think', 'sglang'],
  ['deepseek-v4', 'think', 'sglang'],
  ['gpt-oss', 'harmony', 'sglang'],
  ['hunyuan', 'think', 'sglang'],
  ['interns1', 'think', 'sglang'],
  ['kimi', 'kimi', 'sglang'],
  ['minimax', 'think', 'sglang'],
  ['minimax-append-think', 'think', 'sglang'],
  ['minimax-m3', 'minimax-m3', 'sglang'],
  ['nemotron_3', 'think', 'sglang'],
  ['qwen3-thinking', 'think', 'sglang'],
  ['telechat4', 'think', 'sglang'],
] as const satisfies ReadonlyArray<readonly [string, FamilyId | 'all' | 'none', 'ours' | 'vllm' | 'sglang']>;

export type ReasoningFormatName = (typeof FORMAT_TABLE)[number][0];

/** Every REASONING_FORMAT value. */
export const REASONING_FORMATS: readonly ReasoningFormatName[] = FORMAT_TABLE.map(([name]) => name);

const BY_NAME: ReadonlyMap<string, (typeof FORMAT_TABLE)[number]> = new Map(
  FORMAT_TABLE.map((row) => [row[0], row]),
);

/** The family a name splits by (`all` for auto, `none` for none). */
export function familyOf(name: ReasoningFormatName): FamilyId | 'all' | 'none' {
  return BY_NAME.get(name)?.[1] ?? 'none';
}

/** Which engine registers a name (`ours`: auto, think, harmony, thought_solution, none). */
export function engineOf(name: ReasoningFormatName): 'ours' | 'vllm' | 'sglang' {
  return BY_NAME.get(name)?.[2] ?? 'ours';
}

/** Whether `value` is a REASONING_FORMAT name. */
export function isReasoningFormatName(value: string): value is ReasoningFormatName {
  return BY_NAME.has(value);
}
