/**
 * A reasoning judge as the request side of issue 37 plays it: the thinking judge (thinking.ts) with its trace
 * in `reasoning_content` (a server with a reasoning parser), its length set by the request's
 * `reasoning_effort`, optionally refusing first like OpenAI's reasoning models (openai-refusals.ts).
 */
import type { FakeChatRequest, FakeReplyFn } from './openai.js';
import { openaiReasoningRefusal } from './openai-refusals.js';
import { createThinkingJudge } from './thinking.js';

export { openaiReasoningRefusal };
export { TRACE_TOKENS } from './thinking.js';

/**
 * A fallback that answers `answer` after a trace in `reasoning_content`, and, with `openaiDialect`, first
 * refuses like OpenAI's reasoning models (openaiReasoningRefusal).
 */
export function reasoningJudge(
  answer: unknown,
  options: {
    openaiDialect?: boolean;
    /** Trace tokens per effort (default TRACE_TOKENS; an effort it lacks thinks as its `medium`). */
    traces?: Readonly<Partial<Record<string, number>>>;
    /** Told each answered call's reasoning tokens (what the fake generated as trace). */
    onReasoning?: (tokens: number, body: FakeChatRequest) => void;
  } = {},
): FakeReplyFn {
  const judge = createThinkingJudge({
    shape: 'reasoning_content',
    answer: () => answer,
    traces: options.traces,
  });
  return (body) => {
    const refused = options.openaiDialect === true ? openaiReasoningRefusal(body) : undefined;
    if (refused !== undefined) return refused;
    const before = judge.generated.reasoningTokens;
    const reply = judge.reply(body);
    options.onReasoning?.(judge.generated.reasoningTokens - before, body);
    return reply;
  };
}
