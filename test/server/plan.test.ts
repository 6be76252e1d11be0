/** POST /v1/plan and `npm run plan` (src/server/admission/plan.ts, src/server/process/cli-plan.ts) against the fake backend. */
import { execFile } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';

import { describe, expect, it } from 'vitest';

import type { Plan } from '../../src/server/admission/plan.js';
import { candidate, GROUND_TRUTH, QUESTION, useHarness } from './helpers.js';

const CLI = fileURLToPath(new URL('../../src/server/process/cli-plan.ts', import.meta.url));

describe('POST /v1/plan', () => {
  const start = useHarness();

  it('answers calibrated: false, tokens unknown, before any traffic', async () => {
    const h = await start();
    const r = await h.app.inject({
      method: 'POST',
      url: '/v1/plan',
      payload: { rollouts: 6144, group_size: 8 },
    });
    expect(r.statusCode).toBe(200);
    const plan = r.json<Plan>();
    expect(plan).toMatchObject({
      rollouts: 6144,
      group_size: 8,
      requests: 768,
      calls: 6144 * 3,
      prompt_tokens: null,
      completion_tokens: null,
      calibrated: false,
      call_latency_s: 1,
      graph: { name: 'analysts-2' },
    });
    // 256 slots / 1 s assumed: 18 432 calls in 72 s + one more call on the critical path.
    expect(plan.predicted_wall_s).toBeCloseTo(73, 0);
    expect(plan.limiting).toBe('backend_slots');
    expect(plan.fits).toBe(true);
  });

  it('is calibrated by traffic: measured latency and tokens per judgment of the graph', async () => {
    const h = await start({ fake: { latencyMs: 20 } });
    for (let i = 0; i < 3; i++) {
      const r = await h.app.inject({
        method: 'POST',
        url: '/v1/judge',
        payload: { question: QUESTION, ground_truth: GROUND_TRUTH, candidate: candidate(i) },
      });
      expect(r.statusCode).toBe(200);
    }
    const usage = (
      await h.app.inject({
        method: 'POST',
        url: '/v1/judge',
        payload: { question: QUESTION, ground_truth: GROUND_TRUTH, candidate: candidate(3) },
      })
    ).json<{ usage: { prompt_tokens: number; completion_tokens: number } }>().usage;
    const plan = (
      await h.app.inject({ method: 'POST', url: '/v1/plan', payload: { rollouts: 1000, group_size: 10 } })
    ).json<Plan>();
    expect(plan.calibrated).toBe(true);
    expect(plan.call_latency_s).toBeGreaterThan(0.015);
    expect(plan.call_latency_s).toBeLessThan(0.5);
    // ≈ 1000 × one judgment's tokens (the EWMA over 4 nearly equal judgments).
    expect(plan.prompt_tokens! / (1000 * usage.prompt_tokens)).toBeCloseTo(1, 1);
    expect(plan.completion_tokens! / (1000 * usage.completion_tokens)).toBeCloseTo(1, 1);
  });

  it('says what the step does not fit: the deadline, MAX_CANDIDATES, the queue, the token budget', async () => {
    const h = await start({ env: { MAX_CANDIDATES: '64', JUDGE_TOKEN_BUDGET: '1' } });
    const ask = async (payload: Record<string, unknown>) =>
      (await h.app.inject({ method: 'POST', url: '/v1/plan', payload })).json<Plan>();
    const slow = await ask({ rollouts: 6144, group_size: 16, timeout_s: 30 });
    expect(slow.fits).toBe(false);
    expect(slow.limiting).toBe('backend_slots');
    expect(slow.deadline_s).toBe(30);
    expect((await ask({ rollouts: 64, group_size: 128 })).blocking).toEqual(['max_candidates']);
    expect((await ask({ rollouts: 100_000, group_size: 16, timeout_s: 86_400 })).blocking).toContain(
      'queue_memory',
    );
    // Spend the 1-token budget, then the plan says so.
    await h.app.inject({
      method: 'POST',
      url: '/v1/judge',
      payload: { question: QUESTION, ground_truth: GROUND_TRUTH, candidate: candidate(0) },
    });
    const broke = await ask({ rollouts: 16, group_size: 16 });
    expect(broke).toMatchObject({ fits: false, limiting: 'token_budget', budget_remaining_tokens: 0 });
  });

  it('refuses an invalid body with 400 naming the field', async () => {
    const h = await start();
    const r = await h.app.inject({
      method: 'POST',
      url: '/v1/plan',
      payload: { rollouts: 0, group_size: 8 },
    });
    expect(r.statusCode).toBe(400);
    expect(r.json<{ message: string }>().message).toContain('rollouts');
    const unknown = await h.app.inject({
      method: 'POST',
      url: '/v1/plan',
      payload: { rollouts: 8, group_size: 8, graph: 'nope' },
    });
    expect(unknown.statusCode).toBe(404);
  });

  it("`npm run plan` prints the running server's plan and exits 1 when the step does not fit", async () => {
    const h = await start();
    await h.app.listen({ host: '127.0.0.1', port: 0 });
    const url = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
    const run = (args: string[]) =>
      new Promise<{ code: number | null; stdout: string }>((resolve) => {
        execFile(
          process.execPath,
          ['--import', 'tsx', CLI, '--url', url, ...args],
          { timeout: 20_000 },
          (err, stdout) =>
            resolve({ code: err === null ? 0 : ((err as { code?: number }).code ?? null), stdout }),
        );
      });
    const ok = await run(['--rollouts', '6144', '--group-size', '8', '--json']);
    expect(ok.code).toBe(0);
    const printed = JSON.parse(ok.stdout) as Plan;
    const direct = (
      await h.app.inject({ method: 'POST', url: '/v1/plan', payload: { rollouts: 6144, group_size: 8 } })
    ).json<Plan>();
    expect(printed).toEqual(direct);
    const tight = await run(['--rollouts', '6144', '--timeout-s', '10']);
    expect(tight.code).toBe(1);
    expect(tight.stdout).toMatch(/^fits\s+no: backend_slots$/m);
    expect(tight.stdout).toMatch(/^calls\s+18,432$/m);
    // Refused before asking the server: exit 2 with the reason.
    for (const bad of [[], ['--rollouts', '0'], ['--rollouts', '8', '--bogus'], ['--rollouts']]) {
      const refused = await run(bad);
      expect(refused.code, bad.join(' ')).toBe(2);
      expect(refused.stdout, bad.join(' ')).toBe('');
    }
  }, 30_000);
});
