/**
 * The one mapping from anything thrown to an HTTP failure `{ code, message, details? }`. RewardErrors keep
 * their code; Fastify's own 4xx errors (bad JSON, body too large, wrong media type…) keep their status and
 * get the matching RW_* code; anything else is a bug and goes out as a bare 500 RW_INTERNAL.
 */
import { ERROR_STATUS, RewardError, type ErrorCode } from '../errors.js';

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

const CODE_BY_STATUS = new Map<number, ErrorCode>([
  [400, 'RW_BAD_REQUEST'],
  [401, 'RW_UNAUTHORIZED'],
  [404, 'RW_NOT_FOUND'],
  [413, 'RW_PAYLOAD_TOO_LARGE'],
  [415, 'RW_UNSUPPORTED_MEDIA_TYPE'],
]);

function field(err: object, name: string): unknown {
  const value: unknown = Reflect.get(err, name);
  return value;
}

export function toHttpFailure(err: unknown): HttpFailure {
  if (err instanceof RewardError) {
    const body: FailureBody = { code: err.code, message: err.message };
    if (err.details !== undefined) body.details = err.details;
    return { statusCode: err.statusCode, body, internal: err.code === 'RW_INTERNAL' };
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
