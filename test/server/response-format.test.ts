/**
 * Issue 23 at the serving edge: a replica's response format is in /readyz and its switches in /metrics.
 */
import { describe, expect, it } from 'vitest';

import { candidate, GROUND_TRUTH, QUESTION, useHarness } from './helpers.js';

const harness = useHarness();

interface Ready {
  backends: Array<{ name: string; response_format?: Record<string, string> }>;
}

describe('response format in /readyz and /metrics', () => {
  it('shows json_schema, then json_object once the replica refuses the schema, and counts the switch', async () => {
    const h = await harness({ fake: { rejectJsonSchema: 400 } });
    const replica = new URL(h.fake.baseURL).host;

    const before = (await h.app.inject({ method: 'GET', url: '/readyz' })).json<Ready>();
    expect(before.backends[0]?.response_format).toEqual({ [replica]: 'json_schema' });

    const res = await h.app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: { question: QUESTION, ground_truth: GROUND_TRUTH, candidates: [candidate(0), candidate(1)] },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json<{ rewards: unknown[] }>().rewards).toEqual([1, 0]);

    const after = (await h.app.inject({ method: 'GET', url: '/readyz' })).json<Ready>();
    expect(after.backends[0]?.response_format).toEqual({ [replica]: 'json_object' });
    const metrics = (await h.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(metrics).toContain(
      `reward_backend_response_format_switches_total{backend="default",replica="${replica}",to="json_object"} 1`,
    );
    expect(metrics).not.toContain('to="json_schema"');
  });
});
