import { readFile } from 'node:fs/promises';
import { request as httpRequest, type ClientRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';

import { afterEach, describe, expect, it } from 'vitest';

import { REJECTION_REASONS } from '../../src/judge/degenerate.js';
import { createFileTranscriptSink } from '../../src/server/observe/transcripts.js';
import { comparisonReply, positionAJudge, rankJudge, shownIdeas } from '../fakes/comparative.js';
import type { FakeChatRequest, FakeReply } from '../fakes/openai.js';
import { useTempDirs } from '../support/temp-dirs.js';
import {
  candidate,
  counterValue,
  GROUND_TRUTH,
  logLines,
  offlineApp,
  QUESTION,
  useHarness,
  waitFor,
  type Harness,
} from './helpers.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- response bodies are checked field by field
type Json = any;

/** Six ideas whose RANK markers (3,1,5,0,4,2) give a known total order: best first 2, 4, 0, 5, 1, 3. */
const IDEAS = [3, 1, 5, 0, 4, 2].map(
  (rank, k) =>
    `Idea ${k} with RANK${rank}: train paired encoders with a contrastive objective, variant ${k}.`,
);
const ORDER = [2, 4, 0, 5, 1, 3];

// Removed after the harness (which writes the transcripts into them) has closed.
const tempDir = useTempDirs('rank-');
const harness = useHarness();
const open: ClientRequest[] = [];
afterEach(() => {
  for (const req of open.splice(0)) req.destroy();
});

async function rank(on: Harness, body: Record<string, unknown>, url = '/v1/rank') {
  const res = await on.app.inject({
    method: 'POST',
    url,
    payload: { question: QUESTION, ground_truth: GROUND_TRUTH, candidates: IDEAS, ...body },
  });
  return { status: res.statusCode, body: res.json<Json>(), headers: res.headers };
}

describe('POST /v1/rank', () => {
  it('ranks 6 candidates with all_pairs in exactly 30 calls, scores monotone in the known order', async () => {
    const h = await harness({ fake: { fallback: rankJudge } });
    const { status, body } = await rank(h, {});
    expect(status).toBe(200);
    expect(h.fake.callCount).toBe(30);
    expect(body.calls).toBe(30);
    expect(body.usage.calls).toBe(30);
    expect(body.comparisons).toEqual({ scheduled: 15, ok: 15, failed: 0, cached: 0 });
    expect(body.ranking).toEqual(ORDER);
    const ordered = ORDER.map((k) => body.scores[k]);
    for (let k = 1; k < ordered.length; k++) expect(ordered[k]).toBeLessThan(ordered[k - 1]);
    expect(body.rewards).toEqual(body.scores);
    expect(body.position_bias).toEqual({ events: 0, judged: 15, rate: 0 });
    expect(body.results[2]).toMatchObject({ index: 2, rank: 1, wins: 5, losses: 0, ties: 0, failed: 0 });
    for (const [lo, hi] of body.ci) {
      expect(lo).toBeGreaterThanOrEqual(0);
      expect(hi).toBeLessThanOrEqual(1);
      expect(lo).toBeLessThanOrEqual(hi);
    }
    expect(body.pairs).toHaveLength(15);
    expect(body.pairs[0]).toMatchObject({
      i: 0,
      j: 1,
      winner: 0,
      status: 'ok',
      orders: { i_first: 0, j_first: 0 },
    });
    expect(body).toMatchObject({
      schedule: 'all_pairs',
      criterion: 'match',
      method: 'bradley_terry',
      judges: 1,
    });
    expect(body.backend).toBe('openai-compatible');
    expect(body.prompt_version).toMatch(/^[0-9a-f]{12}$/);
  });

  it('uses 2G = 12 calls with the circular schedule and ceil(log2 G) rounds with swiss', async () => {
    const h = await harness({ fake: { fallback: rankJudge } });
    const circular = await rank(h, { schedule: 'circular' });
    expect(h.fake.callCount).toBe(12);
    expect(circular.body.comparisons.scheduled).toBe(6);
    // Circular pairs neighbours only: 0, 2 and 4 each win both their comparisons and lead the ranking.
    expect(new Set(circular.body.ranking.slice(0, 3))).toEqual(new Set([0, 2, 4]));
    const swiss = await rank(h, { schedule: 'swiss', candidates: IDEAS.map((i) => `${i} (swiss)`) });
    expect(swiss.body.comparisons.scheduled).toBeLessThanOrEqual(9);
    expect(new Set(swiss.body.pairs.map((p: Json) => p.round))).toEqual(new Set([1, 2, 3]));
    expect(swiss.body.ranking[0]).toBe(2);
  });

  it('with a judge that always answers position A: position-bias rate 1, every pair a tie, equal scores', async () => {
    const h = await harness({ fake: { fallback: positionAJudge } });
    const { body } = await rank(h, {});
    expect(body.position_bias).toEqual({ events: 15, judged: 15, rate: 1 });
    expect(new Set(body.scores)).toEqual(new Set([0.5]));
    expect(body.pairs.every((p: Json) => p.winner === 'tie' && p.position_bias)).toBe(true);
    // Deterministic tie rule: equal scores and wins, so the lower index ranks first.
    expect(body.ranking).toEqual([0, 1, 2, 3, 4, 5]);
    expect(await counterValue(h.metrics.positionBiasEvents, { criterion: 'match' })).toBe(15);
  });

  it('drops a comparison that fails after retries (never a loss); a candidate left with none makes the group no reward', async () => {
    const h = await harness({
      env: { JUDGE_MAX_RETRIES: '1' },
      // Calls that meet the circuit opened by RANK0's failures wait 50 ms for it, not the production 5 s.
      breaker: { openMs: 50 },
      fake: {
        fallback: (b: FakeChatRequest): FakeReply =>
          JSON.stringify(b.messages).includes('RANK0') ? { kind: 'status', status: 500 } : rankJudge(b),
      },
    });
    const { status, body } = await rank(h, { reward_mode: 'top_k', top_k: 2 });
    expect(status).toBe(200);
    expect(body.results[3]).toMatchObject({ rank: null, wins: 0, losses: 0, ties: 0, failed: 5 });
    expect(body.comparisons).toMatchObject({ scheduled: 15, ok: 10, failed: 5 });
    expect(body.ranking).toEqual(ORDER);
    // Without candidate 3 nobody knows who the best two are: no reward for the group (not [0, 0, 1, null, 1, 0]).
    expect(body.rewards).toEqual([null, null, null, null, null, null]);
    expect(body.scores).toEqual([null, null, null, null, null, null]);
    expect(body.results.map((r: Json) => r.status)).toEqual(Array(6).fill('judge_error'));
    const failed = body.pairs.filter((p: Json) => p.status === 'judge_error');
    expect(failed).toHaveLength(5);
    expect(failed.every((p: Json) => p.winner === null && p.error_code === 'RW_JUDGE_UNAVAILABLE')).toBe(
      true,
    );
    expect(await counterValue(h.metrics.comparisons, { status: 'judge_error' })).toBe(5);
  });

  it('computes each pair once: a repeat (in any candidate order) is answered from the cache', async () => {
    const h = await harness({ fake: { fallback: rankJudge } });
    const first = await rank(h, {});
    const again = await rank(h, { candidates: [...IDEAS].reverse() });
    expect(h.fake.callCount).toBe(30);
    expect(again.body.comparisons.cached).toBe(15);
    expect(again.body.usage.calls).toBe(0);
    expect(again.body.calls).toBe(30);
    // The reversed group gets the mirrored answers: the same candidates in the same order.
    expect(again.body.ranking.map((k: number) => 5 - k)).toEqual(first.body.ranking);
    expect(await counterValue(h.metrics.comparisonCacheLookups, { result: 'hit' })).toBe(15);
  });

  it('coalesces two identical concurrent requests into one set of comparisons', async () => {
    const h = await harness({ fake: { latencyMs: 30, fallback: rankJudge } });
    const [a, b] = await Promise.all([rank(h, {}), rank(h, {})]);
    expect(a.status).toBe(200);
    expect(b.body.ranking).toEqual(a.body.ranking);
    expect(h.fake.callCount).toBe(30);
    expect(await counterValue(h.metrics.comparisonCacheLookups, { result: 'coalesced' })).toBe(15);
  });

  it('asks several judges per order: 2 × judges calls per pair', async () => {
    const h = await harness({ fake: { fallback: rankJudge } });
    const { body } = await rank(h, { candidates: IDEAS.slice(0, 3), judges: 3 });
    expect(h.fake.callCount).toBe(3 * 2 * 3);
    expect(body.calls).toBe(18);
    expect(body.judges).toBe(3);
  });

  it('validates: criterion needed without ground truth, match needs one, 2+ candidates, known keys', async () => {
    const h = await harness({ fake: { fallback: rankJudge } });
    const noGt = await h.app.inject({ method: 'POST', url: '/v1/rank', payload: { candidates: IDEAS } });
    expect(noGt.statusCode).toBe(400);
    expect(noGt.json()).toMatchObject({ code: 'RW_BAD_REQUEST' });
    expect(noGt.json().message).toContain('criterion: required when there is no ground_truth');
    const match = await h.app.inject({
      method: 'POST',
      url: '/v1/rank',
      payload: { candidates: IDEAS, criterion: 'match' },
    });
    expect(match.json().message).toContain('ground_truth: required by criterion "match"');
    const one = await rank(h, { candidates: [IDEAS[0]] });
    expect(one.status).toBe(400);
    const unknown = await rank(h, { schedule: 'round_robin' });
    expect(unknown.status).toBe(400);
    const extra = await rank(h, { colour: 'blue' });
    expect(extra.body.message).toContain('colour: unknown key');
    const topK = await rank(h, { top_k: 2 });
    expect(topK.body.message).toContain('top_k: only with reward_mode "top_k"');
    expect(h.fake.callCount).toBe(0);
  });

  it('ranks on a named criterion without ground truth (novelty), prompting without it', async () => {
    const h = await harness({ fake: { fallback: rankJudge } });
    const res = await h.app.inject({
      method: 'POST',
      url: '/v1/rank',
      payload: { question: QUESTION, candidates: IDEAS.slice(0, 3), criterion: 'novelty' },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().criterion).toBe('novelty');
    const user = h.fake.calls[0]!.body.messages!.find((m) => m.role === 'user')!.content;
    expect(user).toContain('No ground truth is given');
    expect(h.fake.calls[0]!.body.messages![0]!.content).toContain('Criterion: novelty');
  });

  it('refuses a schedule over MAX_RANK_CALLS with 400 RW_TOO_MANY_COMPARISONS before any call', async () => {
    const h = await harness({ env: { MAX_RANK_CALLS: '20' }, fake: { fallback: rankJudge } });
    const all = await rank(h, {});
    expect(all.status).toBe(400);
    expect(all.body).toMatchObject({
      code: 'RW_TOO_MANY_COMPARISONS',
      details: { planned_calls: 30, limit: 20 },
    });
    expect(h.fake.callCount).toBe(0);
    const circular = await rank(h, { schedule: 'circular' });
    expect(circular.status).toBe(200);
  });

  it('refuses the whole request with 503 RW_OVERLOADED + Retry-After when its comparisons do not fit', async () => {
    const h = await harness({
      env: { MAX_CONCURRENT_JUDGMENTS: '2', MAX_QUEUED_JUDGMENTS: '14' },
      fake: { fallback: { kind: 'slow', ms: 300, then: comparisonReply('A') } },
    });
    const app = h.app;
    const busy = app.inject({
      method: 'POST',
      url: '/v1/rank',
      payload: { ground_truth: GROUND_TRUTH, candidates: IDEAS.slice(0, 4) },
    });
    await waitFor(() => h.fake.inflight() > 0, 'the first ranking to reach the backend');
    const refused = await rank(h, {});
    expect(refused.status).toBe(503);
    expect(refused.body.code).toBe('RW_OVERLOADED');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect((await busy).statusCode).toBe(200);
  });

  it('refuses a ranking like a judgment: the same details, reward_admission_refusals_total and the admission warning', async () => {
    const log = logLines();
    const h = await harness({
      env: { MAX_CONCURRENT_JUDGMENTS: '1', MAX_QUEUED_JUDGMENTS: '1' },
      fake: { fallback: { kind: 'hang' } },
      logger: { level: 'info', stream: log.stream },
    });
    const { app, fake } = h;
    // One judgment running, one waiting for the run slot: the queue (memory bound) is full.
    const busy = app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: { question: QUESTION, ground_truth: GROUND_TRUTH, candidates: [candidate(0), candidate(1)] },
    });
    await waitFor(() => fake.inflight() === 2, 'the first judgment to run');
    const warnings = () => log.lines.filter((l) => String(l['msg']).startsWith('admission:'));

    const ranked = await rank(h, { candidates: IDEAS.slice(0, 2) });
    expect(ranked.status).toBe(503);
    expect(ranked.body.code).toBe('RW_OVERLOADED');
    expect(await counterValue(h.metrics.admissionRefusals, { reason: 'memory' })).toBe(1);
    expect(warnings()).toHaveLength(1);
    expect(warnings()[0]).toMatchObject({ level: 40, reason: 'memory', queued_judgments: 1 });

    const judged = await app.inject({
      method: 'POST',
      url: '/v1/reward',
      payload: { question: QUESTION, ground_truth: GROUND_TRUTH, candidates: [candidate(2)] },
    });
    expect(judged.statusCode).toBe(503);
    const judgedDetails = judged.json<Json>().details;
    expect(Object.keys(ranked.body.details).sort()).toEqual(Object.keys(judgedDetails).sort());
    expect(ranked.body.details).toMatchObject({
      reason: 'memory',
      retry_after_s: judgedDetails.retry_after_s,
      predicted_wait_s: judgedDetails.predicted_wait_s,
      drain_calls_per_s: judgedDetails.drain_calls_per_s,
      needed_calls_per_s: expect.any(Number),
    });
    expect(ranked.headers['retry-after']).toBe(String(ranked.body.details.retry_after_s));
    expect(await counterValue(h.metrics.admissionRefusals, { reason: 'memory' })).toBe(2);
    // One rate-limited line for both kinds of refusal (at most one per 10 s).
    expect(warnings()).toHaveLength(1);
    // Neither refused request reached the backend.
    expect(fake.callCount).toBe(2);
    await fake.close();
    expect((await busy).json<Json>().rewards).toEqual([null, null]);
  });

  it('answers 200 with null scores (timeout, never 0) when the backend hangs past the deadline', async () => {
    const h = await harness({ env: { REQUEST_DEADLINE_MS: '300' }, fake: { fallback: { kind: 'hang' } } });
    const { status, body } = await rank(h, { candidates: IDEAS.slice(0, 3) });
    expect(status).toBe(200);
    expect(body.scores).toEqual([null, null, null]);
    expect(body.rewards).toEqual([null, null, null]);
    expect(body.pairs.every((p: Json) => p.status === 'timeout' && p.error_code === 'RW_JUDGE_TIMEOUT')).toBe(
      true,
    );
  });

  it('answers a malformed judge reply (twice) as a failed pair with RW_JUDGE_UNPARSABLE', async () => {
    const h = await harness({ fake: { fallback: { kind: 'text', text: 'A, clearly.' } } });
    const { body } = await rank(h, { candidates: IDEAS.slice(0, 2) });
    expect(body.pairs[0]).toMatchObject({
      status: 'judge_error',
      winner: null,
      error_code: 'RW_JUDGE_UNPARSABLE',
    });
    expect(body.scores).toEqual([null, null]);
    // Each order: one reply and one re-ask.
    expect(h.fake.callCount).toBeLessThanOrEqual(4);
  });

  it('refuses an oversized body with 413 RW_PAYLOAD_TOO_LARGE', async () => {
    const h = await harness({ env: { BODY_LIMIT_BYTES: '2048' }, fake: { fallback: rankJudge } });
    const { status, body } = await rank(h, { candidates: [IDEAS[0], 'x'.repeat(4000)] });
    expect(status).toBe(413);
    expect(body.code).toBe('RW_PAYLOAD_TOO_LARGE');
    expect(h.fake.callCount).toBe(0);
  });

  it('decides a degenerate candidate without calls: it loses to every idea, the schedule compares the ideas', async () => {
    const h = await harness({ fake: { fallback: rankJudge } });
    const { body } = await rank(h, { candidates: [IDEAS[0], 'Thought process:', IDEAS[1]] });
    expect(h.fake.callCount).toBe(2);
    expect(body.results[1]).toMatchObject({
      status: 'rejected_input',
      reason: 'master_key_filler',
      wins: 0,
      losses: 2,
      rank: 3,
      reward: 0,
    });
    // The one comparison played is between the two ideas; the filler's losses are decided by rule.
    expect(body.pairs).toHaveLength(1);
    expect(body.pairs[0]).toMatchObject({ i: 0, j: 2, status: 'ok' });
    expect(body.position_bias.judged).toBe(1);
  });

  it('plays a circular schedule among the ideas: fillers between them do not keep them apart', async () => {
    const h = await harness({ fake: { fallback: rankJudge } });
    // Circular over all four would compare each idea with fillers only, never with the other idea.
    const { body } = await rank(h, {
      candidates: [IDEAS[0], ':', IDEAS[2], '...'],
      schedule: 'circular',
      reward_mode: 'top_k',
      top_k: 1,
    });
    expect(body.pairs.map((p: Json) => [p.i, p.j])).toEqual([[0, 2]]);
    // IDEAS[2] has RANK5, IDEAS[0] RANK3: the better idea gets the one reward.
    expect(body.rewards).toEqual([0, 0, 1, 0]);
  });

  it('cancels the comparisons of a client that disconnects', async () => {
    const h = await harness({ fake: { fallback: { kind: 'hang' } } });
    await h.app.listen({ port: 0, host: '127.0.0.1' });
    const port = (h.app.server.address() as AddressInfo).port;
    const payload = JSON.stringify({ ground_truth: GROUND_TRUTH, candidates: IDEAS.slice(0, 2) });
    const req = httpRequest({
      host: '127.0.0.1',
      port,
      path: '/v1/rank',
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
    });
    req.on('error', () => undefined);
    open.push(req);
    req.end(payload);
    const fake = h.fake;
    await waitFor(() => fake.inflight() === 2, 'both orders in flight');
    req.destroy();
    await waitFor(() => fake.inflight() === 0, 'the calls to be cancelled');
    expect(fake.calls.map((c) => c.outcome)).toEqual(['client_closed', 'client_closed']);
  });

  it('writes one transcript line per computed comparison and declares its metrics', async () => {
    const dir = await tempDir();
    const path = join(dir, 'transcripts.jsonl');
    const sink = await createFileTranscriptSink(path);
    const h = await harness({ fake: { fallback: rankJudge }, transcripts: sink });
    await rank(h, { candidates: IDEAS.slice(0, 3), request_id: 'rank-1' });
    await rank(h, { candidates: IDEAS.slice(0, 3) });
    await sink.close();
    const lines = (await readFile(path, 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatchObject({
      kind: 'comparison',
      request_id: 'rank-1',
      criterion: 'match',
      status: 'ok',
    });
    expect(lines[0].votes).toHaveLength(2);
    const text = (await h.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(text).toContain('reward_comparisons_total{criterion="match",status="ok"} 3');
    expect(text).toContain('reward_comparison_cache_lookups_total{result="hit"} 3');
    expect(text).toMatch(/reward_rank_position_bias_rate_count\{route="\/v1\/rank",criterion="match"\} 2/);
    expect(text).toContain('reward_llm_calls_total{role="comparison",model="fake-model",outcome="ok"} 6');
    expect(text).toMatch(/reward_comparison_duration_seconds_count\{criterion="match"\} 3/);
  });

  it('records the backend-reported cached prompt tokens in each comparison transcript line', async () => {
    const dir = await tempDir();
    const path = join(dir, 'transcripts.jsonl');
    const sink = await createFileTranscriptSink(path);
    const h = await harness({ fake: { fallback: rankJudge, blockCache: true }, transcripts: sink });
    const { body } = await rank(h, { candidates: IDEAS.slice(0, 4) });
    await sink.close();
    const lines = (await readFile(path, 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines).toHaveLength(6);
    const cached = lines.map((l) => l.usage.cached_prompt_tokens);
    expect(cached.every((c) => typeof c === 'number')).toBe(true);
    // The comparisons share the system prompt and question: later ones are served partly from cache.
    expect(body.usage.cached_prompt_tokens).toBeGreaterThan(0);
    expect(cached.reduce((a, c) => a + c, 0)).toBe(body.usage.cached_prompt_tokens);
  });

  it('runs on the offline backend and says so', async () => {
    const { app } = offlineApp();
    const res = await app.inject({
      method: 'POST',
      url: '/v1/rank',
      payload: {
        question: QUESTION,
        ground_truth: GROUND_TRUTH,
        candidates: [
          'Align image and text encoders with a symmetric contrastive InfoNCE loss over large batches of paired web data.',
          'Fine-tune a convolutional network on ImageNet with heavy data augmentation and label smoothing.',
        ],
      },
    });
    await app.close();
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ backend: 'offline', ranking: [0, 1] });
  });
});

describe('POST /v1/best-of-n', () => {
  it('picks the tournament winner with the deterministic tie rule, and scores behind it', async () => {
    const h = await harness({ fake: { fallback: rankJudge } });
    const { body } = await rank(h, { criterion: 'match' }, '/v1/best-of-n');
    expect(body).toMatchObject({
      best_index: 2,
      method: 'tournament',
      criterion: 'match',
      schedule: 'all_pairs',
    });
    expect(body.scores).toHaveLength(6);
    expect(h.fake.callCount).toBe(30);
    h.fake.setScript([], positionAJudge);
    const ties = await rank(h, { criterion: 'novelty', candidates: IDEAS.slice(0, 3) }, '/v1/best-of-n');
    expect(ties.body.best_index).toBe(0);
  });

  it('method pick: one call over all candidates (the paper\'s "most novel" prompt)', async () => {
    const h = await harness({
      fake: {
        fallback: (b: FakeChatRequest): FakeReply => {
          const ideas = shownIdeas(b);
          const best = ideas.findIndex((i) => i.includes('RANK5'));
          return { kind: 'json', body: { reasoning: 'r', best: best + 1, confidence: 0.7 } };
        },
      },
    });
    const { body } = await rank(h, { criterion: 'novelty', method: 'pick' }, '/v1/best-of-n');
    expect(body).toMatchObject({
      best_index: 2,
      method: 'pick',
      scores: null,
      status: 'ok',
      confidence: 0.7,
      calls: 1,
    });
    expect(h.fake.callCount).toBe(1);
    expect(h.fake.calls[0]!.body.response_format?.json_schema?.name).toBe('pick');
    expect(shownIdeas(h.fake.calls[0]!.body)).toEqual(IDEAS);
  });

  it('needs no call for one candidate, and returns null (never a guess) when the pick fails', async () => {
    const h = await harness({ fake: { fallback: { kind: 'status', status: 500 } } });
    const one = await rank(h, { criterion: 'novelty', candidates: [IDEAS[0]] }, '/v1/best-of-n');
    expect(one.body).toMatchObject({ best_index: 0, calls: 0 });
    const failed = await rank(h, { criterion: 'novelty', method: 'pick' }, '/v1/best-of-n');
    expect(failed.status).toBe(200);
    expect(failed.body).toMatchObject({
      best_index: null,
      status: 'judge_error',
      error_code: 'RW_JUDGE_UNAVAILABLE',
    });
    const neither = await rank(h, { ground_truth: undefined }, '/v1/best-of-n');
    expect(neither.status).toBe(400);
    expect(neither.body.details.map((d: Json) => d.path)).toEqual(['criterion']);
  });

  it('a single degenerate candidate: no best (null), the reason per candidate, counted like any rejection', async () => {
    const h = await harness({ fake: { fallback: rankJudge } });
    const { body } = await rank(h, { candidates: ['Thought process:'] }, '/v1/best-of-n');
    expect(body).toMatchObject({ best_index: null, calls: 0, reason: 'the only candidate is degenerate' });
    expect(await counterValue(h.metrics.rejectedInputs, { reason: 'master_key_filler' })).toBe(1);
    expect(body.results).toEqual([{ index: 0, status: 'rejected_input', reason: 'master_key_filler' }]);
    const real = await rank(h, { candidates: [IDEAS[0]] }, '/v1/best-of-n');
    expect(real.body).toMatchObject({ best_index: 0, results: [{ index: 0, status: 'ok' }] });
    expect(await counterValue(h.metrics.rejectedInputs)).toBe(1);
    expect(h.fake.callCount).toBe(0);
  });

  it('takes the body /v1/rank takes: with a ground truth and no criterion it judges on match', async () => {
    const h = await harness({ fake: { fallback: rankJudge } });
    const ranked = await rank(h, { candidates: IDEAS.slice(0, 3) });
    const best = await rank(h, { candidates: IDEAS.slice(0, 3) }, '/v1/best-of-n');
    expect(best.status).toBe(200);
    expect(best.body).toMatchObject({ best_index: ranked.body.ranking[0], criterion: 'match' });
    // The same pairs on the same criterion: best-of-n is answered from /v1/rank's comparisons.
    expect(best.body.comparisons).toMatchObject({ scheduled: 3, cached: 3 });
    const picked = await rank(h, { candidates: [IDEAS[0]] }, '/v1/best-of-n');
    expect(picked.body).toMatchObject({ best_index: 0, criterion: 'match' });
  });
});

describe('group adapters', () => {
  const prompts = ['<|im_start|>user\nQ one?<|im_end|>\n', '<|im_start|>user\nQ two?<|im_end|>\n'];
  // Two interleaved groups of 3 rollouts: prompt 0 at items 0, 2, 4 (RANK 1, 3, 2), prompt 1 at 1, 3, 5 (RANK 2, 0, 1).
  const rows = [
    [0, 1],
    [1, 2],
    [0, 3],
    [1, 0],
    [0, 2],
    [1, 1],
  ].map(([p, r]) => ({
    prompt: prompts[p!]!,
    response: `A rollout with RANK${r}: contrastive encoders, variant ${p}.`,
  }));

  it('OpenRLHF /get_reward/rank: ranks each prompt group and answers per rollout, in input order', async () => {
    const h = await harness({ fake: { fallback: rankJudge } });
    const res = await h.app.inject({
      method: 'POST',
      url: '/get_reward/rank?schedule=all_pairs&reward_mode=top_k&top_k=1',
      payload: {
        query: rows.map((r) => r.prompt + r.response),
        prompts: rows.map((r) => r.prompt),
        labels: rows.map(() => GROUND_TRUTH),
      },
    });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(h.fake.callCount).toBe(2 * 3 * 2);
    expect(body.rewards).toEqual([0, 1, 1, 0, 0, 0]);
    expect(body.scores[2]).toBeGreaterThan(body.scores[4]);
    expect(Object.keys(body.extra_logs).sort()).toEqual(
      [
        'cancelled',
        'comparisons_failed',
        'group_size',
        'judge_failed',
        'position_bias_rate',
        'wins',
        'rejected_input',
        ...REJECTION_REASONS.map((r) => `rejected_${r}`),
      ].sort(),
    );
    expect(body.extra_logs.rejected_input).toEqual([0, 0, 0, 0, 0, 0]);
    expect(body.extra_logs.group_size).toEqual([3, 3, 3, 3, 3, 3]);
    expect(body.extra_logs.wins).toEqual([0, 2, 2, 0, 1, 1]);
  });

  it('OpenRLHF: 503 RW_JUDGE_FAILED for the group of a rollout without any comparison, FAILURE_REWARD instead when set; 400 for a lone rollout', async () => {
    const fail = (b: FakeChatRequest): FakeReply =>
      JSON.stringify(b.messages).includes('RANK3') ? { kind: 'status', status: 500 } : rankJudge(b);
    const payload = {
      query: rows.map((r) => r.prompt + r.response),
      prompts: rows.map((r) => r.prompt),
      labels: rows.map(() => GROUND_TRUTH),
    };
    const h = await harness({ fake: { fallback: fail } });
    const refused = await h.app.inject({ method: 'POST', url: '/get_reward/rank', payload });
    expect(refused.statusCode).toBe(503);
    // Rollout 2 (RANK3) has no comparison: its group (rollouts 0, 2, 4) has no reward, the other group does.
    expect(refused.json().code).toBe('RW_JUDGE_FAILED');
    expect(refused.json().details.failed.map((f: Json) => f.index)).toEqual([0, 2, 4]);
    const lone = await h.app.inject({
      method: 'POST',
      url: '/get_reward/rank',
      payload: { query: [rows[0]!.response], labels: [GROUND_TRUTH] },
    });
    expect(lone.statusCode).toBe(400);
    expect(lone.json().message).toContain('single rollout');
    const withFallback = await harness({ env: { FAILURE_REWARD: '0.25' }, fake: { fallback: fail } });
    const fallback = await withFallback.app.inject({ method: 'POST', url: '/get_reward/rank', payload });
    expect(fallback.statusCode).toBe(200);
    const rewards = fallback.json().rewards;
    expect([rewards[0], rewards[2], rewards[4]]).toEqual([0.25, 0.25, 0.25]);
    expect(rewards[1]).toBeGreaterThan(rewards[5]);
    expect(rewards[5]).toBeGreaterThan(rewards[3]);
    expect(fallback.json().extra_logs.judge_failed).toEqual([1, 0, 1, 0, 1, 0]);
  });

  it('OpenRLHF /get_reward/rank asks about the last user turn, as /slime/rank does (the same comparisons)', async () => {
    const system = 'SYSTEMTEXT: you are a helpful assistant.';
    const chat = `<|im_start|>system\n${system}<|im_end|>\n<|im_start|>user\nQ one?<|im_end|>\n<|im_start|>assistant\n`;
    const group = rows.filter((_, k) => k % 2 === 0);
    const h = await harness({ fake: { fallback: rankJudge } });
    const openrlhf = await h.app.inject({
      method: 'POST',
      url: '/get_reward/rank',
      payload: {
        query: group.map((r) => chat + r.response),
        prompts: group.map(() => chat),
        labels: group.map(() => GROUND_TRUTH),
      },
    });
    expect(openrlhf.statusCode).toBe(200);
    expect(h.fake.callCount).toBe(6);
    expect(h.fake.calls.some((c) => JSON.stringify(c.body.messages).includes('SYSTEMTEXT'))).toBe(false);
    const slime = await h.app.inject({
      method: 'POST',
      url: '/slime/rank',
      payload: {
        samples: group.map((r) => ({ prompt: chat, response: r.response, label: GROUND_TRUTH })),
      },
    });
    expect(slime.json().rewards).toEqual(openrlhf.json().rewards);
    // Same question, same pairs: every comparison came from the cache.
    expect(h.fake.callCount).toBe(6);
  });

  it('OpenRLHF /get_reward/rank names the query that does not start with its prompt', async () => {
    const h = await harness({ fake: { fallback: rankJudge } });
    const res = await h.app.inject({
      method: 'POST',
      url: '/get_reward/rank',
      payload: {
        query: [rows[0]!.prompt + rows[0]!.response, rows[2]!.response],
        prompts: [rows[0]!.prompt, rows[2]!.prompt],
        labels: [GROUND_TRUTH, GROUND_TRUTH],
      },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'RW_PROMPT_MISMATCH', details: { index: 1 } });
    expect(res.json().message).toContain('query[1]');
    expect(h.fake.callCount).toBe(0);
  });

  it('slime /slime/rank: a --group-rm group of samples gets one reward per sample', async () => {
    const h = await harness({ fake: { fallback: rankJudge } });
    const res = await h.app.inject({
      method: 'POST',
      url: '/slime/rank',
      payload: {
        samples: rows
          .filter((_, k) => k % 2 === 0)
          .map((r) => ({
            prompt: [{ role: 'user', content: 'Q one?' }],
            response: r.response,
            label: GROUND_TRUTH,
          })),
      },
    });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.rewards).toHaveLength(3);
    expect(body.rewards[1]).toBeGreaterThan(body.rewards[2]);
    expect(body.rewards[2]).toBeGreaterThan(body.rewards[0]);
    expect(body.results[1]).toMatchObject({ rank: 1, wins: 2, judge_failed: false });
    expect(body.position_bias).toEqual([{ events: 0, judged: 3, rate: 0 }]);
  });

  describe('say why a rollout was rejected, per item', () => {
    // Group of 4 (one prompt): two ideas, a filler and a reasoning trace that never closed; plus a second
    // prompt's group of 2 ideas, so the reasons land on the right items across groups.
    const chat = prompts[0]!;
    const rollouts = [
      { prompt: chat, response: rows[0]!.response },
      { prompt: chat, response: 'Thought process:' },
      { prompt: prompts[1]!, response: rows[1]!.response },
      { prompt: chat, response: rows[2]!.response },
      { prompt: `${chat}<|im_start|>assistant\n<think>\n`, response: 'Let me think about encoders and' },
      { prompt: prompts[1]!, response: rows[3]!.response },
    ];

    it('OpenRLHF /get_reward/rank: extra_logs.rejected_input and rejected_<reason>, the keys /get_reward logs', async () => {
      // FAILURE_REWARD: the comparative fake does not answer /get_reward's absolute judge (those items fail);
      // its rejections are decided without a judge.
      const h = await harness({ env: { FAILURE_REWARD: '0' }, fake: { fallback: rankJudge } });
      const payload = {
        query: rollouts.map((r) => r.prompt + r.response),
        prompts: rollouts.map((r) => r.prompt),
        labels: rollouts.map(() => GROUND_TRUTH),
      };
      const res = await h.app.inject({ method: 'POST', url: '/get_reward/rank?schedule=all_pairs', payload });
      expect(res.statusCode, res.body).toBe(200);
      const logs = res.json().extra_logs;
      expect(logs.rejected_input).toEqual([0, 1, 0, 0, 1, 0]);
      const byReason = Object.fromEntries(
        Object.entries(logs as Record<string, number[]>).filter(
          ([k, v]) => k.startsWith('rejected_') && k !== 'rejected_input' && v.some((x) => x === 1),
        ),
      );
      expect(Object.keys(byReason).sort()).toEqual([
        'rejected_master_key_filler',
        'rejected_truncated_reasoning',
      ]);
      expect(byReason['rejected_master_key_filler']).toEqual([0, 1, 0, 0, 0, 0]);
      expect(byReason['rejected_truncated_reasoning']).toEqual([0, 0, 0, 0, 1, 0]);
      // Rejected rollouts lose every comparison: no wins, and no LLM call saw them.
      expect(logs.wins[1]).toBe(0);
      expect(logs.wins[4]).toBe(0);
      expect(h.fake.calls.some((c) => JSON.stringify(c.body.messages).includes('Thought process'))).toBe(
        false,
      );
      // The same keys as /get_reward's extra_logs.
      const single = await h.app.inject({ method: 'POST', url: '/get_reward', payload });
      expect(single.statusCode, single.body).toBe(200);
      const singleKeys = Object.keys(single.json().extra_logs).filter((k) => k.startsWith('rejected_'));
      expect(
        Object.keys(logs)
          .filter((k) => k.startsWith('rejected_'))
          .sort(),
      ).toEqual(singleKeys.sort());
      expect(single.json().extra_logs.rejected_input).toEqual(logs.rejected_input);
    });

    it('slime /slime/rank: results[i].rejected_input and its reason', async () => {
      const h = await harness({ fake: { fallback: rankJudge } });
      const res = await h.app.inject({
        method: 'POST',
        url: '/slime/rank?schedule=all_pairs',
        payload: { samples: rollouts.map((r) => ({ ...r, label: GROUND_TRUTH })) },
      });
      expect(res.statusCode, res.body).toBe(200);
      const results = res.json().results as Json[];
      expect(results.map((r) => r.rejected_input)).toEqual([false, true, false, false, true, false]);
      expect(results.map((r) => r.reason)).toEqual([
        undefined,
        'master_key_filler',
        undefined,
        undefined,
        'truncated_reasoning',
        undefined,
      ]);
      expect(results[1]).toMatchObject({ wins: 0, judge_failed: false });
      expect(results[4]).toMatchObject({ wins: 0, judge_failed: false });
    });
  });
});
