/**
 * The special (control) tokens of the major open-weight tokenizers, as text: each family's
 * `added_tokens` with `"special": true` in its Hugging Face `tokenizer.json` / `tokenizer_config.json`
 * (`added_tokens_decoder`), and the control tokens its chat template writes. Numbered runs (Llama's
 * `<|reserved_special_token_N|>`, Gemma's `<unusedN>`, DeepSeek's `<｜place▁holder▁no▁N｜>`, Mistral's
 * `<SPECIAL_N>`, T5/Nemotron `<extra_id_N>`) are given by their first members; src/text/chat-tokens.ts
 * matches the families' shapes generally. Reasoning markers (`<think>`, `[THINK]`, `<seed:think>`) are not
 * here: src/text/reasoning-formats.ts owns them, from the engines' parser registries.
 *
 * Sources (read 2026-12; the repository and file each family's tokens come from):
 * - meta-llama/Llama-3.1-8B-Instruct, Llama-3.2-11B-Vision, Llama-4-Scout-17B-16E: tokenizer_config.json;
 * - Qwen/Qwen2.5-7B-Instruct, Qwen2.5-VL, Qwen3-8B: tokenizer_config.json added_tokens_decoder (special);
 * - google/gemma-2-9b-it, gemma-3-4b-it: tokenizer_config.json; google/gemma-4 (Gemma4Tokenizer metadata
 *   defaults `<|turn>`/`<turn|>`, `<|channel>`/`<channel|>`, `<|tool_call>`/`<tool_call|>`, `<|tool>`/`<tool|>`,
 *   `<|tool_response>`/`<tool_response|>`, `<|image>`/`<image|>`, `<|audio>`/`<audio|>`, `<|"|>`; vLLM's
 *   gemma4 reasoning parser's vocabulary; llama.cpp's Gemma 4 template);
 * - zai-org/glm-4-9b-chat, GLM-4.5, GLM-4.6: tokenizer.json added_tokens (`[gMASK]`, `<sop>`, `<eop>` …);
 * - mistralai/Mistral-7B-Instruct-v0.3, Mistral-Nemo (Tekken), Mistral-Small-3.1, Pixtral: tokenizer.json;
 * - deepseek-ai/DeepSeek-V3, DeepSeek-R1: tokenizer_config.json (fullwidth bars U+FF5C, U+2581 for spaces);
 * - microsoft/Phi-3.5-mini-instruct, Phi-4, Phi-4-mini-instruct: added_tokens (`<|/tool|>` …);
 * - CohereLabs/c4ai-command-r-v01, command-a-03-2025: tokenizer_config.json;
 * - openai/gpt-oss-20b: the harmony encoding's special tokens (o200k_harmony);
 * - ibm-granite/granite-3.3-8b-instruct: tokenizer_config.json additional_special_tokens;
 * - allenai/OLMo-2-1124-7B-Instruct: tokenizer_config.json;
 * - moonshotai/Kimi-K2-Instruct: tokenizer_config.json;
 * - MiniMaxAI/MiniMax-M1-80k, MiniMax-M2: tokenizer_config.json and chat template;
 * - ByteDance-Seed/Seed-OSS-36B-Instruct: tokenizer_config.json;
 * - baidu/ERNIE-4.5-21B-A3B-PT: tokenizer_config.json;
 * - LGAI-EXAONE/EXAONE-3.5-7.8B-Instruct, EXAONE-4.0: tokenizer_config.json;
 * - nvidia/Nemotron-4-340B-Instruct (`<extra_id_N>` turns); tencent/Hunyuan-A13B-Instruct;
 *   internlm/internlm2_5-7b-chat; 01-ai/Yi-1.5.
 */

export interface ControlTokenFamily {
  family: string;
  tokens: readonly string[];
}

