/**
 * Replica routing bench (issue 14 items 2 and 5): GRPO groups from the shared OpenReview set judged by
 * the real engine (runJudgment → router → OpenAI-compatible backend over HTTP) against 1 or 4 replicas of
 * the fake backend, each with its own block-cache simulation (test/fakes/openai.ts, `registerOn: reply`), so each
 * replica's prefix cache only helps the calls it serves. Reports uncached prompt characters per judgment
 * (what the fleet must prefill), each replica's share of calls, and lost judgments:
 *
 *   npx tsx bench/replicas.ts                         # all scenarios, default + single-judge
 *   npx tsx bench/replicas.ts --groups 64 --graphs default --out -
 *
 * Scenarios: 1 replica; 4 replicas with affinity; 4 with round-robin; 4 with affinity and no stagger;
 * 4 with affinity where replica 0 starts answering 500 after a third of the groups. Everything runs on
 * 127.0.0.1 in this process; every fake is closed at the end.
 */
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';

import { createOfflineBackend } from '../src/judge/backends/offline.js';
import { getPreset } from '../src/judge/presets.js';
import { createRouter } from '../src/judge/routing.js';
import { runJudgment } from '../src/judge/run.js';
import { BackendSettings, type ReplicaPolicy } from '../src/settings/routing-file.js';
import { startFakeOpenAI, universalReply, type FakeOpenAI, type FakeReply } from '../test/fakes/openai.js';
import { BLOCK, loadCorpus, tripleAt, type Corpus } from './data.js';

export interface ScenarioOptions {
  name: string;
  graph: string;
  replicas: number;
  policy: ReplicaPolicy;
  /** Groups of BLOCK (16) candidates, each of one ground truth. */
  groups: number;
  /** Groups in flight at once (a trainer sends a step's groups together). */
  concurrentGroups: number;
  /** Blocks (64 characters each) in each replica's prefix cache. */
  cacheBlocks: number;
  /** Fake service time per call, ms. */
  latencyMs: number;
  staggerMs: number;
  /** Adaptive in-flight limit per replica (default true; false = the fixed ceiling of 64). */
  adaptive?: boolean | undefined;
  /** Replica 0 answers 500 from this group on (undefined: never). */
  failFromGroup?: number | undefined;
}

export interface ScenarioResult {
  name: string;
  graph: string;
  replicas: number;
  judgments: number;
  ok: number;
  /** Judgments that did not end `ok` (a failure is never a reward; here it is a lost judgment). */
  lost: number;
  calls: number;
  /** Calls served (HTTP 200) per replica, as shares of all served calls. */
  shares: number[];
  promptCharsPerJudgment: number;
  uncachedCharsPerJudgment: number;
  /** 1 − uncached / prompt. */
  reuse: number;
  seconds: number;
}

/** Stance from a stable hash of the candidate, so verdicts are mixed but reproducible. */
function reply(): (body: { messages?: Array<{ content: string }> }) => FakeReply {
  return (body) => {
    const user = body.messages?.at(-1)?.content ?? '';
    let h = 0;
    for (let i = 0; i < user.length; i += 7) h = (h * 31 + user.charCodeAt(i)) | 0;
    return { kind: 'json', body: universalReply(h % 2 === 0 ? 'match' : 'no_match', 0.8) };
  };
}

export async function runScenario(corpus: Corpus, o: ScenarioOptions): Promise<ScenarioResult> {
  const graph = getPreset(o.graph);
  if (graph === undefined) throw new Error(`unknown graph ${o.graph}`);
  let failing = false;
  const answer = reply();
  const fakes: FakeOpenAI[] = [];
  try {
    for (let i = 0; i < o.replicas; i++) {
      fakes.push(
        await startFakeOpenAI({
          latencyMs: o.latencyMs,
          record: false,
          blockCache: { capacityBlocks: o.cacheBlocks, registerOn: 'reply' },
          fallback: (body) => (failing && i === 0 ? { kind: 'status', status: 500 } : answer(body)),
        }),
      );
    }
    const settings = BackendSettings.parse({
      base_urls: fakes.map((f) => f.baseURL),
      model: 'fake-model',
      timeout_ms: 10_000,
      max_retries: 3,
      max_inflight: 64,
      replica_policy: o.policy,
      prefix_stagger_ms: o.staggerMs,
      adaptive_inflight: o.adaptive ?? true,
    });
    const router = createRouter({ default: settings, offline: createOfflineBackend });
    const started = performance.now();
    let ok = 0;
    let judgments = 0;
    let calls = 0;
    let next = 0;
    const worker = async (): Promise<void> => {
      // Bounded: each worker takes groups until `groups` have been taken.
      while (next < o.groups) {
        const g = next++;
        if (o.failFromGroup !== undefined && g >= o.failFromGroup) failing = true;
        const results = await Promise.all(
          Array.from({ length: BLOCK }, (_, j) => {
            const t = tripleAt(corpus, g * BLOCK + j);
            return runJudgment(graph, t, { router, deadline: Date.now() + 60_000 });
          }),
        );
        for (const r of results) {
          judgments += 1;
          calls += r.usage.calls;
          if (r.status === 'ok') ok += 1;
        }
      }
    };
    await Promise.all(Array.from({ length: o.concurrentGroups }, () => worker()));
    const seconds = (performance.now() - started) / 1000;
    const served = router
      .backends()
      .flatMap((b) => b.replicas?.() ?? [])
      .map((r) => r.attempts.get('ok') ?? 0);
    const totalServed = served.reduce((a, n) => a + n, 0);
    let promptChars = 0;
    let uncached = 0;
    for (const f of fakes) {
      promptChars += f.prefill().promptChars;
      uncached += f.prefill().uncachedChars;
    }
    await Promise.all(router.backends().map(async (b) => b.close?.()));
    return {
      name: o.name,
      graph: o.graph,
      replicas: o.replicas,
      judgments,
      ok,
      lost: judgments - ok,
      calls,
      shares: served.map((n) => (totalServed === 0 ? 0 : n / totalServed)),
      promptCharsPerJudgment: promptChars / judgments,
      uncachedCharsPerJudgment: uncached / judgments,
      reuse: promptChars === 0 ? 0 : 1 - uncached / promptChars,
      seconds,
    };
  } finally {
    await Promise.all(fakes.map((f) => f.close()));
  }
}

