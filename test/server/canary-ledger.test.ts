/**
 * The canary ledger's sequential tests as a state machine (pure, deterministic): per replica against its
 * peers (quarantine, release), and the fleet test on pooled canaries against a reference that does not move
 * with the fleet (frozen from the first canaries, or a file's), with its leave-one-out guard against
 * quarantining for a whole-fleet drop.
 */
import { describe, expect, it } from 'vitest';

import {
  createCanaryLedger,
  type CanaryEvent,
  type FleetTestOptions,
  type Transition,
} from '../../src/server/integrity/canary-ledger.js';

const options = { margin: 0.2, threshold: 10, floor: 0.05, window: 200 };
const fleetTest: FleetTestOptions = { threshold: 9, referenceSize: 400 };

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

const fleetOf = (n: number, test: FleetTestOptions = fleetTest) =>
  createCanaryLedger({
    ...options,
    fleet: [{ backend: 'b', replicas: Array.from({ length: n }, (_, i) => `r${i}`) }],
    fleetTest: test,
  });

const labels = ['match', 'no_match'] as const;
const other = (label: 'match' | 'no_match') => (label === 'match' ? 'no_match' : 'match');

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

  it('never quarantines a lone replica: the fleet test on its canaries raises the fleet alert', () => {
    const ledger = fleetOf(1, { threshold: 9, referenceSize: 50 });
    for (let i = 0; i < 50; i++)
      ledger.apply(canary('r0', i % 2 === 0 ? 'match' : 'no_match', i % 2 === 0 ? 'match' : 'no_match'));
    expect(ledger.fleet()).toMatchObject({ state: 'ok', reference: { source: 'frozen', n: 50, wrong: 0 } });
    for (let i = 0; i < 100; i++) ledger.apply(canary('r0', 'no_match', 'match'));
    expect(ledger.replicas()[0]!.state).not.toBe('quarantined');
    expect(ledger.fleet().state).toBe('alarmed');
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

describe('the fleet test on pooled canaries', () => {
  it('freezes the first referenceSize pooled canaries, leaving out aimed ones and failures', () => {
    const ledger = fleetOf(2, { threshold: 9, referenceSize: 20 });
    const frozen: Transition[] = [];
    for (let i = 0; i < 19; i++) {
      const label = labels[i % 2]!;
      frozen.push(...ledger.apply(canary(`r${i % 2}`, label, i < 4 ? other(label) : label)));
      // Aimed at a doubted replica, or failed: neither joins the reference.
      ledger.apply({ ...canary('r0', label, other(label)), targeted: true });
      ledger.apply(canary('r1', label, null));
    }
    expect(ledger.fleet()).toMatchObject({ state: 'collecting', collected: { n: 19, wrong: 4 } });
    frozen.push(...ledger.apply(canary('r1', 'match', 'match')));
    expect(frozen.filter((t) => t.kind === 'reference_frozen')).toEqual([
      { kind: 'reference_frozen', reference: { source: 'frozen', n: 20, wrong: 4 } },
    ]);
    // Tested against the upper end of the reference's one-sided 90 % interval: 4 of 20 wrong → the 0.9
    // quantile of Beta(5, 16) = 0.360662 (scipy.stats.beta.ppf(0.9, 5, 16)).
    const fleet = ledger.fleet();
    expect(fleet.q0).toBeCloseTo(0.360662, 5);
    expect(fleet.q1).toBeCloseTo(fleet.q0! + 0.2, 10);
  });

  it('alerts on a whole-fleet drop against a file reference, quarantines nothing, and clears on recovery', () => {
    // The judge was right on 95 of 100 canary rows offline.
    const ledger = fleetOf(4, { threshold: 9, referenceSize: 400, reference: { n: 100, wrong: 5 } });
    expect(ledger.fleet().state).toBe('ok');
    const seen: Transition[] = [];
    const round = (wrongEvery: number, rounds: number, offset = 0) => {
      for (let i = 0; i < rounds; i++) {
        for (let r = 0; r < 4; r++) {
          const n = i * 4 + r + offset;
          const label = labels[n % 2]!;
          seen.push(...ledger.apply(canary(`r${r}`, label, n % wrongEvery === 0 ? other(label) : label)));
        }
      }
    };
    round(20, 50); // healthy: 5 % wrong
    expect(ledger.fleetAlert).toBe(false);
    round(2, 40, 1); // every replica at once: every other canary wrong (a drop of 0.45)
    const alarmedAt = seen.findIndex((t) => t.kind === 'fleet_test' && t.alarmed);
    expect(alarmedAt).toBeGreaterThan(0);
    expect(ledger.fleetAlert).toBe(true);
    expect(ledger.fleet().state).toBe('alarmed');
    expect(seen.some((t) => t.kind === 'quarantined')).toBe(false);
    round(1000, 120, 1); // recovered: release by the mirror statistic
    expect(seen.some((t) => t.kind === 'fleet_test' && !t.alarmed)).toBe(true);
    expect(ledger.fleetAlert).toBe(false);
    expect(ledger.fleet().state).toBe('ok');
  });

  it('keeps the pool to the fleet as it serves: a quarantined replica’s canaries are left out', () => {
    const ledger = fleetOf(4, { threshold: 9, referenceSize: 400, reference: { n: 400, wrong: 8 } });
    for (let i = 0; i < 300; i++) {
      const label = labels[i % 2]!;
      for (let r = 0; r < 4; r++) ledger.apply(canary(`r${r}`, label, r === 0 && i >= 50 ? 'match' : label));
    }
    expect(ledger.replicas()[0]!.state).toBe('quarantined');
    const tested = ledger.fleet().tested;
    ledger.apply(canary('r0', 'no_match', 'match'));
    expect(ledger.fleet().tested).toBe(tested);
    expect(ledger.fleetAlert).toBe(false);
  });

  it('adopts a frozen reference another process stored, never over a file one', () => {
    const frozen = fleetOf(2, { threshold: 9, referenceSize: 400 });
    frozen.adoptReference({ source: 'frozen', n: 400, wrong: 40 });
    expect(frozen.fleet()).toMatchObject({ state: 'ok', reference: { source: 'frozen', n: 400, wrong: 40 } });
    const file = fleetOf(2, { threshold: 9, referenceSize: 400, reference: { n: 100, wrong: 1 } });
    file.adoptReference({ source: 'frozen', n: 400, wrong: 40 });
    expect(file.fleet().reference).toEqual({ source: 'file', n: 100, wrong: 1 });
  });

  it('puts a replica in doubt from S ≥ 0.15 h, long before it is watching', () => {
    const ledger = fleetOf(4);
    for (let i = 0; i < 50; i++) for (let r = 0; r < 4; r++) ledger.apply(canary(`r${r}`, 'match', 'match'));
    // Peers perfect: q0 at the floor 0.05, a wrong canary adds ln(0.25/0.05) = 1.61 ≥ 1.5.
    ledger.apply(canary('r0', 'no_match', 'match'));
    expect(ledger.replicas()[0]).toMatchObject({ state: 'ok', doubted: true });
    for (let i = 0; i < 20; i++) ledger.apply(canary('r0', 'match', 'match'));
    expect(ledger.replicas()[0]).toMatchObject({ state: 'ok', doubted: false });
  });
});
