/**
 * A reasoning judge for the fake OpenAI server (issue 37 item 9): it thinks, then answers, and its server
 * hands the trace back in one of the shapes real servers use —
 * - `reasoning_content` / `reasoning`: a field beside the content (vLLM / SGLang with `--reasoning-parser`,
 *   DeepSeek's API; newer vLLM, Ollama);
 * - `hidden`: no trace at all, only `completion_tokens_details.reasoning_tokens` (OpenAI gpt-5 / o-series);
 * - `inline:<family>`: the trace inline in the content in any family of the catalogue
 *   (src/text/reasoning-formats.ts: `<think>`, `[THINK]`, `<seed:think>`, harmony, Granite's prose…), as an
 *   engine without a reasoning parser returns it;
 * - `harmony-bare`: gpt-oss channels without the `<|start|>assistant` tokens;
 * - `template`: only `</think>` (the chat template opened the trace in the prompt: Qwen3, DeepSeek-R1).
 *
 * The trace length follows the request's `reasoning_effort` (TRACE_TOKENS; absent = medium), and the trace
 * drafts the OPPOSITE verdict as a JSON object before the model decides. The budget is the request's
 * `max_completion_tokens`, else `max_tokens`: a trace longer than it is cut (finish_reason `length`, no
 * answer; inline, the trace never closes), an answer that does not fit after the trace is cut too.
 * Tokens: every trace piece is one token (PIECES, sub-word pieces like a BPE vocabulary's); markers are not
 * counted; the answer is its characters ÷ 4 like the rest of the fake. `generated` keeps the true counts.
 */
import { FAMILIES, type FamilyId } from '../../src/text/reasoning-formats.js';
import type { FakeChatRequest, FakeReply } from './openai.js';

export type TraceShape =
  'reasoning_content' | 'reasoning' | 'hidden' | 'template' | 'harmony-bare' | `inline:${FamilyId}`;

/** Every shape: each field, hidden, the template-opened trace, and every family of the catalogue inline. */
export const TRACE_SHAPES: readonly TraceShape[] = [
  'reasoning_content',
  'reasoning',
  'hidden',
  'template',
  'harmony-bare',
  ...FAMILIES.map((f): TraceShape => `inline:${f.id}`),
];

/** Trace tokens per `reasoning_effort` (absent: medium). */
export const TRACE_TOKENS = { minimal: 60, low: 250, medium: 800, high: 2_400 } as const;

/** One token each: whole words and word pieces, as an English BPE vocabulary splits trace text. */
const PIECES = [
  ' the',
  ' cand',
  'idate',
  ' method',
  ' uses',
  ' a',
  ' contrast',
  'ive',
  ' loss',
  ',',
  '.',
  ' so',
  ' it',
  ' match',
  'es',
  ' core',
  ' idea',
  ' but',
  ' nov',
  'elty',
  ' differ',
  's',
  ' Wait',
  ' re',
  'consider',
  ' assum',
  'ption',
  ' step',
  ' ver',
  'ifier',
  ' of',
  ' and',
  ' to',
  ' in',
  ' is',
  ' ground',
  ' truth',
  ' paper',
  ' mechanism',
  ' same',
  ' not',
  ' data',
  'set',
  ' ignore',
  ' that',
  ' check',
  ' again',
  '\n',
];

export interface ThinkingOptions {
  shape: TraceShape;
  /** The verdict for a request (the same judge without a trace answers `universalReply` of it). */
  answer: (body: FakeChatRequest) => unknown;
  /** The draft inside the trace: by default the answer with its stance and verdict flipped. */
  draft?: ((body: FakeChatRequest) => unknown) | undefined;
  /** `reported` (default): usage carries completion_tokens_details.reasoning_tokens; `none`: it does not. */
  usage?: 'reported' | 'none' | undefined;
  /** Fixed trace tokens, whatever the effort. */
  traceTokens?: number | undefined;
  /** Trace tokens per effort in place of TRACE_TOKENS (an effort it lacks thinks as its `medium`). */
  traces?: Readonly<Partial<Record<string, number>>> | undefined;
}

export interface ThinkingJudge {
  /** The fake's reply function (pass as `fallback`). */
  reply(body: FakeChatRequest): FakeReply;
  /** True counts over every reply: trace tokens generated (cut ones included) and all completion tokens. */
  readonly generated: { calls: number; reasoningTokens: number; completionTokens: number };
}

const flip = (value: unknown): unknown => {
  if (typeof value !== 'object' || value === null) return value;
  const out: Record<string, unknown> = { ...(value as Record<string, unknown>) };
  for (const key of ['stance', 'verdict'])
    if (out[key] === 'match' || out[key] === 'no_match')
      out[key] = out[key] === 'match' ? 'no_match' : 'match';
  return out;
};

