/**
 * The one table of error codes and their HTTP status; one meaning per code. docs/api.md lists the same
 * table; a test keeps them in sync. The 4xx codes below 500 other than 400/401/403/404 mirror the HTTP statuses that
 * Fastify and Node's HTTP parser produce themselves, so those statuses are kept, not rewritten to 400.
 */
const STATUS = {
  RW_BAD_REQUEST: 400,
  RW_INVALID_GRAPH: 400,
  /** `/get_reward`: a query that does not start with its prompt (the rollout cannot be told apart). */
  RW_PROMPT_MISMATCH: 400,
  /** An inline graph while ALLOW_INLINE_GRAPHS is off, or one beyond the operator's INLINE_* limits. */
  RW_GRAPH_NOT_ALLOWED: 403,
  RW_TOO_MANY_COMPARISONS: 400,
  RW_UNAUTHORIZED: 401,
  /** A valid key without the route's scope (REWARD_KEYS); the message names the scope. */
  RW_FORBIDDEN: 403,
  RW_NOT_FOUND: 404,
  RW_UNKNOWN_GRAPH: 404,
  RW_METHOD_NOT_ALLOWED: 405,
  RW_NOT_ACCEPTABLE: 406,
  RW_REQUEST_TIMEOUT: 408,
  RW_LENGTH_REQUIRED: 411,
  RW_PAYLOAD_TOO_LARGE: 413,
  RW_URI_TOO_LONG: 414,
  RW_UNSUPPORTED_MEDIA_TYPE: 415,
  RW_HEADERS_TOO_LARGE: 431,
  /** JUDGE_TOKEN_BUDGET spent in the current window: new judgments refused until it ends (Retry-After). */
  RW_BUDGET_EXHAUSTED: 429,
  /** A tenant over its `rpm` (REWARD_KEYS): Retry-After says when its next request fits. */
  RW_RATE_LIMITED: 429,
  /** The caller went away (client disconnect); nginx's 499. Seen in results and metrics, never sent. */
  RW_CLIENT_ABORTED: 499,
  /** Every request waiting for the judgment was cancelled (POST /v1/cancel). In results, never sent. */
  RW_CANCELLED: 499,
  RW_INTERNAL: 500,
  RW_JUDGE_UNPARSABLE: 502,
  /** The judge ran out of `max_tokens` (finish_reason `length`) and a larger budget did not help or fit. */
  RW_JUDGE_TRUNCATED: 502,
  /** The prompt (or a re-ask) does not fit the judge's context window. */
  RW_JUDGE_CONTEXT_OVERFLOW: 502,
  RW_JUDGE_FAILED: 503,
  RW_JUDGE_UNAVAILABLE: 503,
  /** A judge call cut because its judgment had already ended (a sibling node failed). Metrics only. */
  RW_CALL_CANCELLED: 503,
  RW_OVERLOADED: 503,
  RW_SHUTTING_DOWN: 503,
  RW_JUDGE_TIMEOUT: 504,
} as const satisfies Record<string, number>;

export type ErrorCode = keyof typeof STATUS;
export const ERROR_STATUS: Readonly<Record<ErrorCode, number>> = STATUS;

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(STATUS, value);
}

export class RewardError extends Error {
  readonly statusCode: number;
  readonly code: ErrorCode;
  readonly details: unknown;
  constructor(code: ErrorCode, message: string, options?: ErrorOptions & { details?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.statusCode = STATUS[code];
    this.details = options?.details;
  }
}

/** An abort reason or thrown value as an Error (rejections must carry one). */
export function toError(reason: unknown): Error {
  return reason instanceof Error ? reason : new Error(String(reason));
}
