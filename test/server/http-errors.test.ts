import { readFileSync } from 'node:fs';

import { describe, expect, it } from 'vitest';

import { ERROR_STATUS, RewardError } from '../../src/errors.js';
import { toHttpFailure } from '../../src/server/http-errors.js';
import { offlineApp } from './helpers.js';

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

describe('README error-code table', () => {
  it('lists exactly the codes and statuses of src/errors.ts', () => {
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    const start = readme.indexOf('<!-- section:api -->');
    const end = readme.indexOf('<!-- /section:api -->');
    expect(start).toBeGreaterThanOrEqual(0);
    const rows = [...readme.slice(start, end).matchAll(/^\|\s*`(RW_[A-Z_]+)`\s*\|\s*(\d{3})\s*\|/gm)];
    const table = Object.fromEntries(rows.map((m) => [m[1], Number(m[2])]));
    expect(rows.length).toBe(Object.keys(table).length);
    expect(table).toEqual({ ...ERROR_STATUS });
  });
});