export const SCENARIOS = [
  { name: '1 replica', replicas: 1, policy: 'affinity' },
  { name: '4 replicas, affinity', replicas: 4, policy: 'affinity' },
  { name: '4 replicas, round-robin', replicas: 4, policy: 'round_robin' },
  { name: '4 replicas, affinity, no stagger', replicas: 4, policy: 'affinity', staggerMs: 0 },
  { name: '4 replicas, affinity, replica 0 fails', replicas: 4, policy: 'affinity', fail: true },
] as const;

export interface SuiteOptions {
  graphs: readonly string[];
  groups: number;
  concurrentGroups: number;
  cacheBlocks: number;
  latencyMs: number;
  staggerMs: number;
}

export async function runReplicaSuite(corpus: Corpus, s: SuiteOptions): Promise<ScenarioResult[]> {
  const results: ScenarioResult[] = [];
  for (const graph of s.graphs) {
    for (const sc of SCENARIOS) {
      results.push(
        await runScenario(corpus, {
          name: sc.name,
          graph,
          replicas: sc.replicas,
          policy: sc.policy,
          groups: s.groups,
          concurrentGroups: s.concurrentGroups,
          cacheBlocks: s.cacheBlocks,
          latencyMs: s.latencyMs,
          staggerMs: 'staggerMs' in sc ? sc.staggerMs : s.staggerMs,
          failFromGroup: 'fail' in sc ? Math.floor(s.groups / 3) : undefined,
        }),
      );
    }
  }
  return results;
}

const pct = (x: number): string => `${(100 * x).toFixed(1)} %`;

/** Markdown table; the ratio column is uncached prefill relative to the same graph's 1-replica row. */
export function replicaMarkdown(results: readonly ScenarioResult[]): string {
  const lines = [
    '| graph | scenario | judgments | lost | calls/judgment | prompt chars/judgment | uncached chars/judgment | reuse | vs 1 replica | min replica share | shares |',
    '|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const r of results) {
    const one = results.find((x) => x.graph === r.graph && x.replicas === 1);
    const ratio = one === undefined ? NaN : r.uncachedCharsPerJudgment / one.uncachedCharsPerJudgment;
    lines.push(
      `| ${r.graph} | ${r.name} | ${r.judgments} | ${r.lost} | ${(r.calls / r.judgments).toFixed(2)} | ${r.promptCharsPerJudgment.toFixed(0)} | ${r.uncachedCharsPerJudgment.toFixed(0)} | ${pct(r.reuse)} | ${ratio.toFixed(3)} | ${pct(Math.min(...r.shares))} | ${r.shares.map(pct).join(' / ')} |`,
    );
  }
  return lines.join('\n');
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      graphs: { type: 'string', default: 'default,single-judge' },
      groups: { type: 'string', default: '96' },
      'concurrent-groups': { type: 'string', default: '8' },
      'cache-blocks': { type: 'string', default: '4000' },
      'latency-ms': { type: 'string', default: '5' },
      'stagger-ms': { type: 'string', default: '50' },
    },
    strict: true,
  });
  const corpus = loadCorpus();
  const results = await runReplicaSuite(corpus, {
    graphs: values.graphs.split(','),
    groups: Number(values.groups),
    concurrentGroups: Number(values['concurrent-groups']),
    cacheBlocks: Number(values['cache-blocks']),
    latencyMs: Number(values['latency-ms']),
    staggerMs: Number(values['stagger-ms']),
  });
  console.log(replicaMarkdown(results));
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main();
