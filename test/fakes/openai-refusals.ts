/**
 * OpenAI's refusals of a reasoning model's request dialect, for the fake (openai.ts imports this; it
 * imports nothing of the fake, so there is no cycle).
 */

/** A FakeReply of kind `status` (structurally). */
export interface StatusReply {
  kind: 'status';
  status: number;
  body: unknown;
}

/**
 * OpenAI's 400 for a reasoning model's request, as api.openai.com answers it: `max_tokens` first
 * (unsupported_parameter), then a non-default `temperature` / `top_p` (unsupported_value). Undefined when
 * the request is in the reasoning models' dialect.
 */
export function openaiReasoningRefusal(body: Readonly<Record<string, unknown>>): StatusReply | undefined {
  if (body['max_tokens'] !== undefined) {
    return refusal(
      "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
      'max_tokens',
      'unsupported_parameter',
    );
  }
  for (const param of ['temperature', 'top_p'] as const) {
    const value = body[param];
    if (value !== undefined && value !== 1) {
      return refusal(
        `Unsupported value: '${param}' does not support ${JSON.stringify(value)} with this model. Only the default (1) value is supported.`,
        param,
        'unsupported_value',
      );
    }
  }
  return undefined;
}

function refusal(message: string, param: string, code: string): StatusReply {
  return {
    kind: 'status',
    status: 400,
    body: { error: { message, type: 'invalid_request_error', param, code } },
  };
}
