/**
 * Issue 38 item 10: an engine whose /metrics says 0 running and 0 waiting while we hold calls on it (the
 * fake engine's `lyingGauges`) is not believed — the replica is steered from completions, /readyz says
 * `engine_gauges: distrusted` and `reward_backend_replica_engine_metrics_trusted` is 0 — and no reward is
 * lost; an honest engine stays trusted.
 */
import { describe, expect, it } from 'vitest';

import { candidate, GROUND_TRUTH, QUESTION, useHarness } from './helpers.js';

const harness = useHarness();

const judge = (i: number) => ({ question: QUESTION, ground_truth: GROUND_TRUTH, candidate: candidate(i) });
const GAUGE = /^reward_backend_replica_engine_metrics_trusted\{[^}]*\} (\d+)$/m;

async function burst(lyingGauges: boolean) {
  const h = await harness({
    env: { JUDGE_ENGINE_METRICS_INTERVAL_MS: '20' },
    fake: { engine: { slots: 64, stepMs: 10, tokens: 4, lyingGauges } },
  });
  const gauges = async (): Promise<Record<string, string> | undefined> => {
    const ready = await h.app.inject({ method: 'GET', url: '/readyz' });
    return ready.json<{ backends: Array<{ engine_gauges?: Record<string, string> }> }>().backends[0]
      ?.engine_gauges;
  };
  const replies = Promise.all(
    Array.from({ length: 40 }, (_, i) =>
      h.app.inject({ method: 'POST', url: '/v1/judge', payload: judge(i) }),
    ),
  );
  const results = await replies;
  const metrics = (await h.app.inject({ method: 'GET', url: '/metrics' })).body;
  return { results, trusted: GAUGE.exec(metrics)?.[1], last: await gauges() };
}

describe('engine gauges that contradict our calls in flight', () => {
  it('are distrusted (readyz, metric) and every judgment of the burst succeeds', async () => {
    const { results, trusted, last } = await burst(true);
    expect(results.map((r) => r.statusCode)).toEqual(results.map(() => 200));
    expect(results.every((r) => r.json<{ status: string }>().status === 'ok')).toBe(true);
    expect(Object.values(last ?? {})).toEqual(['distrusted']);
    expect(trusted).toBe('0');
  }, 20_000);

  it('stay trusted when the engine reports what it holds', async () => {
    const { results, trusted, last } = await burst(false);
    expect(results.every((r) => r.statusCode === 200)).toBe(true);
    expect(Object.values(last ?? {})).toEqual(['trusted']);
    expect(trusted).toBe('1');
  }, 20_000);
});
