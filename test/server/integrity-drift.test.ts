/**
 * Judges that drift while they stay well-formed, live: four fake replicas on loopback (real HTTP) behind one
 * app, each a drifting judge whose per-call error the test raises at run time (`test/fakes/drifting.ts`),
 * the scenarios of bench/canary-cusum.ts at scaled sizes (CANARY_RATE 0.25, windows of 20, a frozen
 * reference of 40 canaries, drops of 0.4–0.5 so each runs in a few hundred judgments):
 *
 * - one replica ramping slowly, fast, or stepping down: quarantined; while it is in doubt the canary rate
 *   is at its ceiling (CANARY_BOOST × CANARY_RATE) and its share above a quarter, the extra calls are in
 *   `reward_llm_calls_total` and in `/v1/plan`; back to CANARY_RATE once it is quarantined;
 * - the whole fleet dropping early (a CANARY_REFERENCE file) or late (the frozen reference): the fleet
 *   alert, `GET /v1/integrity` showing the reference and the fleet statistic, serving on;
 * - one replica wrong only on long candidates (a quarter of the canary rows are long): quarantined.
 *
 * Each scenario is one run (the fakes' errors are seeded); a bound is about three times the delay measured
 * (one run on 2 cores: 160, 112, 128 and 272 judgments after the crossing for the four replica scenarios).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { servingJudge } from '../../src/server/integrity/fleet-reference.js';
import { getPreset } from '../../src/judge/presets.js';
import { counterValue } from './helpers.js';
import {
  integrity,
  realGroup,
  settle,
  startFleet,
  writeCanaries,
  type Fleet,
  type Json,
} from './integrity-fleet.js';

const RATE = 0.25;
const BASE_ENV = {
  CANARY_RATE: String(RATE),
  CANARY_WINDOW: '20',
  CANARY_REFERENCE_SIZE: '40',
  CANARY_MAX_INFLIGHT: '8',
};

let dir: string;
const fleets: Fleet[] = [];
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'integrity-drift-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));
afterEach(async () => {
  for (const f of fleets.splice(0)) await f.close();
});

async function driftingFleet(env: Record<string, string> = {}, longEvery = 0): Promise<Fleet> {
  const f = await startFleet({
    replicas: 4,
    mode: 'drift',
    env: { CANARY_DATASET: writeCanaries(dir, 20, 0, longEvery), ...BASE_ENV, ...env },
  });
  fleets.push(f);
  return f;
}

interface Observed {
  judgments: number;
  maxRate: number;
  maxShare: number;
  planCanaryCalls: number;
}

/**
 * Sends groups of 16 real judgments, calling `step(judgments)` before each (it moves the drift), until
 * `stop(report)` or `max` judgments; records the highest canary rate and replica 0's highest share seen.
 */
async function run(
  f: Fleet,
  step: (judgments: number) => void,
  stop: (report: Json) => boolean,
  max: number,
): Promise<Observed> {
  const seen: Observed = { judgments: 0, maxRate: 0, maxShare: 0, planCanaryCalls: 0 };
  const r0 = f.fakes[0]!.baseURL;
  while (seen.judgments < max) {
    step(seen.judgments);
    const res = await f.app.inject({ method: 'POST', url: '/v1/reward', payload: realGroup(16) });
    if (res.statusCode !== 200) throw new Error(`reward answered ${res.statusCode}: ${res.body}`);
    seen.judgments += 16;
    const report = await settle(f.app);
    const c = report.canaries;
    if (c.effective_rate > seen.maxRate) {
      seen.maxRate = c.effective_rate;
      const plan = await f.app.inject({
        method: 'POST',
        url: '/v1/plan',
        payload: { rollouts: 1000, group_size: 16 },
      });
      seen.planCanaryCalls = plan.json<Json>().canary_calls;
    }
    const share = c.replicas.find((x: Json) => r0.includes(x.replica))?.canary_share ?? 0;
    seen.maxShare = Math.max(seen.maxShare, share);
    if (stop(report)) return seen;
  }
  return seen;
}

const stateOf = (report: Json, f: Fleet, i: number): string =>
  report.canaries.replicas.find((x: Json) => f.fakes[i]!.baseURL.includes(x.replica))?.state;

/** Until the frozen reference is in place and every replica has a clean record. */
async function warmUp(f: Fleet): Promise<void> {
  await run(
    f,
    () => undefined,
    (r) => r.canaries.fleet.state === 'ok' && r.canaries.replicas.every((x: Json) => x.canaries >= 10),
    2000,
  );
}

async function expectOneReplicaDetected(
  f: Fleet,
  ramp: (sinceStart: number) => number,
  crossAt: number,
  withinJudgments: number,
): Promise<void> {
  await warmUp(f);
  let start = -1;
  const seen = await run(
    f,
    (n) => {
      if (start < 0) start = n;
      f.drift[0]!.error = ramp(n - start);
    },
    (r) => stateOf(r, f, 0) === 'quarantined',
    4000,
  );
  const report = await settle(f.app);
  expect(stateOf(report, f, 0)).toBe('quarantined');
  expect(seen.judgments - start - crossAt).toBeLessThanOrEqual(withinJudgments);
  expect(report.canaries.replicas.filter((x: Json) => x.state === 'quarantined')).toHaveLength(1);
  // While it was in doubt: the rate at its ceiling, its share above its turn's quarter, the plan counting it.
  expect(seen.maxRate).toBeCloseTo(RATE * 3, 6);
  expect(seen.maxShare).toBeGreaterThan(0.25);
  expect(seen.planCanaryCalls).toBe(1000 * RATE * 3);
  expect(report.canaries.targeted).toBeGreaterThan(0);
  // Every canary call is a real call in reward_llm_calls_total (single-judge: one call per judgment).
  const calls = await f.metrics.registry.getSingleMetric('reward_llm_calls_total')?.get();
  const counted = (calls?.values ?? []).reduce((n, v) => n + v.value, 0);
  expect(counted).toBe(f.fakes.reduce((n, fake) => n + fake.callCount, 0));
  const judgments = await counterValue(f.metrics.judgments);
  expect(counted).toBe(judgments + report.canaries.launched);
  expect(report.canaries.launched).toBeGreaterThan(Math.floor(judgments * RATE));
}