/** A trace of `tokens` tokens with the draft near its end (the draft's tokens are its characters ÷ 4). */
export function traceText(tokens: number, draft: string): { text: string; tokens: number } {
  const draftTokens = Math.ceil(draft.length / 4);
  const words = Math.max(0, tokens - draftTokens);
  const parts: string[] = [];
  let seed = 7;
  for (let i = 0; i < words; i++) {
    seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
    parts.push(PIECES[(seed >>> 16) % PIECES.length]!);
    // The draft comes late, as a model drafts before it decides (and within a bounded transcript's tail).
    if (i === Math.max(0, words - 40)) parts.push(` Draft: ${draft} Hmm, no.`);
  }
  if (words === 0) parts.push(draft);
  return { text: parts.join(''), tokens: words + draftTokens };
}

/** The first `tokens` tokens of a trace built by traceText (cut by the budget). */
const cutTrace = (full: { text: string; tokens: number }, tokens: number): string =>
  full.text.slice(0, Math.floor((full.text.length * tokens) / full.tokens));

/** Content with the trace inline in `shape`'s markers; `answer` undefined = the trace never closed. */
export function inlineContent(shape: TraceShape, trace: string, answer: string | undefined): string {
  if (shape === 'template') return answer === undefined ? trace : `${trace}\n</think>\n\n${answer}`;
  if (shape === 'harmony-bare' || shape === 'inline:harmony') {
    const start = shape === 'harmony-bare' ? '' : '<|start|>assistant';
    const analysis = `${start}<|channel|>analysis<|message|>${trace}`;
    return answer === undefined
      ? analysis
      : `${analysis}<|end|>${start}<|channel|>final<|message|>${answer}<|return|>`;
  }
  if (shape === 'inline:glimmer') {
    const self = `to=self<|message|>${trace}`;
    return answer === undefined
      ? self
      : `${self}<|eom|><|start|>assistant to=user<|message|>${answer}<|eot|>`;
  }
  const family = FAMILIES.find((f) => `inline:${f.id}` === shape);
  if (family?.trace === undefined) throw new Error(`thinking fake: no markers for ${shape}`);
  const open = `${family.trace.open}\n${trace}`;
  if (answer === undefined) return open;
  const block = family.answers?.[0];
  const final = block === undefined ? answer : `${block.open}\n${answer}\n${block.close}`;
  return `${open}\n${family.trace.close}\n\n${final}`;
}

function messageOf(shape: TraceShape, trace: string, answer: string | undefined): Record<string, unknown> {
  // vLLM sends content null while the budget ran out inside the trace.
  if (shape === 'reasoning_content' || shape === 'reasoning')
    return { content: answer ?? null, [shape]: trace };
  if (shape === 'hidden') return { content: answer ?? null };
  return { content: inlineContent(shape, trace, answer) };
}

const budgetOf = (body: FakeChatRequest): number => {
  const b = body['max_completion_tokens'] ?? body.max_tokens;
  return typeof b === 'number' ? b : Infinity;
};

const effortTokens = (
  body: FakeChatRequest,
  traces: Readonly<Partial<Record<string, number>>> = TRACE_TOKENS,
): number => {
  const effort = body['reasoning_effort'];
  return (typeof effort === 'string' ? traces[effort] : undefined) ?? traces['medium'] ?? TRACE_TOKENS.medium;
};

export function createThinkingJudge(options: ThinkingOptions): ThinkingJudge {
  const generated = { calls: 0, reasoningTokens: 0, completionTokens: 0 };
  return {
    generated,
    reply(body) {
      const answerJson = JSON.stringify(options.answer(body));
      const draft = JSON.stringify((options.draft ?? ((b) => flip(options.answer(b))))(body));
      const full = traceText(options.traceTokens ?? effortTokens(body, options.traces), draft);
      const answerTokens = Math.ceil(answerJson.length / 4);
      const budget = budgetOf(body);
      let trace = full.text;
      let reasoning = full.tokens;
      let answer: string | undefined = answerJson;
      let completion = full.tokens + answerTokens;
      if (budget <= full.tokens) {
        trace = cutTrace(full, budget);
        reasoning = budget;
        answer = undefined;
        completion = budget;
      } else if (budget < completion) {
        answer = answerJson.slice(0, Math.floor((answerJson.length * (budget - full.tokens)) / answerTokens));
        completion = budget;
      }
      generated.calls += 1;
      generated.reasoningTokens += reasoning;
      generated.completionTokens += completion;
      const usage: Record<string, unknown> = {
        completion_tokens: completion,
        ...(options.usage === 'none'
          ? {}
          : { completion_tokens_details: { reasoning_tokens: reasoning, accepted_prediction_tokens: 0 } }),
      };
      return {
        kind: 'completion',
        message: messageOf(options.shape, trace, answer),
        finishReason: completion < full.tokens + answerTokens ? 'length' : 'stop',
        usage,
      };
    },
  };
}
