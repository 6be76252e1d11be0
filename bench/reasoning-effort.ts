/**
 * Tokens per judgment per role and reasoning effort (issue 37), on the fake reasoning judge
 * (test/fakes/reasoning-model.ts: the trace in `reasoning_content`, its length set by `reasoning_effort`,
 * the JSON answer in `content`), through the real executor and the OpenAI-compatible backend on loopback.
 * For each effort (unset = the model's default, medium) it judges `--items` items with `--graph` and counts,
 * per role: calls, completion tokens and reasoning tokens per judgment, and calls that were cut and asked
 * again. The fake's trace lengths are a stand-in (low 250, medium 800, high 2 400 tokens per call): the
 * point is the accounting and the budgets, and the shape of the cost, not a real model's numbers.
 *
 *   npx tsx bench/reasoning-effort.ts [--items 40] [--graph ordinary] [--efforts unset,minimal,low,medium,high]
 *
 * Prints one JSON line per effort and a markdown table (docs/reasoning-judges.md).
 */
import { parseArgs } from 'node:util';

import { createOfflineBackend } from '../src/judge/backends/offline.js';
import { getPreset } from '../src/judge/presets.js';
import { createRouter } from '../src/judge/routing.js';
import { runJudgment } from '../src/judge/run.js';
import { BackendSettings, ReasoningEffort } from '../src/settings/routing-file.js';
import { requestRole, startFakeOpenAI, universalReply } from '../test/fakes/openai.js';
import { reasoningJudge } from '../test/fakes/reasoning-model.js';

interface RoleCost {
  calls: number;
  completion: number;
  reasoning: number;
  /** Calls sent again with a raised budget after a cut reply. */
  raised: number;
}

export interface EffortResult {
  effort: string;
  items: number;
  judged: number;
  /** Per role, per judgment. */
  roles: Record<string, RoleCost>;
  total: RoleCost;
}

const QUESTION = 'How can a model learn robust features from unlabeled images?';
const GROUND_TRUTH =
  'Contrastive learning between two augmented views of the same image, with a momentum encoder.';

/** One effort: the fake, a backend with that effort, `items` judgments of `graphName` one at a time. */
export async function measureEffort(effort: string, items: number, graphName: string): Promise<EffortResult> {
  const graph = getPreset(graphName);
  if (graph === undefined) throw new Error(`no preset ${graphName}`);
  const byRole = new Map<string, RoleCost>();
  const cost = (role: string): RoleCost => {
    let c = byRole.get(role);
    if (c === undefined) {
      c = { calls: 0, completion: 0, reasoning: 0, raised: 0 };
      byRole.set(role, c);
    }
    return c;
  };
  const fake = await startFakeOpenAI({
    record: false,
    fallback: reasoningJudge(universalReply('match'), {
      onReasoning: (tokens, body) => {
        cost(requestRole(body) ?? 'unknown').reasoning += tokens;
      },
    }),
  });
  const router = createRouter({
    default: BackendSettings.parse({
      base_url: fake.baseURL,
      model: 'gpt-oss-120b',
      max_retries: 0,
      ...(effort === 'unset' ? {} : { reasoning_effort: ReasoningEffort.parse(effort) }),
    }),
    offline: createOfflineBackend,
  });
  let judged = 0;
  try {
    for (let i = 0; i < items; i++) {
      const j = await runJudgment(
        graph,
        {
          question: QUESTION,
          groundTruth: GROUND_TRUTH,
          candidate: `Proposal ${i}: train an encoder so two augmentations of one image agree (variant ${i}).`,
        },
        { router, deadline: Date.now() + 30_000 },
      );
      if (j.status === 'ok') judged += 1;
      for (const m of j.transcript) {
        const c = cost(m.role);
        c.calls += m.reasks + 1;
        c.completion += m.completionTokens;
        c.raised += m.reasks;
      }
    }
  } finally {
    for (const b of router.backends()) await b.close?.();
    await fake.close();
  }
  const per = (c: RoleCost): RoleCost => ({
    calls: c.calls / items,
    completion: c.completion / items,
    reasoning: c.reasoning / items,
    raised: c.raised,
  });
  const roles = Object.fromEntries([...byRole].map(([role, c]) => [role, per(c)]));
  const sum = [...byRole.values()].reduce(
    (a, c) => ({
      calls: a.calls + c.calls,
      completion: a.completion + c.completion,
      reasoning: a.reasoning + c.reasoning,
      raised: a.raised + c.raised,
    }),
    { calls: 0, completion: 0, reasoning: 0, raised: 0 },
  );
  return { effort, items, judged, roles, total: per(sum) };
}

/** The markdown table: one row per effort and role, then the judgment's total. */
export function renderTable(results: readonly EffortResult[]): string {
  const rows = [
    '| effort | role | calls / judgment | completion tokens / judgment | reasoning tokens / judgment | cut and raised |',
    '| --- | --- | --: | --: | --: | --: |',
  ];
  const n = (x: number): string => x.toFixed(0);
  for (const r of results) {
    for (const [role, c] of Object.entries(r.roles)) {
      rows.push(
        `| ${r.effort} | ${role} | ${c.calls.toFixed(2)} | ${n(c.completion)} | ${n(c.reasoning)} | ${c.raised} |`,
      );
    }
    const t = r.total;
    rows.push(
      `| ${r.effort} | **judgment** (${r.judged}/${r.items} judged) | ${t.calls.toFixed(2)} | ${n(t.completion)} | ${n(t.reasoning)} | ${t.raised} |`,
    );
  }
  return rows.join('\n');
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      items: { type: 'string', default: '40' },
      graph: { type: 'string', default: 'ordinary' },
      efforts: { type: 'string', default: 'unset,minimal,low,medium,high' },
    },
  });
  const items = Number(values.items);
  if (!Number.isInteger(items) || items < 1 || items > 10_000) throw new Error('--items: 1..10000');
  const results: EffortResult[] = [];
  for (const effort of values.efforts.split(',').map((e) => e.trim())) {
    if (effort !== 'unset') ReasoningEffort.parse(effort);
    const result = await measureEffort(effort, items, values.graph);
    process.stdout.write(`${JSON.stringify(result)}\n`);
    results.push(result);
  }
  process.stdout.write(`\n${renderTable(results)}\n`);
}

await main();