describe('one replica drifting', () => {
  it('a slow ramp (+0.1 every 64 judgments to 0.55): quarantined, the canaries raised on it while in doubt', async () => {
    const f = await driftingFleet();
    // 0.2 below the fleet from the second step on (judgment 64 of the ramp).
    await expectOneReplicaDetected(f, (n) => Math.min(0.55, 0.1 * (1 + Math.floor(n / 64))), 64, 600);
    // Quarantined: no doubt left, the rate back at CANARY_RATE.
    await run(
      f,
      () => undefined,
      () => true,
      16,
    );
    const after = await integrity(f.app);
    expect(after.canaries.effective_rate).toBe(RATE);
  }, 60_000);

  it('a fast ramp (+0.25 every 16 judgments to 0.5): quarantined', async () => {
    const f = await driftingFleet();
    await expectOneReplicaDetected(f, (n) => Math.min(0.5, 0.25 * (1 + Math.floor(n / 16))), 0, 500);
  }, 60_000);

  it('a step to 0.5 wrong: quarantined', async () => {
    const f = await driftingFleet();
    await expectOneReplicaDetected(f, () => 0.5, 0, 500);
  }, 60_000);

  it('wrong only on long candidates (a quarter of the canary rows): quarantined', async () => {
    const f = await driftingFleet({}, 4);
    f.drift[0]!.longOnly = 'LONGROW';
    await expectOneReplicaDetected(f, () => 1, 0, 900);
  }, 60_000);
});

describe('the whole fleet drifting', () => {
  /** Drops every replica to `error` and drives until the fleet alert; returns the report. */
  async function dropAll(f: Fleet, error: number, maxJudgments: number): Promise<Json> {
    for (const d of f.drift) d.error = error;
    await run(
      f,
      () => undefined,
      (r) => r.canaries.fleet_alert === true,
      maxJudgments,
    );
    const report = await settle(f.app);
    expect(report.canaries.fleet_alert).toBe(true);
    expect(report.canaries.fleet.state).toBe('alarmed');
    expect(report.canaries.fleet.accuracy).toBeLessThan(0.8);
    // Never more than one replica taken out for it (the ledger's leave-one-out test holds the rest).
    expect(
      report.canaries.replicas.filter((x: Json) => x.state === 'quarantined').length,
    ).toBeLessThanOrEqual(1);
    const gauge = await f.metrics.registry.getSingleMetric('reward_canary_fleet_cusum')?.get();
    expect(gauge?.values[0]?.value).toBeGreaterThanOrEqual(Number(f.config.integrity.fleet.threshold));
    const res = await f.app.inject({ method: 'POST', url: '/v1/reward', payload: realGroup(8) });
    expect(res.json<Json>().results.every((r: Json) => r.status === 'ok')).toBe(true);
    return report;
  }

  it('early, against a CANARY_REFERENCE file: alerts before any frozen reference could exist', async () => {
    const f0 = await driftingFleet();
    // The reference ablate would write for this judge: right on all 20 canary rows offline.
    const ref = join(dir, 'reference.json');
    const graph = getPreset('single-judge')!;
    writeFileSync(
      ref,
      JSON.stringify({
        kind: 'canary-reference',
        version: 1,
        judge: servingJudge(graph, f0.router),
        rows: Array.from({ length: 20 }, (_, i) => ({
          id: `canary:${i}`,
          label: i % 2 === 0 ? 'match' : 'no_match',
          verdict: i % 2 === 0 ? 'match' : 'no_match',
          correct: true,
        })),
        overall: { n: 20, correct: 20 },
      }),
    );
    const f = await driftingFleet({ CANARY_REFERENCE: ref });
    // With a reference from the start there is nothing to warn about.
    expect(f.log.filter((l) => String(l['msg']).includes('no CANARY_REFERENCE'))).toEqual([]);
    const first = await integrity(f.app);
    expect(first.canaries.fleet).toMatchObject({
      state: 'ok',
      reference: { source: 'file', path: ref, per_row: true, canaries: 20, accuracy: 1 },
      threshold: 9,
    });
    expect(first.canaries.fleet.reference.accuracy_ci95[0]).toBeCloseTo(0.8316, 3);
    const report = await dropAll(f, 0.45, 1200);
    // It alerted within the first canaries of the run, long before 40 could have been frozen.
    expect(report.canaries.fleet.canaries).toBeLessThan(f.config.integrity.fleet.referenceSize);
  }, 60_000);

  it('late, against the frozen first canaries: alerts', async () => {
    const f = await driftingFleet();
    // Without a file, one start-up line says how long the run goes without a fleet reference.
    const notes = f.log.filter((l) => String(l['msg']).includes('no CANARY_REFERENCE'));
    expect(notes).toHaveLength(1);
    expect(notes[0]).toMatchObject({ reference_size: 40, judgments: 160 });
    await warmUp(f);
    const frozen = (await integrity(f.app)).canaries.fleet.reference;
    expect(frozen).toMatchObject({ source: 'frozen', canaries: 40, accuracy: 1 });
    await dropAll(f, 0.45, 2000);
  }, 60_000);
});
