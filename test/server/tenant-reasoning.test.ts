/** Issue 37 item 6: a tenant's reasoning tokens are counted under its name, per tenant, as the backend reported them. */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { expect, it } from 'vitest';

import { hashKey } from '../../src/config.js';
import { universalReply } from '../fakes/openai.js';
import { createThinkingJudge } from '../fakes/thinking.js';
import { candidate, counterValue, GROUND_TRUTH, QUESTION, useHarness } from './helpers.js';

const harness = useHarness();

it('counts reward_tenant_reasoning_tokens_total per tenant, matching usage.reasoning_tokens', async () => {
  const path = join(mkdtempSync(join(tmpdir(), 'reward-keys-')), 'keys.json');
  const keys = ['run-a', 'run-b'].map((name) => ({
    name,
    sha256: hashKey(`key-${name}`),
    scopes: ['reward'],
  }));
  writeFileSync(path, JSON.stringify({ keys }));
  const judge = createThinkingJudge({ shape: 'reasoning_content', answer: () => universalReply('match') });
  const h = await harness({ env: { REWARD_KEYS: path }, fake: { fallback: (b) => judge.reply(b) } });
  const spent: Record<string, number> = {};
  for (const [tenant, n] of [
    ['run-a', 1],
    ['run-b', 2],
  ] as const) {
    const res = await h.app.inject({
      method: 'POST',
      url: '/v1/reward',
      headers: { authorization: `Bearer key-${tenant}` },
      payload: {
        question: QUESTION,
        ground_truth: GROUND_TRUTH,
        candidates: Array.from({ length: n }, (_, i) => candidate(i + (tenant === 'run-b' ? 10 : 0))),
      },
    });
    expect(res.statusCode).toBe(200);
    spent[tenant] = res.json<{ usage: { reasoning_tokens: number } }>().usage.reasoning_tokens;
  }
  expect(spent['run-b']).toBe(2 * spent['run-a']!);
  expect(await counterValue(h.metrics.tenants.reasoningTokens, { tenant: 'run-a' })).toBe(spent['run-a']);
  expect(await counterValue(h.metrics.tenants.reasoningTokens, { tenant: 'run-b' })).toBe(spent['run-b']);
  expect(spent['run-a']).toBe(judge.generated.reasoningTokens / 3);
});
