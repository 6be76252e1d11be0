/**
 * Canaries in the built server (`node dist/server/main.js`, as the Docker image runs it): JUDGE_BASE_URL lists
 * two fake replicas, CANARY_DATASET is a small labelled JSONL in a temp dir, CANARY_RATE high. Real traffic
 * makes canaries on both replicas (`/v1/integrity`, `reward_canary_judgments_total`), and none of them shows
 * in the trainer's answers, `reward_judgments_total` or `reward_recent_mean`. A malformed CANARY_DATASET
 * (missing file, a row without a label, one label only) stops the server at start-up naming the variable.
 * Judges drifting while they stay well-formed (four drifting fakes, `test/fakes/drifting.ts`, their error
 * raised at run time): a slow ramp on one replica quarantines it, the canaries raised on it meanwhile; then
 * the whole fleet dropping raises the fleet alert while serving goes on (the scenarios of
 * bench/canary-cusum.ts at the scaled sizes of `integrity-drift.test.ts`, where each runs behind the app).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';

import { afterEach, beforeAll, describe, expect, it } from 'vitest';

import { createDriftingJudge } from '../fakes/drifting.js';
import { startFakeOpenAI, universalReply, type FakeChatRequest, type FakeOpenAI } from '../fakes/openai.js';
import { startBuiltServer, type BuiltServer } from '../support/built-server.js';
import { ensureDist } from '../support/dist.js';
import { useTempDirs } from '../support/temp-dirs.js';
import { GOOD } from './helpers.js';
import { CANARY_MARK, realGroup, writeCanaries, type Json } from './integrity-fleet.js';

const tempDir = useTempDirs('canary-built-');
const servers: BuiltServer[] = [];
const fakes: FakeOpenAI[] = [];

beforeAll(() => {
  ensureDist();
}, 180_000);

afterEach(async () => {
  for (const s of servers.splice(0)) {
    if (s.child.exitCode === null && s.child.pid !== undefined) process.kill(s.child.pid, 'SIGKILL');
    await s.exit;
  }
  for (const f of fakes.splice(0)) await f.close();
});

/** A healthy judge: `match` exactly when the prompt has the GOOD marker (right on every canary). */
function healthy(body: FakeChatRequest) {
  const user = body.messages?.find((m) => m.role === 'user')?.content ?? '';
  return { kind: 'json' as const, body: universalReply(user.includes(GOOD) ? 'match' : 'no_match', 0.9) };
}

const isCanaryCall = (body: FakeChatRequest): boolean =>
  (body.messages ?? []).some((m) => typeof m.content === 'string' && m.content.includes(CANARY_MARK));

/** The value of every sample of `name` in an exposition text, by its label text. */
function samples(text: string, name: string): Map<string, number> {
  const found = new Map<string, number>();
  for (const m of text.matchAll(new RegExp(`^${name}(\\{[^}]*\\})? (\\S+)$`, 'gm'))) {
    found.set(m[1] ?? '', Number(m[2]));
  }
  return found;
}

const baseEnv = (replicas: readonly FakeOpenAI[]): Record<string, string> => ({
  JUDGE_BASE_URL: replicas.map((f) => f.baseURL).join(','),
  JUDGE_MODEL: 'fake-model',
  JUDGE_API_KEY: 'test',
  JUDGE_MAX_RETRIES: '0',
  JUDGE_TIMEOUT_MS: '5000',
  DEFAULT_GRAPH: 'single-judge',
});

