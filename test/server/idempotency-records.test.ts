/**
 * The idempotency records on their own: matched on the id and the items, kept for the window, shared
 * through the record store between two processes (here two record sets over one in-process store, the
 * same interface the Redis store implements), and never trusting a record it cannot read.
 */
import { createHash } from 'node:crypto';

import { describe, expect, it } from 'vitest';

import { createIdempotencyRecords, itemsDigest } from '../../src/server/serving/idempotency.js';
import { createLocalIdempotency } from '../../src/state/local.js';

const OPTIONS = { windowMs: 1000, lingerMs: 0, maxEntries: 2, maxItems: 100 };
const items = itemsDigest(['key-a', 'key-b']);

describe('idempotency records', () => {
  it('replays here only for the same items, within the window, and keeps at most maxEntries', () => {
    let t = 0;
    const records = createIdempotencyRecords({ ...OPTIONS, now: () => t });
    records.answered('reward\u0000r1', items, [undefined, undefined]);
    expect(records.recallHere('reward\u0000r1', items)).toEqual({
      kind: 'here',
      done: [undefined, undefined],
    });
    expect(records.recallHere('reward\u0000r1', itemsDigest(['key-b', 'key-a']))).toBeUndefined();
    expect(records.recallHere('batch\u0000r1', items)).toBeUndefined();
    records.answered('reward\u0000r2', items, []);
    records.answered('reward\u0000r3', items, []);
    expect(records.recallHere('reward\u0000r1', items)).toBeUndefined();
    t = 1000;
    expect(records.recallHere('reward\u0000r3', items)).toBeUndefined();
  });

  it('holds at most maxItems judgments in all, dropping the oldest records; failed items do not count', () => {
    const records = createIdempotencyRecords({ ...OPTIONS, maxEntries: 100, maxItems: 3 });
    const judged = { id: 'j', judgment: {} as never };
    records.answered('a', items, [judged, judged]);
    records.answered('b', items, [undefined, undefined, undefined]);
    expect(records.recallHere('a', items)?.kind).toBe('here');
    records.answered('c', items, [judged]);
    expect(records.recallHere('a', items)?.kind).toBe('here');
    records.answered('d', items, [judged]);
    // 2 + 0 + 1 + 1 = 4 > 3: the oldest record goes, and with it its two judgments.
    expect(records.recallHere('a', items)).toBeUndefined();
    expect(records.recallHere('b', items)?.kind).toBe('here');
    expect(records.recallHere('d', items)?.kind).toBe('here');
  });

  it('shares the record, not the judgments, with another process; its key is a digest of the id', async () => {
    const store = createLocalIdempotency();
    const a = createIdempotencyRecords({ ...OPTIONS, shared: store });
    const b = createIdempotencyRecords({ ...OPTIONS, shared: store });
    a.answered('slime\u0000rollout-7', items, [undefined, undefined]);
    expect(await b.recallElsewhere('slime\u0000rollout-7', items)).toEqual({ kind: 'elsewhere' });
    expect(await b.recallElsewhere('slime\u0000rollout-7', itemsDigest(['key-c']))).toBeUndefined();
    expect(await b.recallElsewhere('slime\u0000rollout-8', items)).toBeUndefined();
    const key = createHash('sha256').update('slime\u0000rollout-7').digest('hex');
    expect(JSON.parse((await store.get(key)) ?? 'null')).toEqual({ v: 1, items });
  });

  it('reads a record it cannot parse (another version, corrupt) as a miss and reports it', async () => {
    const store = createLocalIdempotency();
    let undecodable = 0;
    const b = createIdempotencyRecords({ ...OPTIONS, shared: store, onUndecodable: () => undecodable++ });
    const key = (id: string) => createHash('sha256').update(id).digest('hex');
    await store.put(key('r-v2'), JSON.stringify({ v: 2, items }), 1000);
    await store.put(key('r-bad'), '{"v":1,', 1000);
    expect(await b.recallElsewhere('r-v2', items)).toBeUndefined();
    expect(await b.recallElsewhere('r-bad', items)).toBeUndefined();
    expect(undecodable).toBe(2);
  });
});
