/**
 * A flight runs under the latest deadline of the requests waiting for it (issue 32 item 8,
 * src/server/serving/flight-deadlines.ts), also once the request that started it has left.
 */
import { describe, expect, it } from 'vitest';

import { createFlightDeadlines } from '../../src/server/serving/flight-deadlines.js';
import type { FakeChatRequest, FakeReply } from '../fakes/openai.js';
import {
  candidate,
  GROUND_TRUTH,
  markerJudge,
  QUESTION,
  useHarness,
  waitFor,
  waitForJoins,
} from './helpers.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- response bodies are checked field by field
type Json = any;

const harness = useHarness();

describe('flight deadlines', () => {
  it('keeps the entry for the flight’s life: a newer flight of the key is not dropped by the older’s end', async () => {
    const deadlines = createFlightDeadlines();
    let release: (() => void) | undefined;
    const first = deadlines.run('k', 100, () => new Promise<void>((resolve) => (release = resolve)));
    deadlines.extend('k', 300);
    let seen = 0;
    const second = deadlines.run('k', 200, (d) => {
      deadlines.extend('k', 150);
      seen = d.at;
      return Promise.resolve();
    });
    await second;
    expect(seen).toBe(200);
    release?.();
    await first;
    expect(deadlines.size).toBe(0);
  });

  it('a request joining after the starter left (cancelled) still extends the judgment to its deadline', async () => {
    const slow = (b: FakeChatRequest): FakeReply => ({ kind: 'slow', ms: 500, then: markerJudge(b) });
    const h = await harness({ fake: { fallback: slow } });
    const body = (extra: Record<string, unknown>) => ({
      question: QUESTION,
      ground_truth: GROUND_TRUTH,
      candidate: candidate(2),
      ...extra,
    });
    const judge = (extra: Record<string, unknown>) =>
      h.app.inject({ method: 'POST', url: '/v1/judge', payload: body(extra) });
    const starter = judge({ request_id: 'starter', deadline_ms: 900 });
    await waitFor(() => h.fake.inflight() >= 2, 'the two Analysts to call the judge');
    const early = judge({ deadline_ms: 900 });
    await waitForJoins(h.metrics); // `early` has joined the starter's flight
    // The starter leaves; the flight runs on for `early`.
    await h.app.inject({ method: 'POST', url: '/v1/cancel', payload: { request_ids: ['starter'] } });
    expect((await starter).json<Json>().status).toBe('cancelled');
    const late = await judge({ deadline_ms: 8000 });
    expect(late.json<Json>()).toMatchObject({ status: 'ok', reward: 1, cached: true });
    expect((await early).json<Json>().status).toBe('timeout');
  });
});