describe('canaries in the built server', () => {
  it('runs canaries on both replicas and keeps them out of the answers and the reward metrics', async () => {
    for (let i = 0; i < 2; i++) fakes.push(await startFakeOpenAI({ fallback: healthy }));
    const dir = await tempDir();
    const server = await startBuiltServer({
      ...baseEnv(fakes),
      CANARY_DATASET: writeCanaries(dir, 8),
      CANARY_RATE: '0.5',
    });
    servers.push(server);

    // Real traffic: 3 groups of 8 fresh candidates, every one `no_match` (reward 0), while half the canary
    // rows are `match` (reward 1): a canary that leaked into an answer or the metrics would show.
    const groups = 3;
    const size = 8;
    for (let g = 0; g < groups; g++) {
      const res = await fetch(`${server.url}/v1/reward`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(realGroup(size)),
        signal: AbortSignal.timeout(5_000),
      });
      const text = await res.text();
      expect(res.status, text).toBe(200);
      const body: Json = JSON.parse(text);
      expect(body.rewards).toEqual(Array.from({ length: size }, () => 0));
      expect(text).not.toContain(CANARY_MARK);
      expect(text).not.toContain('canary:');
    }

    // The canaries run in the background: wait (bounded) until every one launched is in the record and
    // both replicas have some.
    let report: Json;
    for (let i = 0; ; i++) {
      report = await (
        await fetch(`${server.url}/v1/integrity`, { signal: AbortSignal.timeout(5_000) })
      ).json();
      const c = report.canaries;
      const settled = c.launched > 0 && c.applied >= c.launched && c.owed === 0;
      if (settled && c.replicas.length === 2 && c.replicas.every((r: Json) => r.canaries >= 2)) break;
      if (i >= 100) throw new Error(`canaries did not settle: ${JSON.stringify(c)}`);
      await delay(50);
    }
    const canaries = report.canaries;
    expect(canaries).toMatchObject({
      enabled: true,
      rate: 0.5,
      rows: 8,
      graph: 'single-judge',
      fleet_alert: false,
    });
    // One canary per two computed real judgments (a deterministic counter), nothing skipped.
    expect(canaries.launched).toBe((groups * size) / 2);
    expect(canaries.skipped).toBe(0);
    for (const fake of fakes) {
      const r = canaries.replicas.find((x: Json) => fake.baseURL.includes(x.replica));
      expect(r, fake.baseURL).toMatchObject({ backend: 'default', state: 'ok', wrong: 0, errors: 0 });
      expect(r.correct).toBe(r.canaries);
      // Every call a canary made to this replica reached it (single-judge: one call per canary).
      expect(fake.calls.filter((c) => isCanaryCall(c.body))).toHaveLength(r.canaries);
    }
    expect(canaries.replicas.reduce((n: number, r: Json) => n + r.canaries, 0)).toBe(canaries.launched);

    const metrics = await (
      await fetch(`${server.url}/metrics`, { signal: AbortSignal.timeout(5_000) })
    ).text();
    const outcomes = samples(metrics, 'reward_canary_judgments_total');
    for (const r of canaries.replicas) {
      expect(
        outcomes.get(`{backend="default",replica="${r.replica}",outcome="correct"}`),
        `${r.replica} in ${[...outcomes.keys()].join(' ')}`,
      ).toBe(r.canaries);
    }
    // Real judgments only: 24, all no_match; the 12 canaries (6 of them match) are not counted.
    const judgments = samples(metrics, 'reward_judgments_total');
    expect([...judgments.values()].reduce((a, b) => a + b, 0)).toBe(groups * size);
    expect([...judgments.keys()].filter((k) => k.includes('verdict="match"'))).toEqual([]);
    expect([...samples(metrics, 'reward_recent_mean').values()]).toEqual([0]);
  });

  it('refuses to start on a malformed CANARY_DATASET, naming the variable', async () => {
    fakes.push(await startFakeOpenAI({ fallback: healthy }));
    const dir = await tempDir();
    const good = writeCanaries(dir, 4);
    const rows = readFileSync(good, 'utf8').trim().split('\n');
    const noLabel = join(dir, 'no-label.jsonl');
    const withoutLabel = JSON.parse(rows[1]!) as Record<string, unknown>;
    delete withoutLabel['label'];
    delete withoutLabel['kind'];
    writeFileSync(noLabel, `${rows[0]}\n${JSON.stringify(withoutLabel)}\n${rows[2]}\n`);
    const oneLabel = join(dir, 'one-label.jsonl');
    writeFileSync(oneLabel, `${rows[0]}\n${rows[2]}\n`); // rows 0 and 2 are both label 1
    const cases: Array<[string, RegExp]> = [
      [join(dir, 'missing.jsonl'), /CANARY_DATASET[\s\S]*ENOENT/],
      [noLabel, /CANARY_DATASET[\s\S]*no-label\.jsonl:2: field \\?"label\\?"/],
      [oneLabel, /CANARY_DATASET[\s\S]*one-label\.jsonl: needs rows of both labels/],
    ];
    const started = await Promise.allSettled(
      cases.map(([path]) =>
        startBuiltServer({ ...baseEnv(fakes), CANARY_DATASET: path, CANARY_RATE: '0.5' }),
      ),
    );
    for (const [i, result] of started.entries()) {
      if (result.status === 'fulfilled') {
        servers.push(result.value);
        throw new Error(`started with CANARY_DATASET=${cases[i]![0]}`);
      }
      expect(String(result.reason)).toMatch(/server exited \(1\) before listening/);
      expect(String(result.reason)).toMatch(cases[i]![1]);
    }
    // The well-formed set starts (the cases above fail for their defect, not for the rest of the env).
    const server = await startBuiltServer({ ...baseEnv(fakes), CANARY_DATASET: good, CANARY_RATE: '0.5' });
    servers.push(server);
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  });
});

