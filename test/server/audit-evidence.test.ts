/**
 * Audits as evidence about a replica (pure): disagreements with the audit graph more often than its peers'
 * make a replica suspect; agreeing audits clear it; a lone replica has no peers to be compared with.
 */
import { describe, expect, it } from 'vitest';

import { createAuditEvidence } from '../../src/server/integrity/audit.js';

const options = { margin: 0.2, threshold: 10, floor: 0.05, window: 200 };
const at = (replica: string) => [{ backend: 'b', replica }];

describe('audit evidence', () => {
  it('makes suspect the replica the audits contradict more than its peers, and clears it when they agree again', () => {
    const evidence = createAuditEvidence(options);
    // Peers disagree on 1 audit in 10; r0 on every other one.
    for (let i = 0; i < 200; i++) {
      for (const r of ['r1', 'r2', 'r3']) evidence.observe(at(r), i % 10 === 0);
    }
    expect(evidence.suspects()).toEqual([]);
    let first = -1;
    for (let i = 0; i < 40 && first < 0; i++) {
      evidence.observe(at('r0'), i % 2 === 0);
      if (evidence.suspects().length > 0) first = i;
    }
    expect(first).toBeGreaterThan(0);
    expect(evidence.suspects()).toEqual([{ backend: 'b', replica: 'r0' }]);
    const r0 = evidence.records().find((r) => r.replica === 'r0');
    expect(r0).toMatchObject({ suspect: true });
    expect(r0!.peerRate).toBeGreaterThan(0.1);
    // S is capped at h, so agreeing audits bring it back under h/2 in a bounded number of audits.
    let cleared = -1;
    for (let i = 0; i < 100 && cleared < 0; i++) {
      evidence.observe(at('r0'), false);
      if (evidence.suspects().length === 0) cleared = i + 1;
    }
    expect(cleared).toBeGreaterThan(0);
    expect(cleared).toBeLessThanOrEqual(40);
  });

  it('does not test a replica without audited peers', () => {
    const evidence = createAuditEvidence(options);
    for (let i = 0; i < 50; i++) evidence.observe(at('alone'), true);
    expect(evidence.suspects()).toEqual([]);
    expect(evidence.records()[0]).toMatchObject({ audits: 50, disagreements: 50, peerRate: null });
  });
});
