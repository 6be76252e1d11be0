/**
 * The one mapping from anything thrown to an HTTP failure `{ code, message, details? }`. RewardErrors keep
 * their code; Fastify's own 4xx errors (bad JSON, body too large, wrong media type…) keep their status and
 * get the matching RW_* code; anything else is a bug and goes out as a bare 500 RW_INTERNAL.
 */
import { ERROR_STATUS, RewardError, type ErrorCode } from '../../errors.js';

export interface FailureBody {
  code: ErrorCode;
  message: string;
  details?: unknown;
}

export interface HttpFailure {
  statusCode: number;
  body: FailureBody;
  /** True for failures that are bugs (log them with their stack). */
  internal: boolean;
}

/** Fastify's and Node's own 4xx statuses, each kept with its own code (a 4xx not listed becomes 400). */
export const CODE_BY_STATUS: ReadonlyMap<number, ErrorCode> = new Map<number, ErrorCode>([
  [400, 'RW_BAD_REQUEST'],
  [401, 'RW_UNAUTHORIZED'],
  [404, 'RW_NOT_FOUND'],
  [405, 'RW_METHOD_NOT_ALLOWED'],
  [406, 'RW_NOT_ACCEPTABLE'],
  [408, 'RW_REQUEST_TIMEOUT'],
  [411, 'RW_LENGTH_REQUIRED'],
  [413, 'RW_PAYLOAD_TOO_LARGE'],
  [414, 'RW_URI_TOO_LONG'],
  [415, 'RW_UNSUPPORTED_MEDIA_TYPE'],
  [431, 'RW_HEADERS_TOO_LARGE'],
]);

function field(err: object, name: string): unknown {
  const value: unknown = Reflect.get(err, name);
  return value;
}

/** Node's error on a request whose client hung up mid-body (`abortIncoming`: ECONNRESET "aborted"). */
export function isClientAbort(err: unknown): boolean {
  if (err === null || typeof err !== 'object') return false;
  return field(err, 'code') === 'ECONNRESET' && field(err, 'message') === 'aborted';
}

export function toHttpFailure(err: unknown): HttpFailure {
  if (err instanceof RewardError) {
    const body: FailureBody = { code: err.code, message: err.message };
    if (err.details !== undefined) body.details = err.details;
    return { statusCode: err.statusCode, body, internal: err.code === 'RW_INTERNAL' };
  }
  if (isClientAbort(err)) {
    return {
      statusCode: ERROR_STATUS.RW_CLIENT_ABORTED,
      body: { code: 'RW_CLIENT_ABORTED', message: 'the client disconnected before its request was complete' },
      internal: false,
    };
  }
  if (err !== null && typeof err === 'object') {
    const status = field(err, 'statusCode');
    const fastifyCode = field(err, 'code');
    const message = field(err, 'message');
    const isClientError = typeof status === 'number' && status >= 400 && status < 500;
    const isFastify = typeof fastifyCode === 'string' && fastifyCode.startsWith('FST_');
    // Fastify's body parsing errors (and JSON syntax errors it tags with statusCode 400) are client errors.
    if (isClientError && (isFastify || err instanceof SyntaxError)) {
      const code = CODE_BY_STATUS.get(status) ?? 'RW_BAD_REQUEST';
      const body: FailureBody = {
        code,
        message: typeof message === 'string' && message !== '' ? message : 'bad request',
      };
      if (isFastify) body.details = { fastify_code: fastifyCode };
      return { statusCode: ERROR_STATUS[code], body, internal: false };
    }
  }
  return { statusCode: 500, body: { code: 'RW_INTERNAL', message: 'internal error' }, internal: true };
}

/**
 * The raw HTTP answer to a request Node's parser rejected before Fastify saw it (Fastify's
 * `clientErrorHandler`): 408 on a request timeout, 431 on oversized headers, else 400, in our body shape.
 * Undefined when the socket is gone (reset) and nothing should be written.
 */
export function clientErrorResponse(err: unknown): string | undefined {
  const code = err !== null && typeof err === 'object' ? field(err, 'code') : undefined;
  if (code === 'ECONNRESET') return undefined;
  const [status, reason, failure]: [number, string, FailureBody] =
    code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? [408, 'Request Timeout', { code: 'RW_REQUEST_TIMEOUT', message: 'request not received in time' }]
      : code === 'HPE_HEADER_OVERFLOW'
        ? [
            431,
            'Request Header Fields Too Large',
            { code: 'RW_HEADERS_TOO_LARGE', message: 'request headers exceed the maximum size' },
          ]
        : [400, 'Bad Request', { code: 'RW_BAD_REQUEST', message: 'malformed HTTP request' }];
  const body = JSON.stringify(failure);
  return (
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
  );
}
