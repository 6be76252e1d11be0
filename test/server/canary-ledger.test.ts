/**
 * The canary ledger's sequential test as a state machine (pure, deterministic), and the simulation behind
 * docs/integrity.md (bench/canary-cusum.ts) on fewer seeds against the documented bounds.
 */
import { describe, expect, it } from 'vitest';

import { detectionDelay, falseAlarms } from '../../bench/canary-cusum.js';
import { createCanaryLedger, type CanaryEvent } from '../../src/server/integrity/canary-ledger.js';

const options = { margin: 0.2, threshold: 10, floor: 0.05, window: 200 };

function canary(
  replica: string,
  label: 'match' | 'no_match',
  verdict: 'match' | 'no_match' | null,
): CanaryEvent {
  return {
    at: 0,
    row: 'r',
    label,
    verdict,
    outcome: verdict === null ? 'failed' : verdict === label ? 'correct' : 'wrong',
    pins: [{ backend: 'b', replica }],
    members: [{ node: 'judge', role: 'judge', backend: 'b', replica, stance: verdict ?? 'no_match' }],
  };
}

const fleetOf = (n: number) =>
  createCanaryLedger({
    ...options,
    fleet: [{ backend: 'b', replicas: Array.from({ length: n }, (_, i) => `r${i}`) }],
  });

describe('canary ledger', () => {
  it('quarantines the one replica answering match to everything, and releases it after passing canaries', () => {
    const ledger = fleetOf(4);
    const labels = ['match', 'no_match'] as const;
    let quarantinedAt = -1;
    for (let i = 0; i < 400; i++) {
      const label = labels[i % 2]!;
      for (let r = 0; r < 4; r++) {
        const verdict = r === 0 && i >= 50 ? 'match' : label;
        const t = ledger.apply(canary(`r${r}`, label, verdict));
        if (quarantinedAt < 0 && t.some((x) => x.kind === 'quarantined')) quarantinedAt = i;
      }
    }
    // Wrong on every other canary from canary 50 on: quarantined within the documented 40.
    expect(quarantinedAt).toBeGreaterThan(50);
    expect(quarantinedAt - 50).toBeLessThanOrEqual(40);
    const states = ledger.replicas().map((r) => r.state);
    expect(states).toEqual(['quarantined', 'ok', 'ok', 'ok']);
    expect(ledger.fleetAlert).toBe(false);
    // Fixed: ⌈10 / ln(0.95/0.75)⌉ = 43 correct canaries bring it back.
    let released = -1;
    for (let i = 0; i < 100 && released < 0; i++) {
      const t = ledger.apply(canary('r0', 'match', 'match'));
      if (t.some((x) => x.kind === 'released')) released = i + 1;
    }
    expect(released).toBe(43);
    expect(ledger.replicas()[0]!.state).toBe('ok');
  });

  it('counts failed canaries without testing on them', () => {
    const ledger = fleetOf(2);
    for (let i = 0; i < 500; i++) ledger.apply(canary('r0', 'no_match', null));
    const [r0] = ledger.replicas();
    expect(r0).toMatchObject({ failed: 500, correct: 0, wrong: 0, s: 0, state: 'ok' });
    expect(ledger.members()).toEqual([]);
  });

  it('never quarantines a lone replica: it raises the fleet alert', () => {
    const ledger = fleetOf(1);
    for (let i = 0; i < 50; i++)
      ledger.apply(canary('r0', i % 2 === 0 ? 'match' : 'no_match', i % 2 === 0 ? 'match' : 'no_match'));
    for (let i = 0; i < 100; i++) ledger.apply(canary('r0', 'no_match', 'match'));
    expect(ledger.replicas()[0]!.state).not.toBe('quarantined');
    expect(ledger.fleetAlert).toBe(true);
  });

  it('keeps TPR and TNR per member: an always-match member has TPR 1 and TNR 0', () => {
    const ledger = fleetOf(2);
    for (let i = 0; i < 10; i++) {
      ledger.apply(canary('r1', 'match', 'match'));
      ledger.apply(canary('r1', 'no_match', 'match'));
    }
    expect(ledger.members()).toEqual([
      expect.objectContaining({
        replica: 'r1',
        positives: { n: 10, correct: 10 },
        negatives: { n: 10, correct: 0 },
      }),
    ]);
  });
});

describe('the simulation behind docs/integrity.md (bench/canary-cusum.ts)', () => {
  const sim = { replicas: 4, positives: 0.5, margin: 0.2, threshold: 10, floor: 0.05, window: 200 };

  it('raises at most 2 false quarantines over 2 × 40 000 canaries of healthy replicas erring 10 %', () => {
    // Documented: ~0.08 per 10 000 canaries per replica, 0.64 expected here; h = 6 would give ~18.
    let quarantines = 0;
    for (const seed of [1, 2]) quarantines += falseAlarms({ ...sim, q: 0.1, seed }, 10_000).quarantines;
    expect(quarantines).toBeLessThanOrEqual(2);
  });

  it('detects an always-match replica within the documented delay (10 seeds, healthy error 0.05)', () => {
    const delays = [];
    for (let seed = 1; seed <= 10; seed++)
      delays.push(detectionDelay({ ...sim, q: 0.05, seed: seed + 1000 }, 100));
    expect(Math.max(...delays)).toBeLessThanOrEqual(40);
  });
});
