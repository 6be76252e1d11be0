/**
 * The canary record shared through Redis (a real redis-server on loopback): two server replicas in front of
 * the same four judge replicas; only A gets traffic (and so runs canaries), yet B applies every canary,
 * quarantines the same replica and stops routing real work to it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';

import { createRedisCanaryLog } from '../../src/state/canary-log.js';
import { describeRedis, startRedis, type RedisServer } from '../fakes/redis.js';
import { waitFor } from './helpers.js';
import {
  CANARY_MARK,
  driveUntil,
  integrity,
  realGroup,
  replicaOf,
  settle,
  startFleet,
  writeCanaries,
  type Fleet,
  type Json,
} from './integrity-fleet.js';

describeRedis('canary record shared through Redis', () => {
  let redis: RedisServer;
  let dir: string;
  const open: Fleet[] = [];
  beforeAll(async () => {
    redis = await startRedis();
    dir = mkdtempSync(join(tmpdir(), 'integrity-redis-'));
  });
  afterAll(async () => {
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  afterEach(async () => {
    for (const f of open.splice(0)) await f.close();
  });

  it('a replica quarantined by A’s canaries is quarantined on B too, and B routes it no real work', async () => {
    const env = { CANARY_DATASET: writeCanaries(dir, 20), CANARY_RATE: '0.15' };
    const log = () =>
      createRedisCanaryLog({ url: redis.url, prefix: 'shared1:', timeoutMs: 1000, pollMs: 20 });
    const a = await startFleet({ replicas: 4, env, canaryLog: log() });
    open.push(a);
    // B is another server replica in front of the same judges: same URLs, its own app, the same log.
    const b = await startFleet({
      replicas: 0,
      env: { ...env, JUDGE_BASE_URL: a.fakes.map((f) => f.baseURL).join(',') },
      canaryLog: log(),
    });
    open.push(b);
    await waitFor(async () => (await integrity(a.app)).canaries.shared === true, 'shared log');

    a.modes[0] = 'match';
    await driveUntil(a.app, (r) => replicaOf(r, a.fakes[0]!).state === 'quarantined', 4000);
    const fromA = await settle(a.app);
    await waitFor(
      async () => (await integrity(b.app)).canaries.applied === fromA.canaries.applied,
      'B applies A’s canaries',
    );
    const onB: Json = await integrity(b.app);
    expect(onB.canaries.launched).toBe(0);
    expect(replicaOf(onB, a.fakes[0]!).state).toBe('quarantined');
    expect(replicaOf(onB, a.fakes[0]!).canaries).toBe(replicaOf(fromA, a.fakes[0]!).canaries);
    const gauge = await b.metrics.registry.getSingleMetric('reward_backend_replica_quarantined')?.get();
    expect(gauge?.values.filter((v) => v.value === 1)).toHaveLength(1);

    // Real work on B avoids the quarantined replica (B's own canaries may still visit it).
    a.fakes[0]!.resetStats();
    for (let i = 0; i < 10; i++) {
      const res = await b.app.inject({ method: 'POST', url: '/v1/reward', payload: realGroup(16) });
      expect(res.statusCode).toBe(200);
    }
    await settle(b.app);
    expect(
      a.fakes[0]!.calls.every((c) => (c.body.messages ?? []).some((m) => m.content.includes(CANARY_MARK))),
    ).toBe(true);
  }, 30_000);

  it('keeps applying canaries locally while Redis is down, and counts the failed appends', async () => {
    const env = { CANARY_DATASET: writeCanaries(dir, 20), CANARY_RATE: '1' };
    const errors: unknown[] = [];
    const a = await startFleet({
      replicas: 2,
      env,
      canaryLog: createRedisCanaryLog({
        url: redis.url,
        prefix: 'shared2:',
        timeoutMs: 200,
        pollMs: 20,
        onError: (err) => errors.push(err),
      }),
    });
    open.push(a);
    await waitFor(async () => {
      await a.app.inject({ method: 'POST', url: '/v1/reward', payload: realGroup(2) });
      return (await settle(a.app)).canaries.applied >= 2;
    }, 'canaries through Redis');
    await redis.kill();
    try {
      const before = (await settle(a.app)).canaries.applied;
      const res = await a.app.inject({ method: 'POST', url: '/v1/reward', payload: realGroup(8) });
      expect(res.statusCode).toBe(200);
      const after = await settle(a.app);
      expect(after.canaries.applied).toBe(before + 8);
      // Every append failed over to local delivery (main.ts counts them in reward_shared_state_errors_total).
      expect(errors.length).toBeGreaterThanOrEqual(8);
    } finally {
      await redis.restart();
    }
  }, 30_000);
});
