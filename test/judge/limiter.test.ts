import { describe, expect, it } from 'vitest';
import { RewardError } from '../../src/errors.js';
import { createLimiter, estimateTokens, type LimiterOptions } from '../../src/judge/limiter.js';
import type { Sleep } from '../../src/judge/retry.js';

const open = () => ({ signal: new AbortController().signal, deadline: Date.now() + 60_000 });

/** A limiter on a manual clock whose sleeps advance the clock instantly and are recorded. */
function clocked(options: Omit<LimiterOptions, 'now' | 'sleep'>) {
  let t = 1_000_000;
  const sleeps: number[] = [];
  const sleep: Sleep = async (ms) => {
    await Promise.resolve();
    sleeps.push(Math.round(ms));
    t += ms;
  };
  const limiter = createLimiter({ ...options, now: () => t, sleep });
  return { limiter, sleeps, now: () => t, advance: (ms: number) => (t += ms) };
}

/** Resolves after pending promise callbacks have run. */
const flush = () => new Promise((resolve) => setImmediate(resolve));

describe('estimateTokens', () => {
  it('is ceil(chars / 4) of the messages plus max_tokens', () => {
    const messages = [
      { role: 'system' as const, content: 'abcde' },
      { role: 'user' as const, content: 'abcd' },
    ];
    expect(estimateTokens(messages, 100)).toBe(103);
    expect(estimateTokens(messages, undefined)).toBe(3);
  });
});

