import { describe, expect, it } from 'vitest';
import { createLimiter } from '../../src/judge/limiter.js';
import {
  createBreaker,
  createReplicaPicker,
  routingKey,
  type ReplicaLoad,
} from '../../src/judge/replicas.js';

describe('circuit breaker', () => {
  function clocked(options: Parameters<typeof createBreaker>[0] = {}) {
    let t = 0;
    const breaker = createBreaker({ openMs: 1_000, ...options, now: () => t });
    return { breaker, advance: (ms: number) => (t += ms) };
  }
  const fail = (b: ReturnType<typeof createBreaker>, n: number) => {
    for (let i = 0; i < n; i++) {
      expect(b.admit()).toBe(true);
      b.settle('failure');
    }
  };

  it('opens after 5 consecutive failures and refuses attempts while open', () => {
    const { breaker } = clocked();
    fail(breaker, 4);
    expect(breaker.state).toBe('closed');
    fail(breaker, 1);
    expect([breaker.state, breaker.opens, breaker.available(), breaker.admit()]).toEqual([
      'open',
      1,
      false,
      false,
    ]);
  });

  it('a success resets the consecutive count; neutral outcomes count for nothing', () => {
    const { breaker } = clocked({ failureRate: 1 });
    fail(breaker, 4);
    breaker.admit();
    breaker.settle('success');
    fail(breaker, 4);
    for (let i = 0; i < 10; i++) breaker.settle('neutral');
    expect(breaker.state).toBe('closed');
  });

  it('opens on a failure rate ≥ 50 % over the window even without 5 in a row', () => {
    const { breaker } = clocked();
    for (let i = 0; i < 10; i++) {
      breaker.admit();
      breaker.settle(i % 2 === 0 ? 'failure' : 'success');
    }
    expect(breaker.state).toBe('open');
  });

  it('half-opens after openMs with one probe at a time; a successful probe closes it', () => {
    const { breaker, advance } = clocked();
    fail(breaker, 5);
    advance(999);
    expect(breaker.state).toBe('open');
    advance(1);
    expect(breaker.state).toBe('half_open');
    expect(breaker.admit()).toBe(true);
    expect([breaker.available(), breaker.admit()]).toEqual([false, false]);
    breaker.settle('success');
    expect(breaker.state).toBe('closed');
    fail(breaker, 4);
    expect(breaker.state).toBe('closed'); // counters were reset on close
  });

  it('a failed probe reopens it for twice as long; an abandoned probe frees the half-open slot', () => {
    const { breaker, advance } = clocked();
    fail(breaker, 5);
    advance(1_000);
    breaker.admit();
    breaker.settle('neutral'); // e.g. the caller aborted while the probe waited for a slot
    expect(breaker.admit()).toBe(true);
    breaker.settle('failure');
    expect([breaker.state, breaker.opens]).toEqual(['open', 2]);
    advance(1_999);
    expect(breaker.state).toBe('open');
    advance(1);
    expect(breaker.state).toBe('half_open');
  });
});

