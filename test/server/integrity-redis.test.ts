/**
 * The canary record shared through Redis (a real redis-server on loopback): two server replicas in front of
 * the same four judge replicas; only A gets traffic (and so runs canaries), yet B applies every canary,
 * quarantines the same replica and stops routing real work to it. The fleet reference frozen from the first
 * canaries is shared too: a server replica started after the stream lost those canaries tests against the
 * same reference.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Redis } from 'ioredis';
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

  it('shares the frozen fleet reference: a server replica started after the stream was trimmed uses the same one', async () => {
    const env = {
      CANARY_DATASET: writeCanaries(dir, 20, 10),
      CANARY_RATE: '1',
      CANARY_REFERENCE_SIZE: '40',
      REDIS_PREFIX: 'shared3:',
    };
    const log = () =>
      createRedisCanaryLog({ url: redis.url, prefix: 'shared3:', timeoutMs: 1000, pollMs: 20 });
    const a = await startFleet({ replicas: 2, mode: 'flaky', env, canaryLog: log() });
    open.push(a);
    await driveUntil(
      a.app,
      (r) => r.canaries.fleet.reference.source === 'frozen' && r.canaries.fleet.state !== 'collecting',
      400,
    );
    const frozen = (await settle(a.app)).canaries.fleet.reference;
    // 40 canaries walk the 20 rows about twice (in the order they finish); the flaky replicas err on the 2
    // hard ones: about 36 of 40 right, a reference of this run's own.
    expect(frozen).toMatchObject({ source: 'frozen', canaries: 40 });
    expect(frozen.accuracy).toBeLessThan(1);
    expect(frozen.accuracy).toBeGreaterThanOrEqual(0.85);
    // The stream loses its first entries (XTRIM, as MAXLEN does over a long run): the first canaries are gone.
    const client = new Redis(redis.url);
    try {
      await waitFor(
        async () => (await client.keys('shared3:canary-reference:*')).length === 1,
        'stored reference',
      );
      await client.xtrim('shared3:canary', 'MAXLEN', 0);
    } finally {
      client.disconnect();
    }
    const c = await startFleet({
      replicas: 0,
      env: { ...env, JUDGE_BASE_URL: a.fakes.map((f) => f.baseURL).join(',') },
      canaryLog: log(),
    });
    open.push(c);
    await waitFor(
      async () =>
        (await integrity(c.app)).canaries.fleet.reference.source === 'frozen' &&
        (await integrity(c.app)).canaries.fleet.state !== 'collecting',
      'C adopts the stored reference',
    );
    const onC = (await integrity(c.app)).canaries.fleet.reference;
    expect(onC).toEqual(frozen);
    expect((await integrity(c.app)).canaries.applied).toBe(0);
  }, 30_000);
});
