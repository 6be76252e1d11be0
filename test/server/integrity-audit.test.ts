/**
 * Audits of real traffic and the drift gauges, against the scripted fake on two replicas: a second verdict
 * from another replica (or AUDIT_GRAPH) in the background, counted by outcome and first verdict, and the
 * drift gauges over the recent window.
 */
import { afterEach, expect, it } from 'vitest';

import { counterValue, GOOD, GROUND_TRUTH, QUESTION, waitFor } from './helpers.js';
import { integrity, realGroup, startFleet, type Fleet, type Json } from './integrity-fleet.js';

const fleets: Fleet[] = [];
afterEach(async () => {
  for (const f of fleets.splice(0)) await f.close();
});
async function fleet(options: Parameters<typeof startFleet>[0]): Promise<Fleet> {
  const f = await startFleet(options);
  fleets.push(f);
  return f;
}

it('re-judges every real judgment on the other replica and counts a disagreement by first verdict', async () => {
  const f = await fleet({ replicas: 2, env: { AUDIT_RATE: '1', AUDIT_MAX_INFLIGHT: '64' } });
  // Replica 1 says `match` to everything: whichever replica judged first, the other one disagrees.
  f.modes[1] = 'match';
  // Affinity spreads groups over the replicas by a hash that includes the fakes' ports: send groups until
  // both replicas have judged first (bounded; 6 groups on one replica happen 1 run in 32).
  let sent = 0;
  let report: Json;
  for (let groups = 0; groups < 24; groups++) {
    const res = await f.app.inject({ method: 'POST', url: '/v1/reward', payload: realGroup(4) });
    expect(res.statusCode).toBe(200);
    sent += 4;
    await waitFor(async () => (await integrity(f.app)).audit.judgments === sent, `${sent} audits`);
    report = (await integrity(f.app)).audit;
    if (groups >= 5 && report.byFirstVerdict.match.n > 0 && report.byFirstVerdict.no_match.n > 0) break;
  }
  report = (await integrity(f.app)).audit;
  expect(report.agreement).toBe(0);
  expect(report.byFirstVerdict.match.disagree + report.byFirstVerdict.no_match.disagree).toBe(sent);
  expect(await counterValue(f.metrics.integrity.auditJudgments, { outcome: 'disagree' })).toBe(sent);
  expect(await counterValue(f.metrics.integrity.auditJudgments, { outcome: 'agree' })).toBe(0);
  // Each audit went to the replica the first judgment did not use, so each replica took one call per real
  // judgment: its own first judgments plus the audits of the other's.
  expect(report.byFirstVerdict.match.n).toBeGreaterThan(0);
  expect(report.byFirstVerdict.no_match.n).toBeGreaterThan(0);
  expect(f.fakes.map((fake) => fake.callCount)).toEqual([sent, sent]);
  // The reward already answered is untouched: audits are not judgments of the service.
  expect(await counterValue(f.metrics.judgments)).toBe(sent);
});

it('agrees with AUDIT_GRAPH on healthy replicas; a failed first judgment is not audited', async () => {
  const f = await fleet({
    replicas: 2,
    env: { AUDIT_RATE: '1', AUDIT_GRAPH: 'vote-3', AUDIT_MAX_INFLIGHT: '64' },
  });
  await f.app.inject({ method: 'POST', url: '/v1/reward', payload: realGroup(4, true) });
  await waitFor(async () => (await integrity(f.app)).audit.judgments === 4, '4 audits');
  let report = (await integrity(f.app)).audit;
  expect(report.graph).toBe('vote-3');
  expect(report.agreement).toBe(1);
  expect(report.byFirstVerdict.match).toMatchObject({ n: 4, agree: 4 });
  // 4 single-judge calls + 4 × 3 vote-3 calls.
  expect(f.fakes[0]!.callCount + f.fakes[1]!.callCount).toBe(16);

  f.modes[0] = 'down';
  f.modes[1] = 'down';
  await f.app.inject({ method: 'POST', url: '/v1/reward', payload: realGroup(2) });
  // The first judgments failed: nothing to audit (only `ok` judgments are audited).
  report = (await integrity(f.app)).audit;
  expect(report.judgments).toBe(4);
});

it('counts an audit whose replica is down as failed, never as agreement', async () => {
  const f = await fleet({ replicas: 2, env: { AUDIT_RATE: '1', AUDIT_MAX_INFLIGHT: '64' } });
  f.modes[1] = 'down';
  // Groups land on either replica; those judged on replica 0 are audited on replica 1, which fails.
  // Until some group landed on replica 0 (bounded: affinity hashes the fakes' ports).
  for (let i = 0; i < 24; i++) {
    await f.app.inject({ method: 'POST', url: '/v1/reward', payload: realGroup(2) });
    if (i >= 5 && (await counterValue(f.metrics.judgments, { status: 'ok' })) > 0) break;
  }
  const ok = await counterValue(f.metrics.judgments, { status: 'ok' });
  expect(ok).toBeGreaterThan(0);
  await waitFor(async () => (await integrity(f.app)).audit.judgments === ok, `${ok} audits`);
  const report = (await integrity(f.app)).audit;
  expect(report.agreement).toBeNull();
  expect(await counterValue(f.metrics.integrity.auditJudgments, { outcome: 'failed' })).toBe(ok);
});

it('reports drift gauges over the window: accept rate, candidate length, length–reward correlation, rejected inputs', async () => {
  const f = await fleet({ replicas: 1, env: {} });
  const good = `A long ${GOOD} idea: train paired image and text encoders with a symmetric contrastive loss over large web batches.`;
  const bad = 'Short plainidea: fine-tune a CNN.';
  const candidates = [good, good, bad, bad, bad, 'Thought process:'];
  await f.app.inject({
    method: 'POST',
    url: '/v1/reward',
    payload: { question: QUESTION, ground_truth: GROUND_TRUTH, candidates },
  });
  const read = async (name: string): Promise<number | undefined> =>
    (await f.metrics.registry.getSingleMetric(name)?.get())?.values.find(
      (v) => v.labels['graph'] === 'single-judge',
    )?.value;
  // Identical candidates are judged once (coalesced): 3 computed judgments, one of them rejected_input.
  expect(await counterValue(f.metrics.judgments)).toBe(3);
  expect(await read('reward_drift_accept_rate')).toBeCloseTo(1 / 3, 6);
  expect(await read('reward_drift_rejected_input_rate')).toBeCloseTo(1 / 3, 6);
  expect(await read('reward_drift_candidate_chars')).toBeCloseTo(
    (good.length + bad.length + 'Thought process:'.length) / 3,
    6,
  );
  expect(await read('reward_drift_length_reward_correlation')).toBeGreaterThan(0.9);
  const drift: Json = (await integrity(f.app)).drift;
  expect(drift).toEqual([
    expect.objectContaining({ graph: 'single-judge', acceptRate: expect.closeTo(1 / 3, 6) }),
  ]);
});
