import { describe, expect, it } from 'vitest';
import {
  abortableSleep,
  backoffDelayMs,
  parseRetryAfterMs,
  RetryError,
  withRetry,
  type RetryOptions,
} from '../../src/judge/retry.js';

const policy = { maxRetries: 3, baseDelayMs: 100, maxDelayMs: 1_000 };

/** Options with a recording, instant sleep and a fixed clock; `random` defaults to the top of the range. */
function opts(over: Partial<RetryOptions> = {}) {
  const sleeps: number[] = [];
  const options: RetryOptions = {
    policy,
    deadline: 1_000_000,
    signal: new AbortController().signal,
    classify: () => ({ retry: true }),
    random: () => 0.5,
    now: () => 0,
    sleep: async (ms) => {
      await Promise.resolve();
      sleeps.push(ms);
    },
    ...over,
  };
  return { options, sleeps };
}

/** An attempt function failing `failures` times, then returning 'ok'. */
function failing(failures: number, error: unknown = new Error('boom')) {
  let calls = 0;
  const fn = async (n: number) => {
    await Promise.resolve();
    calls += 1;
    expect(n).toBe(calls);
    if (calls <= failures) throw error;
    return 'ok';
  };
  return { fn, calls: () => calls };
}

describe('backoffDelayMs', () => {
  it('is full jitter under min(cap, base·2^n)', () => {
    expect(backoffDelayMs(0, policy, () => 0)).toBe(0);
    expect(backoffDelayMs(0, policy, () => 0.5)).toBe(50);
    expect(backoffDelayMs(2, policy, () => 0.5)).toBe(200);
    expect(backoffDelayMs(10, policy, () => 0.5)).toBe(500); // capped at 1000
  });
});

describe('parseRetryAfterMs', () => {
  it('reads delta-seconds', () => {
    expect(parseRetryAfterMs('1')).toBe(1_000);
    expect(parseRetryAfterMs(' 2.5 ')).toBe(2_500);
  });
  it('reads an HTTP date relative to now, never negative', () => {
    const now = Date.parse('Wed, 21 Oct 2025 07:28:00 GMT');
    expect(parseRetryAfterMs('Wed, 21 Oct 2025 07:28:03 GMT', now)).toBe(3_000);
    expect(parseRetryAfterMs('Wed, 21 Oct 2025 07:27:00 GMT', now)).toBe(0);
  });
  it('ignores absent or invalid values', () => {
    expect(parseRetryAfterMs(undefined)).toBeUndefined();
    expect(parseRetryAfterMs('')).toBeUndefined();
    expect(parseRetryAfterMs('-1')).toBeUndefined();
    expect(parseRetryAfterMs('soon')).toBeUndefined();
  });
});

describe('withRetry', () => {
  it('retries until success and reports the attempts', async () => {
    const { options, sleeps } = opts();
    const attempt = failing(2);
    await expect(withRetry(attempt.fn, options)).resolves.toEqual({ value: 'ok', attempts: 3 });
    expect(sleeps).toEqual([50, 100]); // 0.5 × 100·2^0, 0.5 × 100·2^1
  });

  it('stops after maxRetries + 1 attempts', async () => {
    const { options } = opts();
    const attempt = failing(99);
    const error = await withRetry(attempt.fn, options).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RetryError);
    expect(error).toMatchObject({ reason: 'exhausted', attempts: 4 });
    expect((error as RetryError).lastError).toBeInstanceOf(Error);
    expect(attempt.calls()).toBe(4);
  });

  it('does not retry what classify rejects', async () => {
    const { options, sleeps } = opts({ classify: () => ({ retry: false }) });
    const error = await withRetry(failing(1).fn, options).catch((e: unknown) => e);
    expect(error).toMatchObject({ reason: 'fatal', attempts: 1 });
    expect(sleeps).toEqual([]);
  });

  it('waits at least Retry-After, at least the jitter', async () => {
    const { options, sleeps } = opts({
      classify: () => ({ retry: true, retryAfterMs: 1_000 }),
      random: () => 0,
    });
    await withRetry(failing(1).fn, options);
    const big = opts({ classify: () => ({ retry: true, retryAfterMs: 10 }), random: () => 0.9 });
    await withRetry(failing(1).fn, big.options);
    expect([...sleeps, ...big.sleeps]).toEqual([1_000, 90]);
  });

  it('gives up instead of sleeping past the deadline', async () => {
    const { options, sleeps } = opts({ deadline: 40, random: () => 0.5 }); // first backoff: 50 ms
    const error = await withRetry(failing(5).fn, options).catch((e: unknown) => e);
    expect(error).toMatchObject({ reason: 'deadline', attempts: 1 });
    expect(sleeps).toEqual([]);
  });

  it('gives up when Retry-After reaches past the deadline', async () => {
    const { options } = opts({ deadline: 500, classify: () => ({ retry: true, retryAfterMs: 600 }) });
    await expect(withRetry(failing(5).fn, options)).rejects.toMatchObject({ reason: 'deadline' });
  });

  it('stops when the signal aborts during the backoff', async () => {
    const controller = new AbortController();
    const { options } = opts({
      signal: controller.signal,
      sleep: (ms, signal) => {
        controller.abort();
        return abortableSleep(ms, signal);
      },
    });
    const attempt = failing(5);
    await expect(withRetry(attempt.fn, options)).rejects.toMatchObject({ reason: 'aborted', attempts: 1 });
    expect(attempt.calls()).toBe(1);
  });

  it('stops when the attempt fails because the signal aborted', async () => {
    const controller = new AbortController();
    const { options } = opts({ signal: controller.signal });
    const attempt = async () => {
      await Promise.resolve();
      controller.abort();
      throw new Error('aborted');
    };
    await expect(withRetry(attempt, options)).rejects.toMatchObject({ reason: 'aborted', attempts: 1 });
  });
});

describe('abortableSleep', () => {
  it('resolves after the delay', async () => {
    const t0 = performance.now();
    await abortableSleep(20, new AbortController().signal);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(15);
  });

  it('rejects promptly with the abort reason', async () => {
    const controller = new AbortController();
    const t0 = performance.now();
    const pending = abortableSleep(10_000, controller.signal);
    controller.abort(new Error('stop'));
    await expect(pending).rejects.toThrow('stop');
    expect(performance.now() - t0).toBeLessThan(1_000);
  });

  it('rejects at once on an already-aborted signal', async () => {
    await expect(abortableSleep(10_000, AbortSignal.abort())).rejects.toMatchObject({ name: 'AbortError' });
  });
});
