import { describe, expect, it } from 'vitest';

import { JudgmentCache } from '../../src/judge/cache.js';

interface Value {
  ok: boolean;
  n: number;
}

/** A computation the test settles by hand; records the signal it was given. */
function deferred() {
  let resolve!: (v: Value) => void;
  let reject!: (e: Error) => void;
  const promise = new Promise<Value>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  const state: { signal?: AbortSignal; calls: number } = { calls: 0 };
  const compute = (signal: AbortSignal): Promise<Value> => {
    state.calls += 1;
    state.signal = signal;
    return promise;
  };
  return { promise, resolve, reject, compute, state };
}

const newCache = (maxEntries = 10) => new JudgmentCache<Value>({ maxEntries, isCacheable: (v) => v.ok });

describe('JudgmentCache single-flight', () => {
  it('runs one computation for concurrent callers and hands all of them its value', async () => {
    const cache = newCache();
    const d = deferred();
    const a = cache.run('k', d.compute);
    expect(cache.has('k')).toBe(true);
    const b = cache.join('k');
    const c = cache.join('k', new AbortController().signal);
    d.resolve({ ok: true, n: 1 });
    expect(await Promise.all([a, b, c])).toEqual([
      { ok: true, n: 1 },
      { ok: true, n: 1 },
      { ok: true, n: 1 },
    ]);
    expect(d.state.calls).toBe(1);
    expect(cache.has('k')).toBe(false);
    expect(cache.get('k')).toEqual({ ok: true, n: 1 });
  });

  it('returns undefined from join when nothing is in flight and refuses a second run of the same key', () => {
    const cache = newCache();
    expect(cache.join('k')).toBeUndefined();
    void cache.run('k', deferred().compute);
    expect(() => cache.run('k', deferred().compute)).toThrow();
  });

  it('keeps the computation running while another caller still waits, and aborts it when the last one leaves', async () => {
    const cache = newCache();
    const d = deferred();
    const first = new AbortController();
    const second = new AbortController();
    const a = cache.run('k', d.compute, first.signal);
    const b = cache.join('k', second.signal)!;
    first.abort(new Error('client 1 gone'));
    await expect(a).rejects.toThrow('client 1 gone');
    expect(d.state.signal!.aborted).toBe(false);
    second.abort(new Error('client 2 gone'));
    await expect(b).rejects.toThrow('client 2 gone');
    expect(d.state.signal!.aborted).toBe(true);
    // A new caller starts afresh instead of joining the abandoned flight.
    expect(cache.has('k')).toBe(false);
    const again = deferred();
    const c = cache.run('k', again.compute);
    again.resolve({ ok: true, n: 2 });
    expect(await c).toEqual({ ok: true, n: 2 });
    // The abandoned computation finishing late is not cached over the new value.
    d.resolve({ ok: true, n: 1 });
    await Promise.resolve();
    expect(cache.get('k')).toEqual({ ok: true, n: 2 });
  });

  it('rejects at once for a caller whose signal is already aborted, without computing twice', async () => {
    const cache = newCache();
    const d = deferred();
    const gone = new AbortController();
    gone.abort(new Error('gone'));
    const kept = cache.run('k', d.compute);
    await expect(cache.join('k', gone.signal)).rejects.toThrow('gone');
    expect(d.state.signal!.aborted).toBe(false);
    d.resolve({ ok: true, n: 1 });
    expect(await kept).toEqual({ ok: true, n: 1 });
  });

  it('never caches a failure, whether rejected or not cacheable', async () => {
    const cache = newCache();
    const bad = deferred();
    const p = cache.run('k', bad.compute);
    bad.resolve({ ok: false, n: 0 });
    expect(await p).toEqual({ ok: false, n: 0 });
    expect(cache.get('k')).toBeUndefined();
    const thrown = deferred();
    const q = cache.run('k', thrown.compute);
    thrown.reject(new Error('boom'));
    await expect(q).rejects.toThrow('boom');
    expect(cache.get('k')).toBeUndefined();
    expect(cache.has('k')).toBe(false);
  });

  it('turns a synchronous throw of compute into a rejection', async () => {
    const cache = newCache();
    await expect(
      cache.run('k', () => {
        throw new Error('sync');
      }),
    ).rejects.toThrow('sync');
    expect(cache.has('k')).toBe(false);
  });

  it('abortAll aborts every flight; waiting callers get what the computation returns', async () => {
    const cache = newCache();
    const d = deferred();
    const p = cache.run('k', (signal) => {
      void d.compute(signal);
      return new Promise<Value>((resolve) =>
        signal.addEventListener('abort', () => resolve({ ok: false, n: -1 })),
      );
    });
    cache.abortAll(new Error('shutdown'));
    expect(d.state.signal!.aborted).toBe(true);
    expect(await p).toEqual({ ok: false, n: -1 });
    expect(cache.inflight).toBe(0);
  });
});

describe('JudgmentCache LRU', () => {
  async function fill(cache: JudgmentCache<Value>, key: string, n: number): Promise<void> {
    await cache.run(key, () => Promise.resolve({ ok: true, n }));
  }

  it('evicts the least recently used entry, counting get as a use', async () => {
    const cache = newCache(2);
    await fill(cache, 'a', 1);
    await fill(cache, 'b', 2);
    expect(cache.get('a')?.n).toBe(1);
    await fill(cache, 'c', 3);
    expect(cache.size).toBe(2);
    expect(cache.get('b')).toBeUndefined();
    expect(cache.get('a')?.n).toBe(1);
    expect(cache.get('c')?.n).toBe(3);
  });

  it('stores nothing with maxEntries 0', async () => {
    const cache = newCache(0);
    await fill(cache, 'a', 1);
    expect(cache.size).toBe(0);
    expect(cache.get('a')).toBeUndefined();
  });
});
