/**
 * The priority lane (src/server/admission/priority.ts): high judgments wait ahead of queued normal ones, for a run
 * slot and for a backend slot, and have their own admission budget (HIGH_PRIORITY_SHARE).
 */
import { describe, expect, it } from 'vitest';

import { loadConfig } from '../../src/config.js';
import { getPreset } from '../../src/judge/presets.js';
import { Admission } from '../../src/server/admission/admission.js';
import { rankJudge } from '../fakes/comparative.js';
import { candidate, GROUND_TRUTH, QUESTION, useHarness } from './helpers.js';

const analysts2 = getPreset('default')!; // 3 calls, critical path 2

function setup(options: { maxConcurrent?: number; highShare?: number } = {}) {
  const clock = { t: 1_000_000 };
  const admission = new Admission({
    maxConcurrent: options.maxConcurrent ?? 512,
    maxQueued: 32_768,
    callSlots: 100,
    highShare: options.highShare,
    now: () => clock.t,
  });
  return { admission, clock };
}

describe('Admission: the high lane', () => {
  it('hands a freed run slot to the oldest high waiter before older normal ones', async () => {
    const { admission } = setup({ maxConcurrent: 1 });
    const signal = new AbortController().signal;
    const first = await admission.acquire(signal);
    const order: string[] = [];
    const normal = [1, 2, 3].map((i) =>
      admission.acquire(signal, 'normal').then((release) => {
        order.push(`normal-${i}`);
        release();
      }),
    );
    const high = admission.acquire(signal, 'high').then((release) => {
      order.push('high');
      release();
    });
    expect(admission.waiting).toBe(4);
    first();
    await Promise.all([...normal, high]);
    expect(order).toEqual(['high', 'normal-1', 'normal-2', 'normal-3']);
  });

  it('admits high work within HIGH_PRIORITY_SHARE of the drain rate and refuses a flood beyond it', () => {
    const { admission, clock } = setup({ highShare: 0.1 });
    // 100 calls/s (100 slots, 1 s assumed per call): the high lane gets 10 calls/s, 99 s × 10 = 990 calls.
    const horizonMs = 110_000;
    const batch = Array.from({ length: 300 }, () => analysts2); // 900 calls
    expect(admission.decide(batch, horizonMs, 'high').ok).toBe(true);
    for (const g of batch) admission.admit(g, 'high');
    // 900 + 120 calls > 990: refused until 30 calls have drained (3 s at 10 calls/s).
    const more = admission.decide(
      Array.from({ length: 40 }, () => analysts2),
      horizonMs,
      'high',
    );
    expect(more.ok).toBe(false);
    if (!more.ok) {
      expect(more.refusal.reason).toBe('priority');
      expect(more.refusal.waitS).toBeCloseTo(3, 5);
    }
    // Normal work is not held by the high lane's budget (its backlog still fits the deadline).
    expect(admission.decide([analysts2], horizonMs, 'normal').ok).toBe(true);
    // The bucket drains at 10 calls/s: after 60 s, 600 calls have left it.
    clock.t += 60_000;
    expect(
      admission.decide(
        Array.from({ length: 40 }, () => analysts2),
        horizonMs,
        'high',
      ).ok,
    ).toBe(true);
  });

  it('treats high as normal with HIGH_PRIORITY_SHARE=0 (the lane is off)', () => {
    const { admission } = setup({ highShare: 0 });
    const ticket = admission.admit(analysts2, 'high');
    expect(ticket.lane).toBe('normal');
    expect(admission.decide([analysts2], 110_000, 'high').ok).toBe(true);
  });

  it('always admits a high request when nothing high is in its bucket (one request is never refused forever)', () => {
    const { admission } = setup({ highShare: 0.01 });
    // 1 call/s share × 99 s = 99 calls of room, but nothing is in the bucket: a 900-call request passes.
    expect(
      admission.decide(
        Array.from({ length: 300 }, () => analysts2),
        110_000,
        'high',
      ).ok,
    ).toBe(true);
  });
});

