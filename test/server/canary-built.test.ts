/**
 * Canaries in the built server (`node dist/server/main.js`, as the Docker image runs it): JUDGE_BASE_URL lists
 * two fake replicas, CANARY_DATASET is a small labelled JSONL in a temp dir, CANARY_RATE high. Real traffic
 * makes canaries on both replicas (`/v1/integrity`, `reward_canary_judgments_total`), and none of them shows
 * in the trainer's answers, `reward_judgments_total` or `reward_recent_mean`. A malformed CANARY_DATASET
 * (missing file, a row without a label, one label only) stops the server at start-up naming the variable.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';

import { afterEach, beforeAll, describe, expect, it } from 'vitest';

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
