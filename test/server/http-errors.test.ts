import { createRequire } from 'node:module';
import { connect, type AddressInfo } from 'node:net';

import { describe, expect, it } from 'vitest';

import { ERROR_STATUS, RewardError } from '../../src/errors.js';
import { CODE_BY_STATUS, clientErrorResponse, toHttpFailure } from '../../src/server/http/http-errors.js';
import { offlineApp } from './helpers.js';

/** Every error class Fastify itself defines, with the status it carries. */
function fastifyErrors(): Array<{ code: string; statusCode: number }> {
  const errors: Record<string, unknown> = createRequire(import.meta.url)('fastify/lib/errors.js');
  const out: Array<{ code: string; statusCode: number }> = [];
  for (const [code, Ctor] of Object.entries(errors)) {
    if (typeof Ctor !== 'function' || !code.startsWith('FST_ERR')) continue;
    const err = new (Ctor as new (...args: string[]) => { statusCode?: number })('a', 'b', 'c');
    if (typeof err.statusCode === 'number') out.push({ code, statusCode: err.statusCode });
  }
  return out;
}

/** Sends raw bytes to a listening app on loopback and returns the raw answer. */
function rawExchange(port: number, request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port }, () => socket.write(request));
    const chunks: Buffer[] = [];
    socket.setTimeout(5_000, () => socket.destroy(new Error('no answer within 5 s')));
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('end', () => resolve(Buffer.concat(chunks).toString()));
    socket.on('error', reject);
  });
}

describe('toHttpFailure', () => {
  it('keeps a RewardError code, status and details', () => {
    const failure = toHttpFailure(
      new RewardError('RW_OVERLOADED', 'busy', { details: { retry_after_s: 3 } }),
    );
    expect(failure).toEqual({
      statusCode: 503,
      body: { code: 'RW_OVERLOADED', message: 'busy', details: { retry_after_s: 3 } },
      internal: false,
    });
  });

  it("maps Fastify's 4xx errors to RW codes with their status", () => {
    const tooLarge = Object.assign(new Error('Request body is too large'), {
      code: 'FST_ERR_CTP_BODY_TOO_LARGE',
      statusCode: 413,
    });
    expect(toHttpFailure(tooLarge).statusCode).toBe(413);
    expect(toHttpFailure(tooLarge).body.code).toBe('RW_PAYLOAD_TOO_LARGE');
    const odd = Object.assign(new Error('x'), { code: 'FST_ERR_SOMETHING', statusCode: 418 });
    expect(toHttpFailure(odd)).toMatchObject({ statusCode: 400, body: { code: 'RW_BAD_REQUEST' } });
  });

  it('keeps every 4xx status Fastify and Node produce, each with the code of that status', () => {
    for (const status of [400, 401, 404, 405, 406, 408, 411, 413, 414, 415, 431]) {
      const err = Object.assign(new Error('x'), { code: 'FST_ERR_SOMETHING', statusCode: status });
      const failure = toHttpFailure(err);
      expect(failure.statusCode).toBe(status);
      expect(ERROR_STATUS[failure.body.code]).toBe(status);
    }
    for (const [status, code] of CODE_BY_STATUS) expect(ERROR_STATUS[code]).toBe(status);
  });

  it("keeps the status of every 4xx error class in Fastify's own error list", () => {
    const clientErrors = fastifyErrors().filter((e) => e.statusCode >= 400 && e.statusCode < 500);
    expect(clientErrors.length).toBeGreaterThan(5);
    for (const { code, statusCode } of clientErrors) {
      const failure = toHttpFailure(Object.assign(new Error(code), { code, statusCode }));
      expect([code, failure.statusCode]).toEqual([code, statusCode]);
    }
  });

  it('answers an over-long path parameter with 414 RW_URI_TOO_LONG in our body shape', async () => {
    const { app } = offlineApp();
    const res = await app.inject({ method: 'GET', url: `/v1/graphs/${'x'.repeat(500)}` });
    expect(res.statusCode).toBe(414);
    expect(res.json()).toMatchObject({ code: 'RW_URI_TOO_LONG' });
    await app.close();
  });

  it('answers oversized request headers with 431 RW_HEADERS_TOO_LARGE over a real socket', async () => {
    const { app } = offlineApp();
    await app.listen({ port: 0, host: '127.0.0.1' });
    try {
      const port = (app.server.address() as AddressInfo).port;
      const answer = await rawExchange(
        port,
        `GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ${'a'.repeat(64 * 1024)}\r\n\r\n`,
      );
      expect(answer.startsWith('HTTP/1.1 431 ')).toBe(true);
      expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toMatchObject({
        code: 'RW_HEADERS_TOO_LARGE',
      });
      // Still serving.
      expect((await app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    } finally {
      await app.close();
    }
  });

  it("maps Node's parser errors to 408, 431 or 400 and writes nothing for a reset socket", () => {
    const statusOf = (code: string): string | undefined =>
      clientErrorResponse(Object.assign(new Error(code), { code }))?.split('\r\n')[0];
    expect(statusOf('ERR_HTTP_REQUEST_TIMEOUT')).toBe('HTTP/1.1 408 Request Timeout');
    expect(statusOf('HPE_HEADER_OVERFLOW')).toBe('HTTP/1.1 431 Request Header Fields Too Large');
    expect(statusOf('HPE_INVALID_METHOD')).toBe('HTTP/1.1 400 Bad Request');
    expect(statusOf('ECONNRESET')).toBeUndefined();
    const response = clientErrorResponse(
      Object.assign(new Error('t'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' }),
    )!;
    const body = response.slice(response.indexOf('\r\n\r\n') + 4);
    expect(JSON.parse(body)).toEqual({ code: 'RW_REQUEST_TIMEOUT', message: 'request not received in time' });
    expect(response).toContain(`Content-Length: ${Buffer.byteLength(body)}\r\n`);
  });

  it('turns anything else into a bare 500 RW_INTERNAL without internals', () => {
    for (const err of [
      new TypeError('secret path /etc/x'),
      'boom',
      null,
      { statusCode: 404, message: 'not fastify' },
    ]) {
      const failure = toHttpFailure(err);
      expect(failure).toEqual({
        statusCode: 500,
        body: { code: 'RW_INTERNAL', message: 'internal error' },
        internal: true,
      });
    }
  });

  it('answers an unexpected handler error as 500 RW_INTERNAL and keeps serving', async () => {
    const { app } = offlineApp();
    app.get('/boom', () => {
      throw new Error('database password is hunter2');
    });
    const res = await app.inject({ method: 'GET', url: '/boom' });
    expect(res.statusCode).toBe(500);
    expect(res.json()).toEqual({ code: 'RW_INTERNAL', message: 'internal error' });
    expect((await app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    await app.close();
  });
});
