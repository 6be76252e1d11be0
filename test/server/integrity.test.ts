/**
 * Canaries and quarantine against the scripted fake: four (or two) replicas, each its own fake server on
 * loopback, one app in front. A replica switched to always `match` (valid JSON) is quarantined within the
 * documented delay, then receives canaries only, and comes back when fixed; healthy replicas stay in over a
 * long run; canaries never reach a trainer's answer or the reward metrics.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, beforeAll, afterAll, describe, expect, it } from 'vitest';

import { createFileTranscriptSink } from '../../src/server/observe/transcripts.js';
import { counterValue } from './helpers.js';
import {
  CANARY_MARK,
  driveUntil,
  realGroup,
  replicaOf,
  settle,
  startFleet,
  writeCanaries,
  type Fleet,
  type Json,
} from './integrity-fleet.js';

/** docs/integrity.md: canaries on the bad replica until quarantine, reference at the error floor (h = 10). */
const DOCUMENTED_DELAY_CANARIES = 40;
/** docs/integrity.md: canaries on a fixed replica until release at the floor reference: ⌈10 / ln(0.95/0.75)⌉. */
const DOCUMENTED_RELEASE_CANARIES = 43;

let dir: string;
const fleets: Fleet[] = [];
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'integrity-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));
afterEach(async () => {
  for (const f of fleets.splice(0)) await f.close();
});

async function fleet(options: Parameters<typeof startFleet>[0]): Promise<Fleet> {
  const f = await startFleet(options);
  fleets.push(f);
  return f;
}

const callsOf = (f: Fleet): number[] => f.fakes.map((fake) => fake.callCount);
const isCanaryCall = (body: Json): boolean =>
  (body.messages ?? []).some((m: Json) => typeof m.content === 'string' && m.content.includes(CANARY_MARK));

