import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

import { describe, expect, it } from 'vitest';

import { evictOldest } from '../../src/state/bounded.js';

const SRC = fileURLToPath(new URL('../../src/', import.meta.url));

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

describe('evictOldest', () => {
  it('drops the oldest entries (insertion order) down to maxEntries; a re-inserted key is newest', () => {
    const map = new Map([
      ['a', 1],
      ['b', 2],
      ['c', 3],
    ]);
    map.delete('a');
    map.set('a', 1);
    map.set('d', 4);
    evictOldest(map, 2);
    expect([...map.keys()]).toEqual(['a', 'd']);
    evictOldest(map, 5);
    expect(map.size).toBe(2);
    evictOldest(map, 0);
    expect(map.size).toBe(0);
  });

  it('honours a second bound through `over`, settling a tally in `drop`', () => {
    const map = new Map([
      ['a', 5],
      ['b', 1],
      ['c', 4],
    ]);
    let held = 10;
    const drop = (key: string): void => {
      held -= map.get(key) ?? 0;
      map.delete(key);
    };
    evictOldest(map, 10, { drop, over: () => held > 4 });
    expect([...map.keys()]).toEqual(['c']);
    expect(held).toBe(4);
  });

  it('ends on an empty map whatever `over` says, and on a `drop` that forgets to delete', () => {
    const map = new Map([['a', 1]]);
    evictOldest(map, 10, { over: () => true });
    expect(map.size).toBe(0);
    const stubborn = new Map([
      ['a', 1],
      ['b', 2],
    ]);
    evictOldest(stubborn, 1, { drop: () => undefined });
    expect([...stubborn.keys()]).toEqual(['b']);
  });

  it('is the only eviction loop in src/ (cache, idempotency, stagger, both state stores and the outage budget use it)', () => {
    const loops = sources(SRC)
      .filter((path) => readFileSync(path, 'utf8').includes('.keys().next()'))
      .map((path) => relative(SRC, path));
    expect(loops).toEqual(['state/bounded.ts']);
    const users = sources(SRC)
      .filter((path) => /\bevictOldest\(/.test(readFileSync(path, 'utf8')))
      .map((path) => relative(SRC, path))
      .sort();
    expect(users).toEqual(
      [
        'judge/cache.ts',
        'judge/stagger.ts',
        'server/admission/fair-shares.ts',
        'server/controls/cancel.ts',
        'server/serving/group-means.ts',
        'server/serving/idempotency.ts',
        'state/local.ts',
        'state/redis-budget.ts',
        'state/redis-cancels.ts',
        'state/redis-connection.ts',
      ].sort(),
    );
  });
});
