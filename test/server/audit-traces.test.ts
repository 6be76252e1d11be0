/**
 * Issue 37 item 7: an audit that disagrees keeps each node's reasoning trace of both judgments (bounded), so
 * the judge's mistake can be read; a judge that leaves no trace leaves the audit summary as it was.
 */
import { describe, expect, it } from 'vitest';

import { getPreset } from '../../src/judge/presets.js';
import { runJudgment } from '../../src/judge/run.js';
import { AUDIT_TRACES_KEPT, createAuditor } from '../../src/server/integrity/audit.js';
import { createMetrics } from '../../src/server/observe/metrics.js';
import type { FakeChatRequest, FakeReply } from '../fakes/openai.js';
import { universalReply } from '../fakes/openai.js';
import { createThinkingJudge } from '../fakes/thinking.js';
import { soon, useFakeRouter, VERIFY_INPUT as input } from '../judge/helpers.js';

const setup = useFakeRouter();

async function audited(reply: (b: FakeChatRequest) => FakeReply, audits: number) {
  const { router } = await setup({ fallback: reply });
  const graph = getPreset('single-judge')!;
  const auditor = createAuditor({
    router,
    rate: 1,
    graph: getPreset('default')!,
    window: 100,
    maxInflight: 64,
    deadlineMs: 5_000,
    limits: { minChars: 1, maxChars: 10_000 },
    observer: {},
    metrics: createMetrics().integrity,
    random: () => 0,
  });
  for (let i = 0; i < audits; i++) {
    const first = await runJudgment(graph, input, { router, deadline: soon() });
    auditor.consider(graph, input, first);
    await auditor.idle();
  }
  auditor.close();
  return auditor.summary();
}

/** The single judge says match; the audit graph's evaluator says no_match: every audit disagrees. */
const split = (b: FakeChatRequest): Record<string, unknown> =>
  universalReply(b.response_format?.json_schema?.name === 'evaluator' ? 'no_match' : 'match', 0.8);

describe('audits keep the traces of a disagreement', () => {
  it('each node of both judgments with its stance and its trace, the last few only', async () => {
    const judge = createThinkingJudge({ shape: 'inline:harmony', answer: split });
    const summary = await audited((b) => judge.reply(b), AUDIT_TRACES_KEPT + 2);
    expect(summary.byFirstVerdict.match.disagree).toBe(AUDIT_TRACES_KEPT + 2);
    expect(summary.disagreements).toHaveLength(AUDIT_TRACES_KEPT);
    const d = summary.disagreements![0]!;
    expect(d.first.verdict).toBe('match');
    expect(d.second.verdict).toBe('no_match');
    expect(d.second.nodes.map((n) => n.role)).toEqual(['analyst', 'analyst', 'evaluator']);
    for (const n of [...d.first.nodes, ...d.second.nodes]) expect(n.reasoning).toContain('Draft:');
  });

  it('a judge without traces leaves the summary without disagreements', async () => {
    const summary = await audited((b) => ({ kind: 'json', body: split(b) }), 2);
    expect(summary.byFirstVerdict.match.disagree).toBe(2);
    expect(summary.disagreements).toBeUndefined();
  });
});