describe('canary quarantine on four replicas', () => {
  // 7 s on an idle machine; past 30 s once in the unit run at load 6 on 2 shared cores: 60 s allowed.
  it('quarantines an always-match replica within the documented delay, routes it canaries only, releases it when fixed', async () => {
    const path = join(dir, 'quarantine-transcripts.jsonl');
    const transcripts = await createFileTranscriptSink(path);
    const f = await fleet({
      replicas: 4,
      // Round robin: every group gives each replica real work, so the bad one has produced some since its
      // last good canary however soon the canaries raised on it in doubt quarantine it (with affinity a
      // quarantine within a few groups could find it had none: suspect 0).
      env: {
        CANARY_DATASET: writeCanaries(dir, 20),
        CANARY_RATE: '0.15',
        JUDGE_REPLICA_POLICY: 'round_robin',
      },
      transcripts,
    });
    const [bad] = f.fakes;
    // Warm-up: every replica earns a clean record.
    await driveUntil(f.app, (r) => r.canaries.replicas.every((x: Json) => x.canaries >= 10), 2000);
    let report = await settle(f.app);
    expect(report.canaries.replicas).toHaveLength(4);
    expect(report.canaries.replicas.every((x: Json) => x.state === 'ok' && x.wrong === 0)).toBe(true);
    const before = replicaOf(report, bad!).canaries;

    // Switched mid-run to `match` on everything, with valid JSON.
    f.modes[0] = 'match';
    await driveUntil(f.app, (r) => replicaOf(r, bad!).state === 'quarantined', 4000);
    report = await settle(f.app);
    const bad0 = replicaOf(report, bad!);
    expect(bad0.state).toBe('quarantined');
    expect(bad0.canaries - before).toBeLessThanOrEqual(DOCUMENTED_DELAY_CANARIES);
    expect(bad0.accuracy_ci95[1]).toBeLessThan(1);
    expect(report.canaries.fleet_alert).toBe(false);
    expect(report.canaries.replicas.filter((x: Json) => x.state === 'quarantined')).toHaveLength(1);
    const gauge = await f.metrics.registry.getSingleMetric('reward_backend_replica_quarantined')?.get();
    expect(gauge?.values.filter((v) => v.value === 1)).toHaveLength(1);
    const warning = f.log.find((l) => String(l['msg']).includes('quarantining replica'));
    expect(warning).toMatchObject({
      replica: bad0.replica,
      cusum: expect.any(Number),
      accuracy_ci95: expect.any(Array),
    });
    // Per member on that replica: TPR stays 1, TNR drops (it calls the no_match canaries match).
    const member = report.canaries.members.find((m: Json) => m.replica === bad0.replica);
    expect(member).toMatchObject({ node: 'judge', role: 'judge', tpr: { rate: 1 } });
    expect(member.tnr.rate).toBeLessThan(1);
    expect(member.tnr.ci95[0]).toBeLessThan(member.tnr.rate);
    // Real judgments it produced since its last good canary are suspect: counted, and named in one
    // transcript line whose ids are judgments that replica answered.
    const suspect = await counterValue(f.metrics.integrity.suspectJudgments);
    expect(suspect).toBeGreaterThan(0);
    await transcripts.flush();
    const lines = readFileSync(path, 'utf8')
      .trim()
      .split('\n')
      .map((l): Json => JSON.parse(l));
    const flagged = lines.filter((l) => l.kind === 'suspect');
    expect(flagged).toHaveLength(1);
    expect(flagged[0]).toMatchObject({ replica: bad0.replica, count: suspect });
    const byId = new Map(lines.filter((l) => l.judgment_id !== undefined).map((l) => [l.judgment_id, l]));
    for (const id of flagged[0].judgment_ids) {
      expect(byId.get(id)?.transcript.some((m: Json) => m.replica === bad0.replica)).toBe(true);
    }

    // Quarantined: canaries only, at most 5 % of all calls.
    for (const fake of f.fakes) fake.resetStats();
    const start = callsOf(f);
    await driveUntil(f.app, () => false, 480);
    const calls = callsOf(f).map((n, i) => n - (start[i] ?? 0));
    const total = calls.reduce((a, b) => a + b, 0);
    expect(calls[0]).toBeGreaterThan(0);
    expect(calls[0]! / total).toBeLessThanOrEqual(0.05);
    expect(bad!.calls.every((c) => isCanaryCall(c.body))).toBe(true);

    // Fixed: its canaries pass again and it is back in routing.
    f.modes[0] = 'healthy';
    const atFix = replicaOf(await settle(f.app), bad!).canaries;
    await driveUntil(f.app, (r) => replicaOf(r, bad!).state === 'ok', 6000);
    report = await settle(f.app);
    expect(replicaOf(report, bad!).state).toBe('ok');
    expect(replicaOf(report, bad!).canaries - atFix).toBeLessThanOrEqual(DOCUMENTED_RELEASE_CANARIES + 4);
    expect(f.log.some((l) => String(l['msg']).includes('back in routing'))).toBe(true);
    bad!.resetStats();
    await driveUntil(f.app, () => false, 320);
    expect(bad!.calls.some((c) => !isCanaryCall(c.body))).toBe(true);
    await transcripts.close();
  }, 60_000);

  it('keeps four healthy replicas (one canary row in ten answered wrong by all) in routing over 3 200 judgments', async () => {
    // 21 rows, every 10th hard: each replica errs on 2 rows of 21 (9.5 %), as a real judge would.
    const f = await fleet({
      replicas: 4,
      mode: 'flaky',
      env: { CANARY_DATASET: writeCanaries(dir, 21, 10), CANARY_RATE: '0.25' },
    });
    const sent = await driveUntil(f.app, () => false, 3200, 32);
    const report = await settle(f.app);
    expect(sent).toBe(3200);
    expect(report.canaries.applied).toBeGreaterThan(750);
    for (const r of report.canaries.replicas) {
      expect(r.wrong).toBeGreaterThan(0);
      expect(r.state).not.toBe('quarantined');
    }
    expect(report.canaries.fleet_alert).toBe(false);
    expect(f.log.filter((l) => String(l['msg']).includes('quarantining'))).toEqual([]);
    // ~4 000 judgments of CPU (3 s on an idle machine): past 30 s at load 12 beside 3 other unit workers.
  }, 60_000);

  it('a whole-fleet drop raises the fleet alert and quarantines nothing', async () => {
    // The fleet reference: the first 20 pooled canaries, frozen (CANARY_REFERENCE_SIZE), so the drop is
    // measured soon.
    const f = await fleet({
      replicas: 2,
      env: {
        CANARY_DATASET: writeCanaries(dir, 20),
        CANARY_RATE: '0.5',
        CANARY_WINDOW: '10',
        CANARY_REFERENCE_SIZE: '20',
      },
    });
    await driveUntil(
      f.app,
      (r) => r.canaries.fleet.reference.source === 'frozen' && r.canaries.fleet.state === 'ok',
      2000,
    );
    f.modes[0] = 'match';
    f.modes[1] = 'match';
    await driveUntil(f.app, (r) => r.canaries.fleet_alert === true, 3000);
    const report = await settle(f.app);
    expect(report.canaries.fleet_alert).toBe(true);
    expect(report.canaries.fleet).toMatchObject({
      state: 'alarmed',
      reference: { source: 'frozen', canaries: 20, accuracy: 1 },
    });
    expect(report.canaries.fleet.accuracy).toBeLessThan(0.8);
    expect(report.canaries.replicas.some((x: Json) => x.state === 'quarantined')).toBe(false);
    const alert = await f.metrics.registry.getSingleMetric('reward_canary_fleet_alert')?.get();
    expect(alert?.values[0]?.value).toBe(1);
    expect(f.log.some((l) => String(l['msg']).includes('pooled canary accuracy of the whole fleet'))).toBe(
      true,
    );
    // Still serving on both.
    const res = await f.app.inject({ method: 'POST', url: '/v1/reward', payload: realGroup(8) });
    expect(res.json<Json>().results.every((r: Json) => r.status === 'ok')).toBe(true);
  }, 30_000);

  it('counts canaries on a failing replica as failed, not as evidence against it', async () => {
    const f = await fleet({
      replicas: 2,
      env: { CANARY_DATASET: writeCanaries(dir, 20), CANARY_RATE: '0.5' },
    });
    f.modes[1] = 'down';
    await driveUntil(f.app, (r) => replicaOf(r, f.fakes[1]!).errors >= 10, 2000);
    const report = await settle(f.app);
    const down = replicaOf(report, f.fakes[1]!);
    expect(down.errors).toBeGreaterThanOrEqual(10);
    expect(down.wrong).toBe(0);
    expect(down.state).toBe('ok');
    expect(
      await counterValue(f.metrics.integrity.canaryJudgments, { replica: down.replica, outcome: 'failed' }),
    ).toBe(down.errors);
  }, 15_000);
});

