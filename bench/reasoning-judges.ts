/**
 * Reasoning judges (issue 37): tokens per judgment per role and reasoning effort, on the fake reasoning judge
 * (test/fakes/thinking.ts: trace 250 / 800 / 2 400 tokens at low / medium / high, answer = its JSON ÷ 4), and
 * how many calls the default budgets cost against the same judge without a trace.
 *
 *   npx tsx bench/reasoning-judges.ts [--graphs default,ordinary] [--shape inline:harmony]
 *
 * Every item of datasets/sample.jsonl, one judgment each, the server's own executor and default budgets.
 * The effort is set on the fake (the request side sends `reasoning_effort` once JUDGE_REASONING_EFFORT exists).
 */
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

import { createOfflineBackend } from '../src/judge/backends/offline.js';
import { getPreset } from '../src/judge/presets.js';
import { createRouter } from '../src/judge/routing.js';
import { runJudgment } from '../src/judge/run.js';
import { BackendSettings } from '../src/settings/routing-file.js';
import {
  startFakeOpenAI,
  universalReply,
  type FakeChatRequest,
  type FakeReply,
} from '../test/fakes/openai.js';
import { createThinkingJudge, TRACE_TOKENS, type TraceShape } from '../test/fakes/thinking.js';

interface Item {
  question: string;
  candidate: string;
  ground_truth: string;
  label: 0 | 1;
}

export interface Row {
  graph: string;
  effort: string;
  role: string;
  callsPerJudgment: number;
  completionPerJudgment: number;
  reasoningPerJudgment: number;
  judged: number;
  items: number;
}

async function measure(
  graphName: string,
  items: Item[],
  reply: (b: FakeChatRequest) => FakeReply,
  effort: string,
): Promise<Row[]> {
  const fake = await startFakeOpenAI({ fallback: reply });
  const router = createRouter({
    default: BackendSettings.parse({ base_url: fake.baseURL, model: 'fake-model', max_retries: 0 }),
    offline: createOfflineBackend,
  });
  const graph = getPreset(graphName);
  if (graph === undefined) throw new Error(`no preset ${graphName}`);
  const roles = new Map<string, { calls: number; completion: number; reasoning: number }>();
  let judged = 0;
  try {
    for (const item of items) {
      const input = { question: item.question, candidate: item.candidate, groundTruth: item.ground_truth };
      const j = await runJudgment(graph, input, { router, deadline: Date.now() + 30_000 });
      if (j.status === 'ok') judged += 1;
      for (const m of j.transcript) {
        const acc = roles.get(m.role) ?? { calls: 0, completion: 0, reasoning: 0 };
        acc.calls += 1 + m.reasks;
        acc.completion += m.completionTokens;
        acc.reasoning += m.reasoningTokens ?? 0;
        roles.set(m.role, acc);
      }
    }
  } finally {
    for (const b of router.backends()) await b.close?.();
    await fake.close();
  }
  const n = items.length;
  return [...roles].map(([role, acc]) => ({
    graph: graphName,
    effort,
    role,
    callsPerJudgment: acc.calls / n,
    completionPerJudgment: acc.completion / n,
    reasoningPerJudgment: acc.reasoning / n,
    judged,
    items: n,
  }));
}

export async function benchReasoningJudges(graphs: string[], shape: TraceShape): Promise<Row[]> {
  const items = readFileSync(new URL('../datasets/sample.jsonl', import.meta.url), 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Item);
  const answer = (body: FakeChatRequest): Record<string, unknown> => {
    const user = body.messages?.find((m) => m.role === 'user')?.content ?? '';
    const item = items.find((i) => user.includes(JSON.stringify(i.candidate).slice(1, 60)));
    return universalReply(item?.label === 1 ? 'match' : 'no_match', 0.85);
  };
  const rows: Row[] = [];
  for (const graph of graphs) {
    rows.push(...(await measure(graph, items, (b) => ({ kind: 'json', body: answer(b) }), 'no trace')));
    for (const effort of ['low', 'medium', 'high'] as const) {
      const judge = createThinkingJudge({ shape, answer, traceTokens: TRACE_TOKENS[effort] });
      rows.push(...(await measure(graph, items, (b) => judge.reply(b), effort)));
    }
  }
  return rows;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { values } = parseArgs({
    options: {
      graphs: { type: 'string', default: 'default,ordinary' },
      shape: { type: 'string', default: 'inline:harmony' },
    },
  });
  const rows = await benchReasoningJudges(values.graphs.split(','), values.shape as TraceShape);
  const out = [
    '| graph | effort | role | judged | calls/judgment | completion tokens/judgment | reasoning tokens/judgment |',
    '|---|---|---|--:|--:|--:|--:|',
  ];
  for (const r of rows)
    out.push(
      `| ${r.graph} | ${r.effort} | ${r.role} | ${r.judged}/${r.items} | ${r.callsPerJudgment.toFixed(2)} | ${r.completionPerJudgment.toFixed(0)} | ${r.reasoningPerJudgment.toFixed(0)} |`,
    );
  process.stdout.write(`${out.join('\n')}\n`);
}
