import { describe, expect, it } from 'vitest';

import { FairQueue, SHARED_FLOW, type Flow } from '../../src/judge/fair-queue.js';

const A: Flow = { name: 'run-a', weight: 1 };
const B: Flow = { name: 'run-b', weight: 1 };

/** Everything left in the queue, in the order it would be served (each slot released at once). */
function drain<T>(q: FairQueue<T>): T[] {
  const out: T[] = [];
  for (let next = q.shift(); next !== undefined; next = q.shift()) out.push(next);
  return out;
}

/**
 * A pool of `slots` slots fed by `q`: every tick each held slot finishes its work (one tick per entry) and is
 * handed to the next entry. Counts how many entries of each flow were served in `ticks` ticks.
 */
function simulate(q: FairQueue<string>, slots: number, ticks: number, flowOf: (e: string) => string) {
  const served = new Map<string, number>();
  let held: string[] = [];
  for (let i = 0; i < slots; i++) {
    const e = q.shift();
    if (e !== undefined) held.push(e);
  }
  for (let t = 0; t < ticks; t++) {
    const done = held;
    held = [];
    for (const e of done) {
      served.set(flowOf(e), (served.get(flowOf(e)) ?? 0) + 1);
      q.release(flowOf(e));
      const next = q.shift();
      if (next !== undefined) held.push(next);
    }
  }
  return served;
}

describe('FairQueue, one flow', () => {
  it('serves the high lane first, then by rank, then in arrival order (the old priority heap)', () => {
    const q = new FairQueue<string>();
    q.add('n1', SHARED_FLOW, 'normal', 0);
    q.add('n2', SHARED_FLOW, 'normal', 5);
    q.add('h1', SHARED_FLOW, 'high', 0);
    q.add('n3', SHARED_FLOW, 'normal', 5);
    q.add('h2', SHARED_FLOW, 'high', 0);
    expect(q.size).toBe(5);
    expect(q.highSize).toBe(2);
    expect(drain(q)).toEqual(['h1', 'h2', 'n2', 'n3', 'n1']);
    expect(q.size).toBe(0);
    expect(q.heldBy('')).toBe(5);
  });

  it('forgets a deleted entry, and a flow once it has nothing waiting or held', () => {
    const q = new FairQueue<string>();
    q.add('x', A);
    q.add('y', A);
    expect(q.delete('x')).toBe(true);
    expect(q.delete('x')).toBe(false);
    expect(q.sizeOf('run-a')).toBe(1);
    expect(q.shift()).toBe('y');
    expect(q.flows()).toEqual([{ name: 'run-a', weight: 1, held: 1, waiting: 0 }]);
    q.release('run-a');
    expect(q.flows()).toEqual([]);
    q.release('run-a'); // a stray release is ignored
    expect(q.heldBy('run-a')).toBe(0);
  });

  it('keeps its order through many removals (the heap is compacted)', () => {
    const q = new FairQueue<number>();
    for (let i = 0; i < 5000; i++) q.add(i, A, 'normal', i % 3);
    for (let i = 0; i < 5000; i++) if (i % 5 !== 0) q.delete(i);
    const order = drain(q);
    expect(order).toHaveLength(1000);
    const expected = Array.from({ length: 1000 }, (_, k) => k * 5).sort((a, b) => (b % 3) - (a % 3) || a - b);
    expect(order).toEqual(expected);
  });
});

describe('FairQueue, several flows', () => {
  it('gives the slots that free to a flow that arrives while another holds them all, until it holds its share', () => {
    const q = new FairQueue<string>();
    for (let i = 0; i < 8; i++) q.hold(A); // A took all 8 slots before B arrived
    for (let i = 0; i < 100; i++) q.add(`a${i}`, A);
    for (let i = 0; i < 100; i++) q.add(`b${i}`, B);
    const next: string[] = [];
    for (let i = 0; i < 8; i++) {
      q.release('run-a');
      const e = q.shift();
      if (e !== undefined) next.push(e);
    }
    // The first four freed slots go to B (0 held), then the two alternate.
    expect(next.slice(0, 4)).toEqual(['b0', 'b1', 'b2', 'b3']);
    expect(q.heldBy('run-a')).toBe(4);
    expect(q.heldBy('run-b')).toBe(4);
  });

  it('peeks at the entry shift would serve next, without taking it', () => {
    const q = new FairQueue<string>();
    for (let i = 0; i < 4; i++) q.hold(A);
    for (let i = 0; i < 3; i++) q.add(`a${i}`, A);
    for (let i = 0; i < 3; i++) q.add(`b${i}`, B);
    q.add('a-high', A, 'high');
    const order: string[] = [];
    for (let next = q.peek(); next !== undefined; next = q.peek()) {
      const held = [q.heldBy('run-a'), q.heldBy('run-b'), q.size];
      expect(q.peek()).toBe(next); // unchanged by looking
      expect([q.heldBy('run-a'), q.heldBy('run-b'), q.size]).toEqual(held);
      expect(q.shift()).toBe(next);
      order.push(next);
    }
    expect(order).toEqual(['a-high', 'b0', 'b1', 'b2', 'a0', 'a1', 'a2']);
    expect(q.shift()).toBeUndefined();
  });

  it('shares the slots by weight under load (1:3), whichever flow queued first', () => {
    const q = new FairQueue<string>();
    const heavy: Flow = { name: 'heavy', weight: 3 };
    for (let i = 0; i < 2000; i++) q.add(`a${i}`, A);
    for (let i = 0; i < 2000; i++) q.add(`h${i}`, heavy);
    const served = simulate(q, 8, 100, (e) => (e.startsWith('a') ? 'run-a' : 'heavy'));
    expect(served.get('run-a')).toBe(200);
    expect(served.get('heavy')).toBe(600);
  });

  it('leaves an idle flow share to the others (work-conserving)', () => {
    const q = new FairQueue<string>();
    for (let i = 0; i < 500; i++) q.add(`a${i}`, A);
    const served = simulate(q, 8, 50, () => 'run-a');
    expect(served.get('run-a')).toBe(400);
  });

  it('serves a high entry of any flow before every normal one, even from the flow holding more', () => {
    const q = new FairQueue<string>();
    for (let i = 0; i < 6; i++) q.hold(A);
    q.add('b-normal', B);
    q.add('a-high', A, 'high');
    expect(q.shift()).toBe('a-high');
    expect(q.shift()).toBe('b-normal');
  });

  it('breaks a tie in held slots per weight by the longest wait', () => {
    const q = new FairQueue<string>();
    q.add('b0', B);
    q.add('a0', A);
    q.add('a1', A);
    expect(drain(q)).toEqual(['b0', 'a0', 'a1']);
  });

  it('takes the latest weight of a flow', () => {
    const q = new FairQueue<string>();
    q.hold(A);
    q.hold({ name: 'run-a', weight: 4 });
    expect(q.flows()).toEqual([{ name: 'run-a', weight: 4, held: 2, waiting: 0 }]);
    q.hold({ name: 'run-a', weight: 0 }); // never a weight that would divide by zero
    expect(q.flows()[0]?.weight).toBe(4);
  });
});
