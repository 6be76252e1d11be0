import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { isErrorCode } from '../../src/errors.js';
import { candidate, GROUND_TRUTH, QUESTION, startHarness, type Harness } from './helpers.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h.close();
});

const valid = { question: QUESTION, ground_truth: GROUND_TRUTH, candidates: [candidate(0)] };

interface BadCase {
  name: string;
  url: string;
  payload?: unknown;
  raw?: string;
  contentType?: string;
  status: number;
  code: string;
  /** The message must name this field. */
  field?: string;
}

const cases: BadCase[] = [
  { name: 'invalid JSON', url: '/v1/reward', raw: '{"question": "q", ', status: 400, code: 'RW_BAD_REQUEST' },
  { name: 'an empty JSON body', url: '/v1/reward', raw: '', status: 400, code: 'RW_BAD_REQUEST' },
  { name: 'a JSON array body', url: '/v1/reward', payload: [1, 2], status: 400, code: 'RW_BAD_REQUEST' },
  { name: 'JSON null', url: '/v1/reward', raw: 'null', status: 400, code: 'RW_BAD_REQUEST' },
  {
    name: 'a non-JSON content type',
    url: '/v1/reward',
    raw: 'question=q',
    contentType: 'application/x-www-form-urlencoded',
    status: 415,
    code: 'RW_UNSUPPORTED_MEDIA_TYPE',
  },
  {
    name: 'candidates of the wrong type',
    url: '/v1/reward',
    payload: { ...valid, candidates: 'one idea only' },
    status: 400,
    code: 'RW_BAD_REQUEST',
    field: 'candidates',
  },
  {
    name: 'a number inside candidates',
    url: '/v1/reward',
    payload: { ...valid, candidates: [candidate(0), 7] },
    status: 400,
    code: 'RW_BAD_REQUEST',
    field: 'candidates[1]',
  },
  {
    name: 'a blank ground_truth',
    url: '/v1/reward',
    payload: { ...valid, ground_truth: '  ' },
    status: 400,
    code: 'RW_BAD_REQUEST',
    field: 'ground_truth',
  },
  {
    name: 'an empty OpenRLHF label',
    url: '/get_reward',
    payload: { query: [candidate(0)], prompts: [''], labels: [''] },
    status: 400,
    code: 'RW_BAD_REQUEST',
    field: 'labels[0]',
  },
  {
    name: 'a missing ground_truth',
    url: '/v1/reward',
    payload: { question: QUESTION, candidates: [candidate(0)] },
    status: 400,
    code: 'RW_BAD_REQUEST',
    field: 'ground_truth',
  },
  {
    name: 'an unknown key',
    url: '/v1/reward',
    payload: { ...valid, temperature: 0.5 },
    status: 400,
    code: 'RW_BAD_REQUEST',
    field: 'temperature',
  },
  {
    name: 'a nested unknown key in a batch group',
    url: '/v1/reward/batch',
    payload: { groups: [{ ...valid, extra: true }] },
    status: 400,
    code: 'RW_BAD_REQUEST',
    field: 'groups[0].extra',
  },
  {
    name: 'zero candidates',
    url: '/v1/reward',
    payload: { ...valid, candidates: [] },
    status: 400,
    code: 'RW_BAD_REQUEST',
    field: 'candidates',
  },
  {
    name: '10 000 candidates',
    url: '/v1/reward',
    payload: { ...valid, candidates: Array.from({ length: 10_000 }, (_, i) => candidate(i)) },
    status: 400,
    code: 'RW_BAD_REQUEST',
    field: 'candidates',
  },
  {
    name: 'a NUL byte in the ground truth',
    url: '/v1/judge',
    payload: { question: QUESTION, ground_truth: 'gt\u0000', candidate: candidate(0) },
    status: 400,
    code: 'RW_BAD_REQUEST',
    field: 'ground_truth',
  },
  {
    name: 'a non-string label',
    url: '/get_reward',
    payload: { query: [candidate(0)], prompts: [''], labels: [42] },
    status: 400,
    code: 'RW_BAD_REQUEST',
    field: 'labels[0]',
  },
  {
    name: 'a label object with an unknown key',
    url: '/get_reward',
    payload: { query: [candidate(0)], labels: [{ ground_truth: GROUND_TRUTH, answer: 'x' }] },
    status: 400,
    code: 'RW_BAD_REQUEST',
    field: 'labels[0].answer',
  },
  {
    name: 'labels shorter than query',
    url: '/get_reward',
    payload: { query: [candidate(0), candidate(1)], labels: [GROUND_TRUTH] },
    status: 400,
    code: 'RW_BAD_REQUEST',
    field: 'labels',
  },
  {
    name: 'a non-string slime label',
    url: '/slime',
    payload: { prompt: QUESTION, response: candidate(0), label: [GROUND_TRUTH] },
    status: 400,
    code: 'RW_BAD_REQUEST',
    field: 'label',
  },
  {
    name: 'a verify row without ground_truth',
    url: '/verify',
    payload: { responses_create_params: { input: QUESTION }, response: { output: [] } },
    status: 400,
    code: 'RW_BAD_REQUEST',
    field: 'ground_truth',
  },
  {
    name: 'an unknown adapter query parameter',
    url: '/slime?grpah=vote-3',
    payload: { prompt: QUESTION, response: candidate(0), label: GROUND_TRUTH },
    status: 400,
    code: 'RW_BAD_REQUEST',
    field: 'grpah',
  },
  {
    name: 'a graph of the wrong type',
    url: '/v1/reward',
    payload: { ...valid, graph: 3 },
    status: 400,
    code: 'RW_BAD_REQUEST',
    field: 'graph',
  },
  {
    name: 'include_transcripts as a string',
    url: '/v1/reward',
    payload: { ...valid, include_transcripts: 'yes' },
    status: 400,
    code: 'RW_BAD_REQUEST',
    field: 'include_transcripts',
  },
  { name: 'an unknown route', url: '/v1/rewards', payload: valid, status: 404, code: 'RW_NOT_FOUND' },
];

