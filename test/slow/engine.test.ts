/**
 * Issue 29 "Must show": the default server against continuous-batching engines whose batch (S = 8, 32, 128)
 * is far below JUDGE_MAX_INFLIGHT (256). The engines (test/fakes/engine.ts) and the OpenRLHF-like client
 * (load-client.ts) run in their own processes; the timing is scaled (bench/engine.ts: a call is ~0.13–0.19 s
 * instead of ~1 s, and the deadline, the hold window and OpenRLHF's pause and timeout are scaled with it).
 *
 * - A burst that fits: every rollout gets its reward, the wall time is within 1.1 × the engine's own bound
 *   (its measured work at a full batch plus the graph's critical-path tail), and high-priority judgments
 *   sent during it take at most 2 × their unloaded time — the queue is ours, and their lane applies.
 * - A burst that does not fit its client's deadline: the part that does not fit is refused at once, and
 *   nothing admitted is lost.
 */
import { existsSync } from 'node:fs';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import {
  ENGINE_SPEC,
  rolloutsFor,
  runScenario,
  startEngines,
  startLoadClient,
  type Engines,
  type LoadClient,
} from '../../bench/engine.js';
import { DEFAULT_DATASET, loadCorpus, type Corpus } from '../../bench/data.js';

const SIZES = [8, 32, 128] as const;
/** Seconds of engine work at a full batch in the burst that fits. */
const FITS_S = 4;
/** The client's deadline in the burst that does not fit, and the work it carries. */
const CLIENT_DEADLINE_MS = 3_000;
const TOO_MUCH_S = 6;

describe.skipIf(!existsSync(DEFAULT_DATASET))('continuous-batching engines at default settings', () => {
  let engines: Engines;
  let client: LoadClient;
  let corpus: Corpus;
  let from = 0;
  beforeAll(async () => {
    corpus = loadCorpus();
    engines = await startEngines(SIZES.map(ENGINE_SPEC));
    client = startLoadClient();
  }, 60_000);
  afterAll(async () => {
    await client?.close();
    await engines?.close();
  });

  for (const [e, slots] of SIZES.entries()) {
    it(`S=${slots}: a burst that fits loses nothing, within 1.1 × the engine's bound, high priority ≤ 2 × unloaded`, async () => {
      const r = await runScenario(corpus, engines, client, {
        name: 'fits',
        engine: e,
        spec: ENGINE_SPEC(slots),
        rollouts: rolloutsFor(slots, FITS_S),
        from: (from += 1_000_000),
        policy: 'openrlhf',
        highProbes: 20,
      });
      console.log(`engine S=${slots} fits: ${JSON.stringify(r)}`);
      expect(r.lost).toBe(0);
      expect(r.refused).toBe(0);
      expect(r.ratio).toBeLessThanOrEqual(1.1);
      expect(r.highRatio).toBeLessThanOrEqual(2);
    }, 60_000);

    it(`S=${slots}: a burst that does not fit its client's deadline is refused early, and what is admitted is answered`, async () => {
      const r = await runScenario(corpus, engines, client, {
        name: 'too much',
        engine: e,
        spec: ENGINE_SPEC(slots),
        rollouts: rolloutsFor(slots, TOO_MUCH_S),
        from: (from += 1_000_000),
        policy: 'once',
        clientDeadlineMs: CLIENT_DEADLINE_MS,
        highProbes: 0,
        unloadedProbes: 1,
      });
      console.log(`engine S=${slots} too much: ${JSON.stringify(r)}`);
      expect(r.refused).toBeGreaterThan(0);
      expect(r.refused).toBeLessThan(r.rollouts);
      // Early: answered within half the deadline (the client's storm of requests is parsed meanwhile), not
      // after waiting towards it.
      expect(r.refusalMaxS).toBeLessThan((0.5 * CLIENT_DEADLINE_MS) / 1000);
      expect(r.admittedFailed).toBe(0);
    }, 60_000);
  }
});