describe('canaries with a routing file', () => {
  it('pin one replica per backend and take every combination in turn: each replica of each backend is measured', async () => {
    const f = await fleet({
      replicas: 4,
      env: (fakes) => {
        const file = join(dir, 'routing.json');
        writeFileSync(
          file,
          JSON.stringify({
            backends: {
              second: {
                base_urls: [fakes[2]!.baseURL, fakes[3]!.baseURL],
                model: 'fake-model',
                max_retries: 0,
              },
            },
            roles: { evaluator: { backend: 'second' } },
          }),
        );
        return {
          JUDGE_BASE_URL: `${fakes[0]!.baseURL},${fakes[1]!.baseURL}`,
          REWARD_CONFIG: file,
          DEFAULT_GRAPH: 'analysts-2',
          CANARY_DATASET: writeCanaries(dir, 20),
          CANARY_RATE: '1',
        };
      },
    });
    await f.app.inject({ method: 'POST', url: '/v1/reward', payload: realGroup(4) });
    const report = await settle(f.app);
    expect(report.canaries.applied).toBe(4);
    // 2 backends × 2 replicas; 4 canaries = the 4 combinations, so each replica is in exactly 2.
    const counts = report.canaries.replicas.map((r: Json) => [r.backend, r.canaries]);
    expect(counts.sort()).toEqual([
      ['default', 2],
      ['default', 2],
      ['second', 2],
      ['second', 2],
    ]);
    // The two analysts of a canary ran on its default replica, its evaluator on its `second` replica.
    const canaryCalls = f.fakes.map((fake) => fake.calls.filter((c) => isCanaryCall(c.body)).length);
    expect(canaryCalls).toEqual([4, 4, 2, 2]);
    const evaluators = report.canaries.members.filter((m: Json) => m.role === 'evaluator');
    expect(evaluators.every((m: Json) => m.backend === 'second')).toBe(true);
    expect(evaluators.reduce((n: number, m: Json) => n + m.canaries, 0)).toBe(4);
  });
});

describe('canaries stay out of the rewards', () => {
  it('never appear in a trainer answer, reward_judgments_total, reward_recent_mean or the transcripts of real items', async () => {
    const path = join(dir, 'transcripts.jsonl');
    const transcripts = await createFileTranscriptSink(path);
    const f = await fleet({
      replicas: 2,
      env: { CANARY_DATASET: writeCanaries(dir, 20), CANARY_RATE: '1' },
      transcripts,
    });
    const answers: Json[] = [];
    for (let i = 0; i < 8; i++) {
      const res = await f.app.inject({ method: 'POST', url: '/v1/reward', payload: realGroup(8) });
      answers.push(res.json<Json>());
    }
    const report = await settle(f.app);
    await transcripts.close();
    // Canaries ran (one per real judgment) and half of them are `match`...
    expect(report.canaries.applied).toBe(64);
    expect(await counterValue(f.metrics.integrity.canaryJudgments, { outcome: 'correct' })).toBe(64);
    // ...yet every answer holds exactly its own 8 no_match judgments,
    for (const a of answers) {
      expect(a.rewards).toEqual([0, 0, 0, 0, 0, 0, 0, 0]);
      expect(a.results).toHaveLength(8);
    }
    // the reward metrics count the 64 real judgments only, and the recent mean stays 0.
    expect(await counterValue(f.metrics.judgments)).toBe(64);
    expect(await counterValue(f.metrics.judgments, { verdict: 'match' })).toBe(0);
    const mean = await f.metrics.recentMean.get();
    expect(mean.values.map((v) => v.value)).toEqual([0]);
    const lines = readFileSync(path, 'utf8')
      .trim()
      .split('\n')
      .map((l): Json => JSON.parse(l));
    expect(lines).toHaveLength(64);
    expect(lines.some((l) => JSON.stringify(l).includes(CANARY_MARK))).toBe(false);
    // The calls did happen: one per canary on top of one per real judgment.
    expect(f.fakes.reduce((n, fake) => n + fake.callCount, 0)).toBe(128);
  });
});