describe('HIGH_PRIORITY_SHARE', () => {
  it('is a fraction in [0, 1], default 0.1', () => {
    expect(loadConfig({}).highPriorityShare).toBe(0.1);
    expect(loadConfig({ HIGH_PRIORITY_SHARE: '0.25' }).highPriorityShare).toBe(0.25);
    expect(() => loadConfig({ HIGH_PRIORITY_SHARE: '2' })).toThrow(/HIGH_PRIORITY_SHARE/);
    expect(() => loadConfig({ HIGH_PRIORITY_SHARE: ' ' })).toThrow(/HIGH_PRIORITY_SHARE/);
    expect(() => loadConfig({ CACHED_TOKEN_WEIGHT: '1e-1' })).toThrow(/CACHED_TOKEN_WEIGHT/);
    expect(loadConfig({ JUDGE_TOKEN_BUDGET: '5000', CACHED_TOKEN_WEIGHT: '0.1' }).tokenBudget).toEqual({
      tokens: 5000,
      windowS: 86_400,
      cachedWeight: 0.1,
    });
  });
});

describe('priority lane against the fake backend', () => {
  const start = useHarness();

  it('a high-priority judgment behind 200 queued normal judgments finishes within 3x its unloaded latency', async () => {
    // 16 backend slots, 40 ms per call: 200 judgments × 3 calls drain in ~1.5 s (more on a loaded machine).
    // Measured (2 runs): unloaded 101–104 ms, behind the step 138–158 ms (1.3–1.6×); a normal judgment sent
    // with it 2.1–2.4 s. With 300 queued and the backend-slot lane switched off: 842 ms (6×).
    const h = await start({
      fake: { latencyMs: 40 },
      env: { JUDGE_MAX_INFLIGHT: '16', JUDGE_PREFIX_STAGGER_MS: '0' },
    });
    const other = 'A different paper: we fine-tune a transformer with a masked-token objective on text.';
    const judge = (i: number, priority: 'high' | 'normal') =>
      h.app.inject({
        method: 'POST',
        url: '/v1/judge',
        payload: { question: QUESTION, ground_truth: other, candidate: candidate(10_000 + i), priority },
      });
    // Unloaded: warm up once, then take the median of 3.
    await judge(0, 'high');
    const unloaded: number[] = [];
    for (let i = 1; i <= 3; i++) {
      const t0 = performance.now();
      expect((await judge(i, 'high')).statusCode).toBe(200);
      unloaded.push(performance.now() - t0);
    }
    unloaded.sort((a, b) => a - b);
    const unloadedMs = unloaded[1]!;

    const step = h.app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: {
        question: QUESTION,
        ground_truth: GROUND_TRUTH,
        candidates: Array.from({ length: 200 }, (_, i) => candidate(i)),
      },
    });
    await h.fake.waitForCalls(h.fake.callCount + 64);
    const callsBefore = h.fake.callCount;
    const t0 = performance.now();
    const [high, normal] = await Promise.all([
      judge(100, 'high').then((r) => ({ r, ms: performance.now() - t0, calls: h.fake.callCount })),
      judge(101, 'normal').then((r) => ({ r, ms: performance.now() - t0 })),
    ]);
    expect(high.r.statusCode).toBe(200);
    expect(high.r.json<{ status: string }>().status).toBe('ok');
    const stepAnswer = await step;
    expect(stepAnswer.statusCode).toBe(200);
    // The step was still queued when the high judgment finished: most of its 600 calls came after.
    expect(high.calls - callsBefore).toBeLessThan(200);
    expect(high.ms).toBeLessThan(3 * unloadedMs + 50);
    // A normal judgment sent at the same moment waits behind the step (the lane is what made the difference).
    expect(normal.ms).toBeGreaterThan(5 * high.ms);
  });

  it('refuses a flood of high requests beyond HIGH_PRIORITY_SHARE while a normal step is admitted and served', async () => {
    // 2 s deadline: the high lane's room is 0.1 × drain × 1.8 s (40–100 calls at 16 slots / 30–70 ms); each
    // high request is 30 calls. Measured: 1 of 12 admitted (the first: an empty bucket), 11 refused.
    const h = await start({
      fake: { latencyMs: 20 },
      env: { JUDGE_MAX_INFLIGHT: '16', REQUEST_DEADLINE_MS: '2000', HIGH_PRIORITY_SHARE: '0.1' },
    });
    const other = 'A different paper: we fine-tune a transformer with a masked-token objective on text.';
    // Warm-up: the unloaded call latency sets the drain rate.
    for (let i = 0; i < 2; i++)
      await h.app.inject({
        method: 'POST',
        url: '/v1/judge',
        payload: { ground_truth: other, candidate: candidate(20_000 + i) },
      });
    const flood = Array.from({ length: 12 }, (_, k) =>
      h.app.inject({
        method: 'POST',
        url: '/v1/reward',
        payload: {
          ground_truth: other,
          candidates: Array.from({ length: 10 }, (_, i) => candidate(30_000 + 10 * k + i)),
          priority: 'high',
        },
      }),
    );
    const step = h.app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: {
        question: QUESTION,
        ground_truth: GROUND_TRUTH,
        candidates: Array.from({ length: 60 }, (_, i) => candidate(i)),
      },
    });
    const floods = await Promise.all(flood);
    const refused = floods.filter((r) => r.statusCode === 503);
    expect(floods.length - refused.length).toBeGreaterThanOrEqual(1);
    expect(refused.length).toBeGreaterThanOrEqual(6);
    for (const r of refused) {
      expect(r.json<{ code: string; details: { reason: string } }>()).toMatchObject({
        code: 'RW_OVERLOADED',
        details: { reason: 'priority' },
      });
      expect(Number(r.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    }
    const stepAnswer = await step;
    expect(stepAnswer.statusCode).toBe(200);
    expect(stepAnswer.json<{ rewards: Array<number | null> }>().rewards.every((r) => r !== null)).toBe(true);
  });

  it('takes priority on the comparative routes and x-reward-priority on the group adapters', async () => {
    const h = await start({ fake: { fallback: rankJudge } });
    const ideas = [0, 1, 2].map(
      (r) => `Idea with RANK${r}: train paired encoders with a contrastive objective.`,
    );
    const ranked = await h.app.inject({
      method: 'POST',
      url: '/v1/rank',
      payload: { question: QUESTION, ground_truth: GROUND_TRUTH, candidates: ideas, priority: 'high' },
    });
    expect(ranked.statusCode).toBe(200);
    expect(ranked.json<{ comparisons: { ok: number } }>().comparisons.ok).toBe(3);
    const group = await h.app.inject({
      method: 'POST',
      url: '/slime/rank',
      headers: { 'x-reward-priority': 'high' },
      payload: { samples: ideas.map((response) => ({ prompt: QUESTION, response, label: GROUND_TRUTH })) },
    });
    expect(group.statusCode).toBe(200);
    const bad = await h.app.inject({
      method: 'POST',
      url: '/slime/rank',
      headers: { 'x-reward-priority': 'soon' },
      payload: { samples: ideas.map((response) => ({ prompt: QUESTION, response, label: GROUND_TRUTH })) },
    });
    expect(bad.statusCode).toBe(400);
  });

  it('takes x-reward-priority on the adapters and refuses an invalid value with 400', async () => {
    const h = await start();
    const ok = await h.app.inject({
      method: 'POST',
      url: '/slime',
      headers: { 'x-reward-priority': 'high' },
      payload: { prompt: QUESTION, response: candidate(0), label: GROUND_TRUTH },
    });
    expect(ok.statusCode).toBe(200);
    const bad = await h.app.inject({
      method: 'POST',
      url: '/slime',
      headers: { 'x-reward-priority': 'urgent' },
      payload: { prompt: QUESTION, response: candidate(0), label: GROUND_TRUTH },
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json<{ code: string }>().code).toBe('RW_BAD_REQUEST');
    const body = await h.app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: { ground_truth: GROUND_TRUTH, candidates: [candidate(0)], priority: 'urgent' },
    });
    expect(body.statusCode).toBe(400);
  });
});
