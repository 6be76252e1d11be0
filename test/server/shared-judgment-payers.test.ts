/**
 * Issue 38 item 4: who pays for a judgment shared between tenants (CACHE_SCOPE=shared, the default). Run A
 * starts it, run B joins, A cancels: B receives it and pays for all of it; A pays nothing
 * (`reward_tenant_tokens_total` in the Prometheus text); two tenants that both receive it split it.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { hashKey } from '../../src/config.js';
import { universalReply } from '../fakes/openai.js';
import { candidate, GROUND_TRUTH, QUESTION, useHarness, waitForJoins } from './helpers.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- response bodies are checked field by field
type Json = any;

const harness = useHarness();

function keysFile(names: readonly string[]): string {
  const path = join(mkdtempSync(join(tmpdir(), 'reward-keys-')), 'keys.json');
  const keys = names.map((name) => ({ name, sha256: hashKey(`key-${name}`), scopes: ['reward', 'cancel'] }));
  writeFileSync(path, JSON.stringify({ keys }));
  return path;
}
const bearer = (name: string) => ({ authorization: `Bearer key-${name}` });

/** `reward_tenant_tokens_total` per tenant, read from the /metrics text. */
async function tenantTokens(app: { inject: (o: object) => Promise<{ body: string }> }) {
  const text = (await app.inject({ method: 'GET', url: '/metrics' })).body;
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^reward_tenant_tokens_total\{[^}]*tenant="([^"]+)"[^}]*\} (\S+)$/gm))
    out[m[1]!] = Number(m[2]);
  return { out, text };
}

async function setup() {
  return harness({
    env: { REWARD_KEYS: keysFile(['run-a', 'run-b']), METRICS_PUBLIC: 'true' },
    fake: { latencyMs: 200, fallback: { kind: 'json', body: universalReply('match', 0.9) } },
  });
}

describe('a judgment shared between tenants', () => {
  it('is paid by the tenant that receives it, not by the one that started it and cancelled', async () => {
    const h = await setup();
    const reward = (tenant: string, tag: string) =>
      h.app.inject({
        method: 'POST',
        url: '/v1/reward',
        headers: bearer(tenant),
        payload: { question: QUESTION, ground_truth: GROUND_TRUTH, candidates: [candidate(0)], tag },
      });
    const a = reward('run-a', 'a-step');
    await h.fake.waitForCalls(1);
    const b = reward('run-b', 'b-step');
    await waitForJoins(h.metrics); // B has joined A's flight
    const cancel = await h.app.inject({
      method: 'POST',
      url: '/v1/cancel',
      headers: bearer('run-a'),
      payload: { tag: 'a-step' },
    });
    expect(cancel.statusCode).toBe(200);
    expect((await a).json<Json>().results[0].status).toBe('cancelled');
    const bBody = (await b).json<Json>();
    expect(bBody.results[0]).toMatchObject({ status: 'ok', cached: true });
    const { out, text } = await tenantTokens(h.app);
    expect(text).toMatch(/^reward_tenant_tokens_total\{[^}]*tenant="run-b"[^}]*\} \d/m);
    expect(out['run-b']).toBeGreaterThan(0);
    expect(out['run-a'] ?? 0).toBe(0);
  });

  it('is split between the tenants that both receive it', async () => {
    const h = await setup();
    const reward = (tenant: string) =>
      h.app.inject({
        method: 'POST',
        url: '/v1/reward',
        headers: bearer(tenant),
        payload: { question: QUESTION, ground_truth: GROUND_TRUTH, candidates: [candidate(1)] },
      });
    const a = reward('run-a');
    await h.fake.waitForCalls(1);
    const b = reward('run-b');
    expect((await a).json<Json>().results[0].status).toBe('ok');
    expect((await b).json<Json>().results[0]).toMatchObject({ status: 'ok', cached: true });
    const { out } = await tenantTokens(h.app);
    expect(out['run-a']).toBeGreaterThan(0);
    expect(out['run-a']).toBeCloseTo(out['run-b']!, 6);
  });
});
