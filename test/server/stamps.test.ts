/**
 * Judge stamps (issue 21): the cache key holds the judge model, the shared (Redis) tier's codec keeps the
 * votes and each reply's reported model, and `judge_model` is the reported model, a list for a mixed
 * committee, the configured one when nothing was asked.
 */
import { describe, expect, it } from 'vitest';

import { loadConfig } from '../../src/config.js';
import { createOfflineBackend } from '../../src/judge/backends/offline.js';
import { judgmentKey, keySettingsOf } from '../../src/judge/key.js';
import { getPreset } from '../../src/judge/presets.js';
import { createRouter } from '../../src/judge/routing.js';
import { runJudgment } from '../../src/judge/run.js';
import { decodeStored, encodeStored } from '../../src/server/serving/shared-judgments.js';
import { judgeModelOf, votesOf } from '../../src/server/controls/stamps.js';
import { GROUND_TRUTH, QUESTION, candidate } from './helpers.js';

const input = { question: QUESTION, candidate: candidate(1), groundTruth: GROUND_TRUTH };
const KEY_SETTINGS = keySettingsOf({});

function routerFor(model: string) {
  const config = loadConfig({ JUDGE_BASE_URL: 'http://127.0.0.1:9/v1', JUDGE_MODEL: model });
  return createRouter({ ...config.judge, offline: createOfflineBackend });
}

describe('judge stamps', () => {
  it('keys the same judgment of two judge models apart (and the same model alike)', () => {
    const graph = getPreset('default')!;
    const a = judgmentKey(graph, input, routerFor('judge-a'), KEY_SETTINGS);
    expect(judgmentKey(graph, input, routerFor('judge-a'), KEY_SETTINGS)).toBe(a);
    expect(judgmentKey(graph, input, routerFor('judge-b'), KEY_SETTINGS)).not.toBe(a);
  });

  it('keeps votes and the reported model through the shared tier', async () => {
    const router = createRouter({ default: 'offline', offline: createOfflineBackend });
    const graph = getPreset('vote-3')!;
    const judgment = await runJudgment(graph, input, { router, deadline: Date.now() + 10_000 });
    expect(judgment.status).toBe('ok');
    expect(votesOf(judgment)).toHaveLength(3);
    expect(judgment.transcript.every((m) => m.servedModel !== undefined)).toBe(true);
    const back = decodeStored(encodeStored({ id: 'j', judgment }));
    expect(back).toBeDefined();
    expect(votesOf(back!.judgment)).toEqual(votesOf(judgment));
    expect(judgeModelOf([back!.judgment], graph, router)).toEqual(judgeModelOf([judgment], graph, router));
  });

  it('reports the served model, a list when members differ, the configured one without replies', async () => {
    const router = createRouter({ default: 'offline', offline: createOfflineBackend });
    const graph = getPreset('vote-3')!;
    const judgment = await runJudgment(graph, input, { router, deadline: Date.now() + 10_000 });
    const mixed = {
      ...judgment,
      transcript: judgment.transcript.map((m, i) => ({ ...m, servedModel: i === 0 ? 'qwen-a' : 'llama-b' })),
    };
    expect(judgeModelOf([mixed], graph, router)).toEqual(['qwen-a', 'llama-b']);
    expect(judgeModelOf([{ ...judgment, transcript: [] }], graph, routerFor('cfg-model'))).toBe('cfg-model');
  });
});