export const CONTROL_TOKEN_CATALOGUE: readonly ControlTokenFamily[] = [
  {
    family: 'Llama 3',
    tokens: [
      '<|begin_of_text|>',
      '<|end_of_text|>',
      '<|start_header_id|>',
      '<|end_header_id|>',
      '<|eot_id|>',
      '<|eom_id|>',
      '<|python_tag|>',
      '<|finetune_right_pad_id|>',
      '<|reserved_special_token_0|>',
      '<|reserved_special_token_247|>',
      '<|image|>',
    ],
  },
  {
    family: 'Llama 4',
    tokens: [
      '<|header_start|>',
      '<|header_end|>',
      '<|eot|>',
      '<|eom|>',
      '<|python_start|>',
      '<|python_end|>',
      '<|finetune_right_pad|>',
      '<|image_start|>',
      '<|image_end|>',
      '<|patch|>',
      '<|tile_x_separator|>',
      '<|tile_y_separator|>',
      '<|vision_reserved_special_token_0|>',
      '<|text_post_train_reserved_special_token_0|>',
    ],
  },
  {
    family: 'Qwen2 / Qwen2.5 / Qwen3 (ChatML)',
    tokens: [
      '<|endoftext|>',
      '<|im_start|>',
      '<|im_end|>',
      '<|object_ref_start|>',
      '<|object_ref_end|>',
      '<|box_start|>',
      '<|box_end|>',
      '<|quad_start|>',
      '<|quad_end|>',
      '<|vision_start|>',
      '<|vision_end|>',
      '<|vision_pad|>',
      '<|image_pad|>',
      '<|video_pad|>',
      '<|fim_prefix|>',
      '<|fim_middle|>',
      '<|fim_suffix|>',
      '<|fim_pad|>',
      '<|repo_name|>',
      '<|file_sep|>',
    ],
  },
  {
    family: 'Gemma 2 / Gemma 3',
    tokens: [
      '<bos>',
      '<eos>',
      '<pad>',
      '<unk>',
      '<mask>',
      '<start_of_turn>',
      '<end_of_turn>',
      '<start_of_image>',
      '<end_of_image>',
      '<image_soft_token>',
      '[multimodal]',
      '<unused0>',
      '<unused98>',
    ],
  },
  {
    family: 'Gemma 4 (one-sided pairs)',
    tokens: [
      '<|turn>',
      '<turn|>',
      '<|channel>',
      '<channel|>',
      '<|tool_call>',
      '<tool_call|>',
      '<|tool>',
      '<tool|>',
      '<|tool_response>',
      '<tool_response|>',
      '<|image>',
      '<image|>',
      '<|audio>',
      '<audio|>',
      '<|image|>',
      '<|audio|>',
      '<|video|>',
      '<|think|>',
      '<|"|>',
    ],
  },
  {
    family: 'GLM-4 / GLM-4.5 / ChatGLM',
    tokens: [
      '[gMASK]',
      '[sMASK]',
      '[MASK]',
      '<sop>',
      '<eop>',
      '<|system|>',
      '<|user|>',
      '<|assistant|>',
      '<|observation|>',
      '<|begin_of_image|>',
      '<|end_of_image|>',
      '<|begin_of_video|>',
      '<|end_of_video|>',
      '<|begin_of_audio|>',
      '<|end_of_audio|>',
      '<|begin_of_transcription|>',
      '<|end_of_transcription|>',
      '<|code_prefix|>',
      '<|code_middle|>',
      '<|code_suffix|>',
    ],
  },
  {
    family: 'Mistral / Tekken / Pixtral',
    tokens: [
      '<s>',
      '</s>',
      '[INST]',
      '[/INST]',
      '[AVAILABLE_TOOLS]',
      '[/AVAILABLE_TOOLS]',
      '[TOOL_RESULTS]',
      '[/TOOL_RESULTS]',
      '[TOOL_CALLS]',
      '[TOOL_CONTENT]',
      '[SYSTEM_PROMPT]',
      '[/SYSTEM_PROMPT]',
      '[IMG]',
      '[IMG_BREAK]',
      '[IMG_END]',
      '[PREFIX]',
      '[MIDDLE]',
      '[SUFFIX]',
      '[CALL_ID]',
      '<SPECIAL_20>',
    ],
  },
  {
    family: 'DeepSeek V3 / R1',
    tokens: [
      '<｜begin▁of▁sentence｜>',
      '<｜end▁of▁sentence｜>',
      '<｜▁pad▁｜>',
      '<｜User｜>',
      '<｜Assistant｜>',
      '<｜tool▁calls▁begin｜>',
      '<｜tool▁calls▁end｜>',
      '<｜tool▁call▁begin｜>',
      '<｜tool▁call▁end｜>',
      '<｜tool▁outputs▁begin｜>',
      '<｜tool▁outputs▁end｜>',
      '<｜tool▁output▁begin｜>',
      '<｜tool▁output▁end｜>',
      '<｜tool▁sep｜>',
      '<｜fim▁hole｜>',
      '<｜fim▁begin｜>',
      '<｜fim▁end｜>',
      '<｜place▁holder▁no▁0｜>',
    ],
  },
  {
    family: 'Phi-3 / Phi-4',
    tokens: [
      '<|system|>',
      '<|user|>',
      '<|assistant|>',
      '<|end|>',
      '<|placeholder1|>',
      '<|im_sep|>',
      '<|dummy_0|>',
      '<|tool|>',
      '<|/tool|>',
      '<|tool_call|>',
      '<|/tool_call|>',
      '<|tool_response|>',
      '<|tag|>',
    ],
  },
  {
    family: 'Cohere Command R / Command A',
    tokens: [
      '<BOS_TOKEN>',
      '<EOS_TOKEN>',
      '<PAD>',
      '<UNK>',
      '<CLS>',
      '<SEP>',
      '<MASK_TOKEN>',
      '<|START_OF_TURN_TOKEN|>',
      '<|END_OF_TURN_TOKEN|>',
      '<|USER_TOKEN|>',
      '<|CHATBOT_TOKEN|>',
      '<|SYSTEM_TOKEN|>',
      '<|START_RESPONSE|>',
      '<|END_RESPONSE|>',
      '<|START_ACTION|>',
      '<|END_ACTION|>',
      '<|START_TOOL_RESULT|>',
      '<|END_TOOL_RESULT|>',
      '<|NEW_FILE|>',
    ],
  },
  {
    family: 'gpt-oss harmony',
    tokens: [
      '<|startoftext|>',
      '<|start|>',
      '<|end|>',
      '<|message|>',
      '<|channel|>',
      '<|constrain|>',
      '<|return|>',
      '<|call|>',
      '<|reserved_200000|>',
    ],
  },
  {
    family: 'Granite 3',
    tokens: [
      '<|start_of_role|>',
      '<|end_of_role|>',
      '<|end_of_text|>',
      '<|tool_call|>',
      '<|start_of_cite|>',
      '<|end_of_cite|>',
      '<|start_of_plugin|>',
      '<|end_of_plugin|>',
    ],
  },
  { family: 'OLMo 2', tokens: ['<|endoftext|>', '<|pad|>', '<|user|>', '<|assistant|>', '<|system|>'] },
  {
    family: 'Kimi K2',
    tokens: [
      '[BOS]',
      '[EOS]',
      '[EOT]',
      '[UNK]',
      '[PAD]',
      '<|im_user|>',
      '<|im_assistant|>',
      '<|im_system|>',
      '<|im_middle|>',
      '<|im_end|>',
      '<|tool_calls_section_begin|>',
      '<|tool_calls_section_end|>',
      '<|tool_call_begin|>',
      '<|tool_call_argument_begin|>',
      '<|tool_call_end|>',
      '<|media_start|>',
      '<|media_content|>',
      '<|media_end|>',
      '<|media_pad|>',
    ],
  },
  {
    family: 'MiniMax M1 / M2',
    tokens: ['<beginning_of_sentence>', '<end_of_sentence>', ']~!b[', ']~b]', '[e~[', ']!d~[', ']!p~['],
  },
  {
    family: 'Seed-OSS',
    tokens: ['<seed:bos>', '<seed:eos>', '<seed:pad>', '<seed:tool_call>', '</seed:tool_call>'],
  },
  {
    family: 'ERNIE 4.5',
    tokens: [
      '<|begin_of_sentence|>',
      '<|end_of_sentence|>',
      '<|IMAGE_START|>',
      '<|IMAGE_PLACEHOLDER|>',
      '<|IMAGE_END|>',
      '<|LOC_0|>',
      '<mask:0>',
    ],
  },
  {
    family: 'EXAONE',
    tokens: ['[|system|]', '[|user|]', '[|assistant|]', '[|endofturn|]', '[|tool|]'],
  },
  { family: 'Nemotron 4 / T5 sentinels', tokens: ['<extra_id_0>', '<extra_id_1>', '<extra_id_99>'] },
  {
    family: 'Hunyuan',
    tokens: [
      '<｜hy_begin▁of▁sentence｜>',
      '<｜hy_place▁holder▁no▁2｜>',
      '<｜hy_User｜>',
      '<｜hy_Assistant｜>',
    ],
  },
  {
    family: 'InternLM 2',
    tokens: ['<|action_start|>', '<|action_end|>', '<|interpreter|>', '<|plugin|>'],
  },
  { family: 'BERT-style specials', tokens: ['[CLS]', '[SEP]', '[MASK]', '[PAD]', '[UNK]'] },
];

/** Every token of the catalogue, once. */
export const CONTROL_TOKENS: readonly string[] = [
  ...new Set(CONTROL_TOKEN_CATALOGUE.flatMap((f) => f.tokens)),
];
