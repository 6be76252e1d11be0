/** The bench's request loop (bench/drive.ts) alone: bounded in count, concurrency and time; a throw stops it. */
import { setTimeout as delay } from 'node:timers/promises';

import { describe, expect, it } from 'vitest';

import { drive } from '../../bench/drive.js';

describe('drive', () => {
  it('runs every index once, in order of start, at most `concurrency` at a time', async () => {
    const started: number[] = [];
    let running = 0;
    let peak = 0;
    const run = await drive(20, 3, 10_000, async (i) => {
      started.push(i);
      running += 1;
      peak = Math.max(peak, running);
      await delay(1);
      running -= 1;
    });
    expect(started).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(peak).toBe(3);
    expect(run).toMatchObject({ done: 20, timedOut: false });
    expect(run.error).toBeUndefined();
  });

  it('starts nothing after maxMs and says it timed out', async () => {
    const run = await drive(1000, 2, 30, () => delay(10));
    expect(run.timedOut).toBe(true);
    expect(run.done).toBeGreaterThan(0);
    expect(run.done).toBeLessThan(20);
  });

  it('stops waiting at the first task that throws, with its message', async () => {
    const run = await drive(10, 1, 10_000, async (i) => {
      await delay(0);
      if (i === 3) throw new Error('backend gone');
    });
    expect(run).toMatchObject({ done: 3, error: 'backend gone', timedOut: false });
  });

  it('runs no worker for no work', async () => {
    let calls = 0;
    const run = await drive(0, 8, 10_000, () => {
      calls += 1;
      return Promise.resolve();
    });
    expect(calls).toBe(0);
    expect(run.done).toBe(0);
  });
});