describe('bad bodies', () => {
  for (const c of cases) {
    it(`answers ${c.status} ${c.code} to ${c.name}`, async () => {
      const res = await h.app.inject({
        method: 'POST',
        url: c.url,
        headers: { 'content-type': c.contentType ?? 'application/json' },
        payload: c.raw ?? JSON.stringify(c.payload),
      });
      expect(res.statusCode).toBe(c.status);
      const body = res.json();
      expect(body.code).toBe(c.code);
      expect(isErrorCode(body.code)).toBe(true);
      expect(typeof body.message).toBe('string');
      if (c.field !== undefined) {
        expect(body.message).toContain(c.field);
        expect(body.details.map((d: { path: string }) => d.path)).toContain(c.field);
      }
    });
  }

  it('answers 413 RW_PAYLOAD_TOO_LARGE to a 20 MB body', async () => {
    const huge = JSON.stringify({ ...valid, candidates: ['x'.repeat(20 * 1024 * 1024)] });
    const res = await h.app.inject({
      method: 'POST',
      url: '/v1/reward',
      headers: { 'content-type': 'application/json' },
      payload: huge,
    });
    expect(res.statusCode).toBe(413);
    expect(res.json().code).toBe('RW_PAYLOAD_TOO_LARGE');
  });

  it('never reached the backend and still serves after every bad body', async () => {
    expect(h.fake.callCount).toBe(0);
    const health = await h.app.inject({ method: 'GET', url: '/healthz' });
    expect(health.statusCode).toBe(200);
    const ok = await h.app.inject({ method: 'POST', url: '/v1/reward', payload: valid });
    expect(ok.statusCode).toBe(200);
  });

  it('answers a 4xx for garbage on every POST route, never a 5xx', async () => {
    const garbage = ['null', '[]', '"text"', '{}', '{"query": {}}', '0', '{"__proto__": {"x": 1}}'];
    for (const url of ['/v1/reward', '/v1/reward/batch', '/v1/judge', '/get_reward', '/slime', '/verify']) {
      for (const raw of garbage) {
        const res = await h.app.inject({
          method: 'POST',
          url,
          headers: { 'content-type': 'application/json' },
          payload: raw,
        });
        expect(res.statusCode, `${url} ${raw}`).toBeGreaterThanOrEqual(400);
        expect(res.statusCode, `${url} ${raw}`).toBeLessThan(500);
        expect(isErrorCode(res.json().code)).toBe(true);
      }
    }
  });
});
