/** Builders of items, records and graph entries for the analysis and report tests. */
import type { DatasetItem } from '../../src/ablations/dataset.js';
import type { ItemRecord, StanceMessage } from '../../src/ablations/records.js';
import type { GraphEntry } from '../../src/ablations/types.js';
import { getPreset } from '../../src/judge/presets.js';

export const item = (id: string, label: 0 | 1, gt = `gt-${id}`): DatasetItem => ({
  id,
  question: 'q',
  candidate: 'c',
  ground_truth: gt,
  label,
  kind: label === 1 ? 'positive' : 'hard_negative',
  source: 's',
  venue: 'v',
  area: 'a',
});

export type Msg = [round: number, nodeId: string, role: string, stance: 'match' | 'no_match' | null];

export function record(
  itemId: string,
  status: ItemRecord['status'],
  verdict: 'match' | 'no_match' | null,
  rounds: number,
  stopReason: string,
  messages: Msg[],
): ItemRecord {
  return {
    v: 1,
    key: `k-${itemId}`,
    item: itemId,
    graph: 'g',
    graphHash: 'h',
    status,
    verdict,
    reward: verdict === null ? null : verdict === 'match' ? 1 : 0,
    score: verdict === null ? null : verdict === 'match' ? 0.8 : 0.2,
    rounds,
    stopReason,
    usage: {
      calls: messages.length,
      promptTokens: 100 * messages.length,
      completionTokens: 10 * messages.length,
    },
    roles: {},
    messages: messages.map(([round, nodeId, role, stance]): StanceMessage => ({
      round,
      nodeId,
      role,
      stage: 'debate',
      stance,
      confidence: stance === null ? null : 0.9,
    })),
    latencyMs: 5,
    ...(status === 'judge_error' ? { error: { code: 'RW_JUDGE_UNAVAILABLE', message: 'x' } } : {}),
  };
}

export const entry = (name: string, label = name): GraphEntry => ({
  label,
  graph: getPreset(name)!,
  aliases: [],
  baselineFor: [],
  auto: false,
});