describe('judges drifting in the built server', () => {
  it('quarantines a replica ramping down (canaries raised on it), then alerts on a whole-fleet drop', async () => {
    const judges = Array.from({ length: 4 }, (_, i) => createDriftingJudge({ good: GOOD, seed: 2000 + i }));
    for (const j of judges) fakes.push(await startFakeOpenAI({ fallback: (body) => j.reply(body) }));
    const dir = await tempDir();
    const server = await startBuiltServer({
      ...baseEnv(fakes),
      CANARY_DATASET: writeCanaries(dir, 20),
      CANARY_RATE: '0.25',
      CANARY_WINDOW: '20',
      CANARY_REFERENCE_SIZE: '40',
      CANARY_MAX_INFLIGHT: '8',
    });
    servers.push(server);
    const get = async (path: string): Promise<Response> =>
      fetch(`${server.url}${path}`, { signal: AbortSignal.timeout(5_000) });
    /** The report once every canary launched is applied (bounded). */
    const settled = async (): Promise<Json> => {
      for (let i = 0; i < 1000; i++) {
        const report: Json = await (await get('/v1/integrity')).json();
        if (report.canaries.applied >= report.canaries.launched && report.canaries.owed === 0) return report;
        await delay(5);
      }
      throw new Error('canaries did not settle');
    };
    const seen = { judgments: 0, maxRate: 0, maxShare: 0 };
    const stateOf = (report: Json, i: number): Json =>
      report.canaries.replicas.find((x: Json) => fakes[i]!.baseURL.includes(x.replica));
    /** Groups of 16 real judgments, `step(sent)` before each, until `stop(report)` (bounded by `max`). */
    const drive = async (step: (sent: number) => void, stop: (r: Json) => boolean, max: number) => {
      for (let sent = 0; sent < max; sent += 16) {
        step(sent);
        const res = await fetch(`${server.url}/v1/reward`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(realGroup(16)),
          signal: AbortSignal.timeout(10_000),
        });
        expect(res.status).toBe(200);
        seen.judgments += 16;
        const report = await settled();
        seen.maxRate = Math.max(seen.maxRate, report.canaries.effective_rate);
        seen.maxShare = Math.max(seen.maxShare, stateOf(report, 0)?.canary_share ?? 0);
        if (stop(report)) return sent + 16;
      }
      throw new Error(`not reached in ${max} judgments: ${JSON.stringify((await settled()).canaries.fleet)}`);
    };

    // Warm-up: the first 40 pooled canaries frozen as the reference, every replica with a record.
    await drive(
      () => undefined,
      (r) => r.canaries.fleet.state === 'ok' && r.canaries.replicas.every((x: Json) => x.canaries >= 10),
      2000,
    );
    expect((await settled()).canaries.fleet.reference).toMatchObject({ source: 'frozen', canaries: 40 });
    seen.maxRate = 0;
    seen.maxShare = 0;

    // Replica 0 ramps: +0.1 every 64 judgments to 0.55 (0.2 below the fleet from judgment 64 on).
    const ramped = await drive(
      (n) => (judges[0]!.error = Math.min(0.55, 0.1 * (1 + Math.floor(n / 64)))),
      (r) => stateOf(r, 0)?.state === 'quarantined',
      4000,
    );
    expect(ramped - 64).toBeLessThanOrEqual(600);
    let report = await settled();
    expect(report.canaries.replicas.filter((x: Json) => x.state === 'quarantined')).toHaveLength(1);
    expect(seen.maxRate).toBeCloseTo(0.75, 6);
    expect(seen.maxShare).toBeGreaterThan(0.25);
    expect(report.canaries.targeted).toBeGreaterThan(0);
    const quarantined = samples(await (await get('/metrics')).text(), 'reward_backend_replica_quarantined');
    expect([...quarantined.values()].reduce((a, b) => a + b, 0)).toBe(1);

    // The whole fleet drops to 0.45 wrong at once: the pooled test alerts against the frozen reference.
    // Driven until the pooled test itself alarms: `fleet_alert` is raised by a replica's own alarm too, and
    // which comes first depends on how canaries interleave (with pytest beside it, a replica's came first).
    for (const j of judges) j.error = Math.max(j.error, 0.45);
    await drive(
      () => undefined,
      (r) => r.canaries.fleet.state === 'alarmed',
      2000,
    );
    report = await settled();
    expect(report.canaries.fleet_alert).toBe(true);
    expect(report.canaries.fleet).toMatchObject({ state: 'alarmed', threshold: 9 });
    // The pooled accuracy since the reference (the healthy stretch included) below it, the statistic past h.
    expect(report.canaries.fleet.accuracy).toBeLessThan(report.canaries.fleet.reference.accuracy);
    expect(report.canaries.fleet.cusum).toBeGreaterThanOrEqual(9);
    // Never more than half the replicas out for it; serving goes on.
    expect(
      report.canaries.replicas.filter((x: Json) => x.state === 'quarantined').length,
    ).toBeLessThanOrEqual(2);
    const metrics = await (await get('/metrics')).text();
    expect([...samples(metrics, 'reward_canary_fleet_alert').values()]).toEqual([1]);
    const res = await fetch(`${server.url}/v1/reward`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(realGroup(8)),
      signal: AbortSignal.timeout(10_000),
    });
    expect(res.status).toBe(200);
    const body: Json = await res.json();
    expect(body.results.every((r: Json) => r.status === 'ok')).toBe(true);
  }, 90_000);
});
