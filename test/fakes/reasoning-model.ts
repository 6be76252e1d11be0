/**
 * A reasoning judge as the fake plays it (issue 37): OpenAI's refusals of a reasoning model's request
 * dialect, and a reply whose trace comes back in `reasoning_content` (a server with a reasoning parser;
 * the JSON answer in `content`) with a length set by the request's `reasoning_effort`.
 */
import type { FakeChatRequest, FakeReply, FakeReplyFn } from './openai.js';
import { openaiReasoningRefusal } from './openai-refusals.js';

export { openaiReasoningRefusal };

/** Trace tokens per `reasoning_effort` (absent: `medium`, the default of GPT-OSS and gpt-5). */
export const TRACE_TOKENS: Readonly<Record<string, number>> = {
  minimal: 60,
  low: 250,
  medium: 800,
  high: 2400,
};

const TRACE_SENTENCE = 'Compare the candidate with the ground truth step by step. ';

/** The completion budget a request carries, in either dialect. */
const budgetOf = (body: FakeChatRequest): number => {
  const budget = body['max_completion_tokens'] ?? body.max_tokens;
  return typeof budget === 'number' ? budget : Infinity;
};

/**
 * A reasoning model's reply to `body`: a trace of TRACE_TOKENS[effort] tokens (4 characters each) in
 * `reasoning_content`, then `answer` as JSON in `content`; `completion_tokens` counts both and
 * `completion_tokens_details.reasoning_tokens` the trace, as vLLM and OpenAI report. A budget below trace +
 * answer cuts the reply (`finish_reason: length`): all trace and no content when it ends inside the trace.
 */
export function reasoningReply(
  body: FakeChatRequest,
  answer: unknown,
  traces: Readonly<Record<string, number>> = TRACE_TOKENS,
): FakeReply {
  const effort = typeof body['reasoning_effort'] === 'string' ? body['reasoning_effort'] : 'medium';
  const traceTokens = traces[effort] ?? traces['medium'] ?? TRACE_TOKENS['medium']!;
  const content = JSON.stringify(answer);
  const answerTokens = Math.max(1, Math.ceil(content.length / 4));
  const budget = budgetOf(body);
  const cut = budget < traceTokens + answerTokens;
  const reasoningTokens = Math.min(traceTokens, budget);
  const shownAnswer = cut ? content.slice(0, Math.max(0, (budget - traceTokens) * 4)) : content;
  const completionTokens = cut ? budget : traceTokens + answerTokens;
  const trace = TRACE_SENTENCE.repeat(Math.ceil((reasoningTokens * 4) / TRACE_SENTENCE.length)).slice(
    0,
    reasoningTokens * 4,
  );
  const promptTokens = Math.max(
    1,
    Math.ceil((body.messages ?? []).reduce((n, m) => n + m.content.length, 0) / 4),
  );
  return {
    kind: 'status',
    status: 200,
    body: {
      id: 'chatcmpl-fake-reasoning',
      object: 'chat.completion',
      created: 0,
      model: body.model ?? 'fake-model',
      choices: [
        {
          index: 0,
          message: {
            role: 'assistant',
            content: shownAnswer === '' ? null : shownAnswer,
            reasoning_content: trace,
          },
          finish_reason: cut ? 'length' : 'stop',
        },
      ],
      usage: {
        prompt_tokens: promptTokens,
        completion_tokens: completionTokens,
        total_tokens: promptTokens + completionTokens,
        completion_tokens_details: { reasoning_tokens: reasoningTokens },
      },
    },
  };
}

/**
 * A fallback that answers like a reasoning model (`reasoningReply` with `answer`), and, with
 * `openaiDialect`, first refuses like OpenAI's reasoning models (openaiReasoningRefusal).
 */
export function reasoningJudge(
  answer: unknown,
  options: {
    openaiDialect?: boolean;
    /** Trace tokens per effort (default TRACE_TOKENS). */
    traces?: Readonly<Record<string, number>>;
    /** Told each answered call's reasoning tokens (what the fake generated as trace). */
    onReasoning?: (tokens: number, body: FakeChatRequest) => void;
  } = {},
): FakeReplyFn {
  return (body) => {
    const refused = options.openaiDialect === true ? openaiReasoningRefusal(body) : undefined;
    if (refused !== undefined) return refused;
    const reply = reasoningReply(body, answer, options.traces);
    options.onReasoning?.(reasoningTokensOf(reply), body);
    return reply;
  };
}

/** `usage.completion_tokens_details.reasoning_tokens` of a reply made by reasoningReply. */
function reasoningTokensOf(reply: FakeReply): number {
  if (reply.kind !== 'status') return 0;
  const usage = (reply.body as { usage?: { completion_tokens_details?: { reasoning_tokens?: number } } })
    .usage;
  return usage?.completion_tokens_details?.reasoning_tokens ?? 0;
}