describe('max in-flight semaphore', () => {
  it('admits up to maxInflight and queues the rest', async () => {
    const limiter = createLimiter({ maxInflight: 2 });
    const a = await limiter.acquire(1, open());
    await limiter.acquire(1, open());
    let third = false;
    const pending = limiter.acquire(1, open()).then((release) => {
      third = true;
      return release;
    });
    await flush();
    expect([limiter.inflight, limiter.waiting, third]).toEqual([2, 1, false]);
    a();
    (await pending)();
    expect([limiter.inflight, limiter.waiting, third]).toEqual([1, 0, true]);
  });

  it('serves waiters first-in first-out', async () => {
    const limiter = createLimiter({ maxInflight: 1 });
    const first = await limiter.acquire(1, open());
    const order: number[] = [];
    const waiters = [1, 2, 3].map((n) =>
      limiter.acquire(1, open()).then((release) => {
        order.push(n);
        release();
      }),
    );
    first();
    await Promise.all(waiters);
    expect(order).toEqual([1, 2, 3]);
    expect(limiter.inflight).toBe(0);
  });

  it('ignores a second release of the same slot', async () => {
    const limiter = createLimiter({ maxInflight: 2 });
    const release = await limiter.acquire(1, open());
    await limiter.acquire(1, open());
    release();
    release();
    expect(limiter.inflight).toBe(1);
  });

  it('drops an aborted waiter from the queue', async () => {
    const limiter = createLimiter({ maxInflight: 1 });
    const held = await limiter.acquire(1, open());
    const controller = new AbortController();
    const aborted = limiter.acquire(1, { ...open(), signal: controller.signal });
    const next = limiter.acquire(1, open());
    expect(limiter.waiting).toBe(2);
    controller.abort(new Error('client gone'));
    await expect(aborted).rejects.toThrow('client gone');
    expect(limiter.waiting).toBe(1);
    held();
    const release = await next;
    expect(limiter.inflight).toBe(1);
    release();
    expect(limiter.inflight).toBe(0);
  });

  it('rejects a waiter with RW_JUDGE_TIMEOUT at its deadline', async () => {
    const limiter = createLimiter({ maxInflight: 1 });
    await limiter.acquire(1, open());
    const t0 = performance.now();
    const error = await limiter
      .acquire(1, { signal: new AbortController().signal, deadline: Date.now() + 50 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RewardError);
    expect((error as RewardError).code).toBe('RW_JUDGE_TIMEOUT');
    expect(performance.now() - t0).toBeLessThan(1_000);
    expect(limiter.waiting).toBe(0);
  });

  it('rejects at once on an already-aborted signal', async () => {
    const limiter = createLimiter({ maxInflight: 1 });
    await expect(limiter.acquire(1, { ...open(), signal: AbortSignal.abort() })).rejects.toMatchObject({
      name: 'AbortError',
    });
    expect(limiter.inflight).toBe(0);
  });
});

describe('RPM / TPM buckets', () => {
  it('spaces requests at the RPM rate after a one-second burst', async () => {
    const { limiter, sleeps } = clocked({ maxInflight: 10, rpm: 60 }); // 1 per second, burst 1
    for (let i = 0; i < 3; i++) (await limiter.acquire(1, { ...open(), deadline: Infinity }))();
    expect(sleeps).toEqual([1_000, 1_000]);
  });

  it('serves concurrent reservations in order, each one interval later', async () => {
    const sleeps: number[] = [];
    // The clock stands still: every reservation is computed at the same instant.
    const limiter = createLimiter({
      maxInflight: 10,
      rpm: 120, // 2 per second, burst 2
      now: () => 0,
      sleep: async (ms) => {
        await Promise.resolve();
        sleeps.push(ms);
      },
    });
    await Promise.all([1, 2, 3, 4].map(() => limiter.acquire(1, { ...open(), deadline: Infinity })));
    expect(sleeps).toEqual([500, 1_000]);
  });

  it('delays by token cost under TPM', async () => {
    const { limiter, sleeps } = clocked({ maxInflight: 10, tpm: 6_000 }); // 100 tokens/s, burst 100
    (await limiter.acquire(300, { ...open(), deadline: Infinity }))(); // bigger than the burst: goes when full → -200
    (await limiter.acquire(50, { ...open(), deadline: Infinity }))(); // waits for -200 → 50: 250 tokens
    expect(sleeps).toEqual([2_500]);
  });

  it('fails with RW_JUDGE_TIMEOUT without waiting or reserving when the deadline is too close', async () => {
    const { limiter, sleeps, now } = clocked({ maxInflight: 10, rpm: 60 });
    (await limiter.acquire(1, { ...open(), deadline: Infinity }))();
    const error = await limiter.acquire(1, { ...open(), deadline: now() + 500 }).catch((e: unknown) => e);
    expect((error as RewardError).code).toBe('RW_JUDGE_TIMEOUT');
    expect(limiter.inflight).toBe(0);
    // The failed call reserved nothing: the next one waits one interval, not two.
    (await limiter.acquire(1, { ...open(), deadline: Infinity }))();
    expect(sleeps).toEqual([1_000]);
  });

  it('refunds the reservation and frees the slot when aborted while waiting', async () => {
    const controller = new AbortController();
    const sleeps: number[] = [];
    const limiter = createLimiter({
      maxInflight: 10,
      rpm: 60,
      now: () => 0,
      sleep: async (ms) => {
        await Promise.resolve();
        sleeps.push(ms);
        if (sleeps.length === 1) {
          controller.abort(new Error('gone'));
          throw new Error('gone');
        }
      },
    });
    (await limiter.acquire(1, { ...open(), deadline: Infinity }))();
    await expect(limiter.acquire(1, { signal: controller.signal, deadline: Infinity })).rejects.toThrow(
      'gone',
    );
    expect(limiter.inflight).toBe(0);
    (await limiter.acquire(1, { ...open(), deadline: Infinity }))();
    expect(sleeps).toEqual([1_000, 1_000]);
  });

  it('refills over time up to the burst', async () => {
    const { limiter, sleeps, advance } = clocked({ maxInflight: 10, rpm: 60 });
    (await limiter.acquire(1, { ...open(), deadline: Infinity }))();
    advance(60_000); // refills to the 1-request burst, not to 60
    (await limiter.acquire(1, { ...open(), deadline: Infinity }))();
    (await limiter.acquire(1, { ...open(), deadline: Infinity }))();
    expect(sleeps).toEqual([1_000]);
  });
});

describe('adaptive in-flight limit (AIMD)', () => {
  /** A limiter on a manual clock; `sample` feeds one finished attempt sent at `sentAt`. */
  function adaptive(initial: number, maxInflight = 64) {
    let t = 1_000;
    const limiter = createLimiter({ maxInflight, adaptive: { initial }, now: () => t });
    return {
      limiter,
      // Deadlines on the limiter's own clock (a Date.now() deadline would overflow its timer).
      open: () => ({ signal: new AbortController().signal, deadline: t + 60_000 }),
      advance: (ms: number) => (t += ms),
      sample: (latencyMs: number, sentAt = t - latencyMs, overloaded = false) =>
        limiter.observe({ sentAt, latencyMs, overloaded }),
    };
  }

  it('is the ceiling when not adaptive, and observe changes nothing', () => {
    const limiter = createLimiter({ maxInflight: 7 });
    limiter.observe({ sentAt: 0, latencyMs: 10_000, overloaded: true });
    expect(limiter.limit).toBe(7);
  });

  it('grows by one per fast success in slow start while calls are held back, and admits a waiter', async () => {
    const { limiter, open, advance, sample } = adaptive(2);
    const held = [await limiter.acquire(1, open()), await limiter.acquire(1, open())];
    let third = false;
    const pending = limiter.acquire(1, open()).then((r) => {
      third = true;
      return r;
    });
    await flush();
    expect(third).toBe(false);
    advance(100);
    sample(100);
    await flush();
    expect(limiter.limit).toBe(3);
    expect(third).toBe(true);
    for (const r of [...held, await pending]) r();
  });

  it('does not grow while demand is below the limit (an idle replica proves nothing)', async () => {
    const { limiter, open, advance, sample } = adaptive(8);
    const r = await limiter.acquire(1, open());
    advance(100);
    sample(100);
    expect(limiter.limit).toBe(8);
    r();
  });

  it('cuts by 0.8 when smoothed latency inflates past 2× the baseline + 50 ms, once per round trip', async () => {
    const { limiter, open, advance, sample } = adaptive(10);
    const held = await Promise.all(Array.from({ length: 10 }, () => limiter.acquire(1, open())));
    for (let i = 0; i < 5; i++) {
      advance(100);
      sample(100); // 4 samples seed the average, the 5th sets the baseline (100 ms)
    }
    expect(limiter.limit).toBe(12); // slow start while the 10 held calls (+ the one observed) fill it
    advance(400);
    const sentBefore = 1_000; // sent before the decrease below
    sample(400, sentBefore); // smoothed 175 ms: one slow call is not queueing
    sample(400, sentBefore); // smoothed 231 ms: not yet
    expect(limiter.limit).toBe(12);
    sample(400, sentBefore); // smoothed 286 ms > 2 × 100 + 50 → 12 × 0.8 = 9.6
    expect(limiter.limit).toBe(9);
    sample(450, sentBefore); // same round trip: no second cut
    expect(limiter.limit).toBe(9);
    advance(10);
    sample(400, 1_910); // sent after the cut: cut again (9.6 × 0.8 = 7.68)
    expect(limiter.limit).toBe(7);
    for (const r of held) r();
  });

  it('does not shrink on a mix of short and long calls without queueing', async () => {
    const { limiter, open, advance, sample } = adaptive(8, 64);
    const held = await Promise.all(Array.from({ length: 8 }, () => limiter.acquire(1, open())));
    for (let i = 0; i < 40; i++) {
      advance(100);
      sample(i % 2 === 0 ? 100 : 400);
    }
    expect(limiter.limit).toBeGreaterThan(8);
    for (const r of held) r();
  });

  it('halves on an overload signal (timeout / 429 / 503) and never goes below 1', () => {
    const { limiter, advance, sample } = adaptive(8);
    advance(10);
    sample(6_000, 1_001, true);
    expect(limiter.limit).toBe(4);
    for (let i = 0; i < 10; i++) {
      advance(10);
      sample(6_000, 1_000 + 20 * (i + 1), true);
    }
    expect(limiter.limit).toBe(1);
  });

  it('after a cut, a released slot is retired instead of handed to a waiter', async () => {
    const { limiter, open, advance, sample } = adaptive(2);
    const a = await limiter.acquire(1, open());
    const b = await limiter.acquire(1, open());
    let third = false;
    const pending = limiter.acquire(1, open()).then((r) => {
      third = true;
      return r;
    });
    advance(10);
    sample(100, 1_005, true); // 2 → 1
    expect(limiter.limit).toBe(1);
    a();
    await flush();
    expect([limiter.inflight, third]).toEqual([1, false]);
    b();
    await flush();
    expect([limiter.inflight, third]).toEqual([1, true]);
    (await pending)();
  });

  it('never exceeds the ceiling', async () => {
    const { limiter, open, advance, sample } = adaptive(3, 4);
    const held = await Promise.all(Array.from({ length: 3 }, () => limiter.acquire(1, open())));
    const waiters = Array.from({ length: 5 }, () => limiter.acquire(1, open()));
    for (let i = 0; i < 20; i++) {
      advance(50);
      sample(50);
    }
    expect(limiter.limit).toBe(4);
    expect(limiter.inflight).toBe(4);
    for (const r of held) r();
    for (const w of waiters) (await w)();
  });
});

describe('slot priority', () => {
  it('hands a freed slot to the highest priority waiter, equal priorities in arrival order', async () => {
    const limiter = createLimiter({ maxInflight: 1 });
    const held = await limiter.acquire(1, open());
    const order: string[] = [];
    const wait = (name: string, priority?: number) =>
      limiter.acquire(1, { ...open(), priority }).then((release) => {
        order.push(name);
        release();
      });
    const all = Promise.all([wait('a0'), wait('b5', 5), wait('c0'), wait('d5', 5), wait('e9', 9)]);
    held();
    await all;
    expect(order).toEqual(['e9', 'b5', 'd5', 'a0', 'c0']);
  });

  it('skips waiters that left (aborted) and keeps counting them out of `waiting`', async () => {
    const limiter = createLimiter({ maxInflight: 1 });
    const held = await limiter.acquire(1, open());
    const gone = new AbortController();
    const leaving = limiter.acquire(1, { signal: gone.signal, deadline: Date.now() + 60_000, priority: 9 });
    const staying = limiter.acquire(1, { ...open(), priority: 1 });
    expect(limiter.waiting).toBe(2);
    gone.abort();
    await expect(leaving).rejects.toThrow();
    expect(limiter.waiting).toBe(1);
    held();
    (await staying)();
    expect(limiter.inflight).toBe(0);
  });
});
