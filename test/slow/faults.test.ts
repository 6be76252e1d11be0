/**
 * Issue 23, "Must show": the retry path under mixed faults (bench/faults.ts) judges ≥ 90 % of 480
 * judgments inside the deadline, every other item an explicit failure, and never switches the backend off
 * json_schema. Run at 0.5 × the issue's durations (REQUEST_DEADLINE_MS 30 000, JUDGE_TIMEOUT_MS 15 000,
 * Retry-After 0.5 s, 100 ms per call): ~20–30 s, so in the `slow` project. At 0.2 × (12 s) the ~3 s of
 * CPU the 1 700 calls need no longer fit the deadline when the 2-core machine is shared (load 12: 43–92 %
 * judged, mostly "deadline reached"). The figure at full scale is in docs/backends.md.
 */
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

import { DEFAULT_DATASET, loadCorpus } from '../../bench/data.js';
import { ISSUE_MIX, runFaultScenario } from '../../bench/faults.js';

describe.skipIf(!existsSync(DEFAULT_DATASET))(
  'mixed faults (10 % 429/500, 2 % hangs, 3 % cut, 2 % prose)',
  () => {
    it('judges ≥ 90 % of 480 judgments inside the deadline; the rest fail explicitly', async () => {
      const r = await runFaultScenario(loadCorpus(), {
        groups: 30,
        concurrentGroups: 30,
        graph: 'default',
        mix: ISSUE_MIX,
        scale: 0.5,
        deadlineMs: 60_000,
        latencyMs: 200,
        seed: 23,
      });
      expect(r.judgments).toBe(480);
      expect(r.ok / r.judgments).toBeGreaterThanOrEqual(0.9);
      // Every other item is an explicit failure (a status and reward null), never a silent 0.
      expect(r.silent).toBe(0);
      // Transient 5xx/429s never switched structured output off.
      expect(r.switches).toBe(0);
      expect(r.jsonObjectCalls).toBe(0);
    });
  },
);
