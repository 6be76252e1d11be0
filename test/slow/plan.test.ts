/**
 * Capacity plan vs a measured burst (issue 21): `POST /v1/plan` asked before a step, then the step sent at
 * once against the fake backend, at two latencies. The stated target: predicted wall time within 0.7–1.4×
 * of the measured one (docs/operations.md). ≈ 25 s, so in the `slow` project.
 */
import { describe, expect, it } from 'vitest';

import { planBurst } from '../../bench/plan.js';

describe('capacity plan accuracy', () => {
  for (const latencyMs of [50, 200]) {
    it(`predicts a 256-rollout burst at ${latencyMs} ms per call within 0.7–1.4x of its measured wall time`, async () => {
      const r = await planBurst({ latencyMs, rollouts: 256, groupSize: 16, inflight: 16 });
      expect(r.okJudgments).toBe(256);
      expect(r.plan.calibrated).toBe(true);
      expect(r.plan.calls).toBe(r.measuredCalls);
      expect(r.plan.fits).toBe(true);
      expect(r.plan.prompt_tokens).toBeGreaterThan(0);
      expect(r.ratio).toBeGreaterThanOrEqual(0.7);
      expect(r.ratio).toBeLessThanOrEqual(1.4);
    }, 60_000);
  }
});
