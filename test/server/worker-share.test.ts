/** WORKERS=N: each worker's share of the per-server backend limits (src/server/process/cluster.ts `workerShare`). */
import { describe, expect, it } from 'vitest';

import { loadConfig } from '../../src/config.js';
import { workerShare } from '../../src/server/process/cluster.js';

const env = {
  JUDGE_BASE_URL: 'http://127.0.0.1:9/v1',
  JUDGE_MODEL: 'm',
  JUDGE_MAX_INFLIGHT: '255',
  JUDGE_RPM: '600',
  JUDGE_TPM: '100000',
};

describe('workerShare', () => {
  it('splits max in-flight (rounded up) and, without Redis, RPM/TPM between the workers', () => {
    const config = workerShare(loadConfig(env), 2);
    expect(config.judge.default).toMatchObject({ max_inflight: 128, rpm: 300, tpm: 50_000 });
  });

  it('keeps RPM/TPM whole when Redis shares the buckets; in-flight is still per process', () => {
    const config = workerShare(loadConfig({ ...env, REDIS_URL: 'redis://127.0.0.1:6379' }), 4);
    expect(config.judge.default).toMatchObject({ max_inflight: 64, rpm: 600, tpm: 100_000 });
  });

  it('leaves one worker, and the offline backend, as they are', () => {
    const one = loadConfig(env);
    expect(workerShare(one, 1)).toBe(one);
    expect(workerShare(loadConfig({}), 3).judge.default).toBe('offline');
  });
});
