/**
 * JUDGE_REASONING_EFFORT and JUDGE_EXTRA_BODY (issue 37 items 3–4): validated at start-up with errors that
 * name the variable (and the refused key), carried into the default backend's settings.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import { loadConfig } from '../src/config.js';

const BASE = { JUDGE_BASE_URL: 'http://127.0.0.1:9/v1', JUDGE_MODEL: 'gpt-oss-120b' };
const dir = mkdtempSync(join(tmpdir(), 'config-reasoning-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const backend = (env: Record<string, string>) => {
  const judge = loadConfig({ ...BASE, ...env }).judge.default;
  if (judge === 'offline') throw new Error('offline');
  return judge;
};

describe('JUDGE_REASONING_EFFORT', () => {
  it('sets the default backend’s reasoning_effort; unset sends none', () => {
    expect(backend({ JUDGE_REASONING_EFFORT: 'low' }).reasoning_effort).toBe('low');
    expect(backend({}).reasoning_effort).toBeUndefined();
  });

  it('refuses another value at start-up, naming the variable', () => {
    expect(() => loadConfig({ ...BASE, JUDGE_REASONING_EFFORT: 'extreme' })).toThrow(
      /JUDGE_REASONING_EFFORT/,
    );
  });

  it('is the effort of every routing-file backend that names none itself', () => {
    const path = join(dir, 'routing.json');
    writeFileSync(
      path,
      JSON.stringify({
        backends: {
          a: { base_url: 'http://127.0.0.1:9/v1', model: 'x' },
          b: { base_url: 'http://127.0.0.1:9/v1', model: 'y', reasoning_effort: 'minimal' },
        },
      }),
    );
    const file = loadConfig({ ...BASE, REWARD_CONFIG: path, JUDGE_REASONING_EFFORT: 'high' }).judge.file;
    expect(file?.backends['a']?.reasoning_effort).toBe('high');
    expect(file?.backends['b']?.reasoning_effort).toBe('minimal');
  });
});

describe('JUDGE_EXTRA_BODY', () => {
  it('parses a JSON object into the default backend’s extra_body', () => {
    const extra = { chat_template_kwargs: { enable_thinking: false }, top_k: 20 };
    expect(backend({ JUDGE_EXTRA_BODY: JSON.stringify(extra) }).extra_body).toEqual(extra);
  });

  it.each([
    ['{"model":"other"}', /JUDGE_EXTRA_BODY.*"model" is set by the server/],
    ['{"response_format":{"type":"text"}}', /JUDGE_EXTRA_BODY.*"response_format" is set by the server/],
    ['{"messages":[]}', /"messages" is set by the server/],
    ['{"stream":true}', /"stream" is set by the server/],
    ['{top_k: 20}', /JUDGE_EXTRA_BODY: not JSON/],
    ['[1,2]', /JUDGE_EXTRA_BODY: must be a JSON object/],
  ])('refuses %s at start-up with a clear error', (value, message) => {
    expect(() => loadConfig({ ...BASE, JUDGE_EXTRA_BODY: value })).toThrow(message);
  });

  it('is refused without JUDGE_BASE_URL (it would reach no backend)', () => {
    expect(() => loadConfig({ JUDGE_EXTRA_BODY: '{"top_k":20}' })).toThrow(/JUDGE_EXTRA_BODY: applies to/);
  });
});