describe('replica picker', () => {
  const labels = ['10.0.0.1:8000', '10.0.0.2:8000', '10.0.0.3:8000', '10.0.0.4:8000'];
  function replicas(maxInflight = 8): ReplicaLoad[] {
    return labels.map(() => ({ limiter: createLimiter({ maxInflight }), breaker: createBreaker() }));
  }
  const keys = Array.from({ length: 400 }, (_, i) => routingKey(`abstract ${i}`));

  it('routing keys are 16 hex characters, stable per ground truth', () => {
    expect(routingKey('a')).toMatch(/^[0-9a-f]{16}$/);
    expect(routingKey('a')).toBe(routingKey('a'));
    expect(routingKey('a')).not.toBe(routingKey('b'));
  });

  it('sends one key to one replica while it is idle, and spreads keys over every replica', () => {
    const rs = replicas();
    const picker = createReplicaPicker(labels, rs, { policy: 'affinity' });
    const counts = [0, 0, 0, 0];
    for (const key of keys) {
      const first = picker.pick(key);
      expect(picker.pick(key)).toBe(first);
      counts[first!]! += 1;
    }
    for (const c of counts) expect(c / keys.length).toBeGreaterThan(0.15);
  });

  it('keeps a key on the same replica when another replica is removed (consistent hashing)', () => {
    const rs = replicas();
    const all = createReplicaPicker(labels, rs, { policy: 'affinity' });
    const before = keys.map((k) => all.pick(k));
    // Open replica 3's circuit: only its keys move.
    for (let i = 0; i < 5; i++) rs[3]!.breaker.settle('failure');
    const after = keys.map((k) => all.pick(k));
    keys.forEach((_, i) => {
      if (before[i] !== 3) expect(after[i]).toBe(before[i]);
      else expect(after[i]).not.toBe(3);
    });
  });

  it('bounded load: a hot key spills off its saturated replica, then onto a consistent second one', async () => {
    const rs = replicas(4);
    const picker = createReplicaPicker(labels, rs, { policy: 'affinity' });
    const key = keys[0]!;
    const home = picker.pick(key)!;
    const open = () => ({ signal: new AbortController().signal, deadline: Date.now() + 60_000 });
    const held = [];
    for (let i = 0; i < 4; i++) held.push(await rs[home]!.limiter.acquire(1, open()));
    const spill = picker.pick(key);
    expect(spill).not.toBe(home);
    expect(picker.pick(key)).toBe(spill);
    for (const r of held) r();
    expect(picker.pick(key)).toBe(home);
  });

  it('avoids the replica whose attempt just failed unless it is the only one left', () => {
    const rs = replicas();
    const picker = createReplicaPicker(labels, rs, { policy: 'affinity' });
    const home = picker.pick(keys[1]!)!;
    expect(picker.pick(keys[1]!, home)).not.toBe(home);
    const single = replicas().slice(0, 1);
    expect(createReplicaPicker(labels.slice(0, 1), single, { policy: 'affinity' }).pick(keys[1]!, 0)).toBe(0);
  });

  it('returns undefined when every circuit is open', () => {
    const rs = replicas();
    for (const r of rs) for (let i = 0; i < 5; i++) r.breaker.settle('failure');
    expect(createReplicaPicker(labels, rs, { policy: 'affinity' }).pick(keys[0]!)).toBeUndefined();
  });

  it('round_robin ignores the key', () => {
    const picker = createReplicaPicker(labels, replicas(), { policy: 'round_robin' });
    const picked = new Set(Array.from({ length: 8 }, () => picker.pick(keys[0]!)));
    expect(picked.size).toBe(4);
  });
});

describe('createBreaker: health judged across inputs (issue 38 item 9)', () => {
  it('never opens on one input failing, however often', () => {
    const breaker = createBreaker();
    for (let i = 0; i < 50; i++) {
      expect(breaker.admit()).toBe(true);
      breaker.settle('failure', 'poison');
    }
    expect(breaker.state).toBe('closed');
  });

  it('opens on 5 distinct inputs failing in a row, repeats of one of them in between not counted twice', () => {
    const breaker = createBreaker();
    for (const input of ['a', 'a', 'b', 'a', 'c', 'd', 'b']) breaker.settle('failure', input);
    expect(breaker.state).toBe('closed');
    breaker.settle('failure', 'e');
    expect(breaker.state).toBe('open');
  });

  it('opens on the failure rate over distinct inputs, not on one input among successes', () => {
    const poisoned = createBreaker();
    for (let i = 0; i < 40; i++) poisoned.settle(i % 2 === 0 ? 'failure' : 'success', 'poison');
    expect(poisoned.state).toBe('closed');
    const sick = createBreaker();
    for (let i = 0; i < 40 && sick.state === 'closed'; i++)
      sick.settle(i % 2 === 0 ? 'failure' : 'success', `input ${i}`);
    expect(sick.state).toBe('open');
  });

  it('without inputs named, counts every failure (as before)', () => {
    const breaker = createBreaker();
    for (let i = 0; i < 5; i++) breaker.settle('failure');
    expect(breaker.state).toBe('open');
  });
});
