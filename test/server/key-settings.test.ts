/**
 * The judgment key's settings (issue 32 item 5): every configuration variable of src/config.ts has a key
 * decision (src/server/serving/key-settings.ts), and every variable decided "in the key" does change the
 * judgment key and the comparative key, so a replica with other settings never replays this one's verdicts.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import { ENV_VARIABLES, loadConfig } from '../../src/config.js';
import { createOfflineBackend } from '../../src/judge/backends/offline.js';
import { comparativeKey, judgmentKey } from '../../src/judge/key.js';
import { getPreset } from '../../src/judge/presets.js';
import { createRouter } from '../../src/judge/routing.js';
import { KEY_DECISIONS, keySettings } from '../../src/server/serving/key-settings.js';
import { GROUND_TRUTH, QUESTION, candidate } from './helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'key-settings-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const BASE = { JUDGE_BASE_URL: 'http://127.0.0.1:9/v1', JUDGE_MODEL: 'judge-a' };

/**
 * For every variable decided in the key: another value (against BASE and the defaults) that must give
 * another key. A variable newly decided "in the key" needs an entry here, or the test below fails.
 */
const ALTERNATIVES: Record<string, () => Record<string, string>> = {
  JUDGE_MODEL: () => ({ JUDGE_MODEL: 'judge-b' }),
  REWARD_CONFIG: () => {
    const path = join(dir, 'routing.json');
    writeFileSync(
      path,
      JSON.stringify({ roles: { analyst: { temperature: 0.3 }, comparison: { top_p: 0.9 } } }),
    );
    return { REWARD_CONFIG: path };
  },
  DEFAULT_GRAPH: () => ({ DEFAULT_GRAPH: 'vote-3' }),
  JUDGE_REASONING_EFFORT: () => ({ JUDGE_REASONING_EFFORT: 'high' }),
  JUDGE_EXTRA_BODY: () => ({ JUDGE_EXTRA_BODY: '{"chat_template_kwargs":{"enable_thinking":false}}' }),
  MIN_CANDIDATE_CHARS: () => ({ MIN_CANDIDATE_CHARS: '5' }),
  MAX_CANDIDATE_CHARS: () => ({ MAX_CANDIDATE_CHARS: '9000' }),
  REASONING_FORMAT: () => ({ REASONING_FORMAT: 'none' }),
  REASONING_MARKERS: () => ({ REASONING_MARKERS: '<reflect>,</reflect>' }),
};

/** Both keys of one prepared judgment and one pair under the configuration `env` gives. */
function keysFor(env: Record<string, string>): { judgment: string; pair: string } {
  const config = loadConfig({ ...BASE, ...env });
  const router = createRouter({ ...config.judge, offline: createOfflineBackend });
  const graph = getPreset(config.defaultGraph);
  if (graph === undefined) throw new Error(`no preset ${config.defaultGraph}`);
  const settings = keySettings(config);
  const input = { question: QUESTION, candidate: candidate(1), groundTruth: GROUND_TRUTH };
  const pair = { question: QUESTION, groundTruth: GROUND_TRUTH, criterion: 'match' as const };
  return {
    judgment: judgmentKey(graph, input, router, settings),
    pair: comparativeKey(
      router,
      { kind: 'pair', input: { ...pair, a: candidate(1), b: candidate(2) }, judges: 1 },
      settings,
    ),
  };
}

describe('the key decision of every configuration variable', () => {
  it('exists for every variable of the schema, and names no variable the schema lacks', () => {
    expect(Object.keys(KEY_DECISIONS).sort()).toEqual(Object.keys(ENV_VARIABLES).sort());
  });

  it('gives a reason for every variable left out of the key', () => {
    for (const [name, decision] of Object.entries(KEY_DECISIONS)) {
      if (decision.in === 'none') expect(decision.reason.length, name).toBeGreaterThan(20);
    }
  });

  it('changes the key for every variable decided in it (a judgment keyed elsewhere is not replayed here)', () => {
    const base = keysFor({});
    const inKey = Object.entries(KEY_DECISIONS).filter(([, d]) => d.in !== 'none');
    expect(Object.keys(ALTERNATIVES).sort()).toEqual(inKey.map(([name]) => name).sort());
    for (const [name, decision] of inKey) {
      const other = keysFor(ALTERNATIVES[name]!());
      expect(other.judgment, name).not.toBe(base.judgment);
      // The graph is the judgments' alone; preparation settings and routes key comparisons too.
      if (decision.in !== 'graph') expect(other.pair, name).not.toBe(base.pair);
    }
  });

  it('leaves the key alone for variables that only decide whether or when a judgment runs', () => {
    const base = keysFor({});
    for (const env of [
      { REQUEST_DEADLINE_MS: '5000' },
      { JUDGE_TIMEOUT_MS: '999' },
      { FAILURE_REWARD: '0' },
      { REDIS_PREFIX: 'other:' },
      { CACHE_SIZE: '1' },
      { JUDGE_TOKEN_BUDGET: '1000' },
    ]) {
      expect(keysFor(env), JSON.stringify(env)).toEqual(base);
    }
  });
});
