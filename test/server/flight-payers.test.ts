/** Issue 38 item 4: a shared flight's calls run in a waiting tenant's flow and are charged to its receivers. */
import { describe, expect, it } from 'vitest';

import type { CallEvent } from '../../src/judge/types.js';
import type { TenantWork } from '../../src/server/admission/fair-shares.js';
import { createFlightPayers } from '../../src/server/serving/flight-payers.js';

const call: CallEvent = {
  role: 'analyst',
  model: 'm',
  backend: 'default',
  outcome: 'ok',
  latencyMs: 10,
  promptTokens: 900,
  completionTokens: 100,
  cachedPromptTokens: null,
};

function tenant(name: string) {
  const spent: number[] = [];
  const work: TenantWork = {
    flow: { name, weight: 1 },
    onCall: (e) => spent.push(e.promptTokens + e.completionTokens),
  };
  return { work, spent: () => spent.reduce((a, b) => a + b, 0) };
}

describe('flight payers', () => {
  it('moves the flight to a remaining joiner’s flow when the starter leaves', () => {
    const payers = createFlightPayers();
    const a = tenant('run-a');
    const b = tenant('run-b');
    const leaveA = new AbortController();
    payers.enter('k', a.work, leaveA.signal, true);
    payers.enter('k', b.work, new AbortController().signal, false);
    expect(payers.flow('k', undefined)?.name).toBe('run-a');
    leaveA.abort();
    expect(payers.flow('k', undefined)?.name).toBe('run-b');
  });

  it('charges the receivers at the end, split; a tenant that left pays nothing; nobody left: all who asked', () => {
    const payers = createFlightPayers();
    const [a, b, c] = [tenant('a'), tenant('b'), tenant('c')];
    const leaveA = new AbortController();
    payers.enter('k', a.work, leaveA.signal, true);
    payers.enter('k', b.work, new AbortController().signal, false);
    payers.enter('k', c.work, new AbortController().signal, false);
    const observed: CallEvent[] = [];
    const observer = payers.observer('k', { onCall: (e) => observed.push(e) });
    observer.onCall?.(call);
    observer.onCall?.(call);
    expect(observed).toHaveLength(2); // the metrics see each call at once
    expect(a.spent() + b.spent() + c.spent()).toBe(0); // the tenants at the end
    leaveA.abort();
    payers.settle('k');
    expect([a.spent(), b.spent(), c.spent()]).toEqual([0, 1000, 1000]);

    const gone = [new AbortController(), new AbortController()];
    payers.enter('j', a.work, gone[0]!.signal, true);
    payers.enter('j', b.work, gone[1]!.signal, false);
    payers.observer('j', {}).onCall?.(call);
    for (const g of gone) g.abort();
    payers.settle('j');
    expect([a.spent(), b.spent()]).toEqual([500, 1500]);
  });

  it('ignores a join of a flight already settled', () => {
    const payers = createFlightPayers();
    const a = tenant('a');
    payers.enter('k', a.work, new AbortController().signal, false);
    expect(payers.flow('k', undefined)).toBeUndefined();
  });
});
