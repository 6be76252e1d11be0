/**
 * The codec of the shared judgment tier: every judgment the engine makes survives encode → decode
 * unchanged (a field added to `Judgment` without updating the codec fails here, not silently in
 * production as a cache that never hits), and anything else decodes to nothing.
 */
import { describe, expect, it } from 'vitest';

import { loadConfig } from '../../src/config.js';
import { createOfflineBackend } from '../../src/judge/backends/offline.js';
import { getPreset } from '../../src/judge/presets.js';
import { createRouter } from '../../src/judge/routing.js';
import { runJudgment } from '../../src/judge/run.js';
import type { Judgment } from '../../src/judge/types.js';
import { decodeStored, encodeStored } from '../../src/server/serving/shared-judgments.js';
import { GROUND_TRUTH, QUESTION, candidate, startHarness } from './helpers.js';

async function judgments(): Promise<Judgment[]> {
  const config = loadConfig({});
  const router = createRouter({ ...config.judge, offline: createOfflineBackend });
  const out: Judgment[] = [];
  for (const name of ['default', 'ordinary', 'proposer-critic', 'round-robin-3', 'lexical']) {
    const graph = getPreset(name)!;
    for (const text of [GROUND_TRUTH, candidate(1), ':']) {
      out.push(
        await runJudgment(
          graph,
          { question: QUESTION, candidate: text, groundTruth: GROUND_TRUTH },
          {
            router,
            deadline: Date.now() + 10_000,
            signal: new AbortController().signal,
            limits: { minChars: 20, maxChars: 8000 },
          },
        ),
      );
    }
  }
  return out;
}

describe('shared judgment codec', () => {
  it('round-trips ok, rejected_input and every preset shape unchanged', async () => {
    const all = await judgments();
    expect(new Set(all.map((j) => j.status))).toEqual(new Set(['ok', 'rejected_input']));
    for (const judgment of all) {
      const stored = { id: 'j-1', judgment };
      const back = decodeStored(encodeStored(stored));
      expect(back).toEqual(JSON.parse(JSON.stringify(stored)));
    }
  });

  it('round-trips a judge_error with a failed node and its error code', async () => {
    const h = await startHarness({ fake: { fallback: { kind: 'status', status: 500 } } });
    try {
      const judgment = await runJudgment(
        getPreset('default')!,
        { question: QUESTION, candidate: candidate(2), groundTruth: GROUND_TRUTH },
        {
          router: h.router,
          deadline: Date.now() + 5000,
          signal: new AbortController().signal,
          limits: { minChars: 20, maxChars: 8000 },
        },
      );
      expect(judgment.status).toBe('judge_error');
      expect(judgment.transcript.some((m) => m.error?.code === 'RW_JUDGE_UNAVAILABLE')).toBe(true);
      const stored = { id: 'f', judgment };
      expect(decodeStored(encodeStored(stored))).toEqual(JSON.parse(JSON.stringify(stored)));
    } finally {
      await h.close();
    }
  });

  it('decodes nothing from another version, a corrupt entry or a forged reward', () => {
    const stored = encodeStored({
      id: 'x',
      judgment: {
        status: 'ok',
        verdict: 'match',
        reward: 1,
        score: 0.9,
        incoherent: false,
        graph: { name: 'default', hash: 'h' },
        promptVersion: 'p',
        rounds: 1,
        stopReason: 'single_round',
        transcript: [],
        usage: { calls: 3, promptTokens: 1, completionTokens: 1, cachedPromptTokens: null },
        latencyMs: 5,
      },
    });
    expect(decodeStored(stored)).toBeDefined();
    expect(decodeStored(stored.replace('"v":1', '"v":2'))).toBeUndefined();
    expect(decodeStored(stored.slice(0, 40))).toBeUndefined();
    expect(decodeStored(stored.replace('"reward":1', '"reward":7'))).toBeUndefined();
    expect(decodeStored(stored.replace('"status":"ok"', '"status":"great"'))).toBeUndefined();
    expect(decodeStored('null')).toBeUndefined();
  });
});
