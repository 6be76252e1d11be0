/**
 * Prefill bench (issue 14 item 6): uncached prompt characters per judgment on GRPO groups, measured by the
 * fake backend's vLLM-like block cache (test/fakes/openai.ts: 64-character blocks keyed by their whole
 * prefix, LRU, one cache per fake = per replica).
 *
 *   npx tsx bench/prefill.ts [--groups 16] [--graphs default,single-judge,cascade] [--replicas 1,4]
 *
 * Each group is 16 distinct candidates for one ground truth (bench/data.ts, from
 * ../shared/datasets/openreview-pairs.jsonl), judged concurrently as the server judges a /v1/reward group.
 * The fake answers every role from term overlap (the offline backend's rule), so the cascade's first stage
 * stops about as often as it does offline.
 *
 * Replicas: with 1 replica every call goes to one fake through the server's own router. With N > 1 the bench
 * places whole judgments itself (one router per fake), two ways: `affinity` = all judgments of a ground truth
 * on one replica (hash of the ground truth, what prefix-affinity routing aims at), `round-robin` = judgment
 * k on replica k mod N. This bounds what replica routing can reach; it is not the server's routing.
 */
import { createHash } from 'node:crypto';
import { pathToFileURL } from 'node:url';

import { createOfflineBackend } from '../src/judge/backends/offline.js';
import { getPreset } from '../src/judge/presets.js';
import { createRouter } from '../src/judge/routing.js';
import { runJudgment } from '../src/judge/run.js';
import type { Router } from '../src/judge/types.js';
import { BackendSettings } from '../src/settings/routing-file.js';
import { marginConfidence, methodSimilarity, SIMILARITY_THRESHOLDS } from '../src/text/similarity.js';
import {
  startFakeOpenAI,
  universalReply,
  type FakeChatRequest,
  type FakeOpenAI,
  type FakeReply,
} from '../test/fakes/openai.js';
import { BLOCK, loadCorpus, tripleAt, type Corpus } from './data.js';

export type Placement = 'single' | 'affinity' | 'round-robin';

export interface PrefillOptions {
  graph: string;
  /** GRPO groups of BLOCK (16) candidates, judged one group after another. */
  groups: number;
  replicas?: number | undefined;
  placement?: Placement | undefined;
  corpus?: Corpus | undefined;
}

export interface PrefillResult {
  graph: string;
  replicas: number;
  placement: Placement;
  judgments: number;
  callsPerJudgment: number;
  promptCharsPerJudgment: number;
  uncachedCharsPerJudgment: number;
  /** Cached / prompt characters over all replicas. */
  reuse: number;
  /** Calls each replica served, in replica order. */
  callsPerReplica: number[];
}

/** The JSON string of a fence in a rendered prompt (`<<<LABEL…>>>\n"…"\n`), decoded; '' if absent. */
function fenced(text: string, label: string): string {
  const at = text.indexOf(`<<<${label}`);
  if (at < 0) return '';
  const start = text.indexOf('\n', at) + 1;
  const end = text.indexOf('\n', start);
  try {
    const value: unknown = JSON.parse(text.slice(start, end));
    return typeof value === 'string' ? value : '';
  } catch {
    return '';
  }
}

/** Every role's stance from term overlap (the offline backend's methodology rule), confidence from the margin. */
export function overlapJudge(body: FakeChatRequest): FakeReply {
  const user = body.messages?.find((m) => m.role === 'user')?.content ?? '';
  const input = {
    question: fenced(user, 'QUESTION'),
    groundTruth: fenced(user, 'GROUND_TRUTH'),
    candidate: fenced(user, 'CANDIDATE_'),
  };
  const margin = methodSimilarity(input) - SIMILARITY_THRESHOLDS.methodology;
  return { kind: 'json', body: universalReply(margin >= 0 ? 'match' : 'no_match', marginConfidence(margin)) };
}

function fakeRouter(fake: FakeOpenAI): Router {
  return createRouter({
    default: BackendSettings.parse({
      base_url: fake.baseURL,
      model: 'fake-model',
      max_retries: 0,
      max_inflight: 64,
    }),
    offline: createOfflineBackend,
  });
}

function replicaOf(groundTruth: string, replicas: number): number {
  return createHash('sha256').update(groundTruth).digest().readUInt32BE(0) % replicas;
}

/** Runs `groups` GRPO groups through `graph` against fresh fakes with block caches and reads their prefill. */
export async function measurePrefill(options: PrefillOptions): Promise<PrefillResult> {
  const graph = getPreset(options.graph);
  if (graph === undefined) throw new Error(`unknown graph ${options.graph}`);
  const replicas = options.replicas ?? 1;
  const placement: Placement = replicas === 1 ? 'single' : (options.placement ?? 'affinity');
  const corpus = options.corpus ?? loadCorpus();
  const fakes: FakeOpenAI[] = [];
  const routers: Router[] = [];
  try {
    for (let r = 0; r < replicas; r++) {
      const fake = await startFakeOpenAI({ fallback: overlapJudge, blockCache: true, record: false });
      fakes.push(fake);
      routers.push(fakeRouter(fake));
    }
    let calls = 0;
    let judgments = 0;
    let failed = 0;
    for (let g = 0; g < options.groups; g++) {
      const triples = Array.from({ length: BLOCK }, (_, j) => tripleAt(corpus, g * BLOCK + j));
      const done = await Promise.all(
        triples.map((t, j) => {
          const k = g * BLOCK + j;
          const r = placement === 'round-robin' ? k % replicas : replicaOf(t.groundTruth, replicas);
          return runJudgment(graph, t, { router: routers[r]!, deadline: Date.now() + 60_000 });
        }),
      );
      for (const j of done) {
        calls += j.usage.calls;
        if (j.status !== 'ok') failed += 1;
      }
      judgments += done.length;
    }
    if (failed > 0) throw new Error(`${failed} judgment(s) failed: the measurement would be wrong`);
    const stats = fakes.map((f) => f.prefill());
    const prompt = stats.reduce((a, s) => a + s.promptChars, 0);
    const cached = stats.reduce((a, s) => a + s.cachedChars, 0);
    return {
      graph: options.graph,
      replicas,
      placement,
      judgments,
      callsPerJudgment: calls / judgments,
      promptCharsPerJudgment: prompt / judgments,
      uncachedCharsPerJudgment: (prompt - cached) / judgments,
      reuse: prompt === 0 ? 0 : cached / prompt,
      callsPerReplica: stats.map((s) => s.calls),
    };
  } finally {
    for (const router of routers) for (const b of router.backends()) await b.close?.();
    for (const fake of fakes) await fake.close();
  }
}

function arg(argv: readonly string[], name: string, fallback: string): string {
  const at = argv.indexOf(`--${name}`);
  return at >= 0 && argv[at + 1] !== undefined ? argv[at + 1]! : fallback;
}

async function main(argv: readonly string[]): Promise<void> {
  const groups = Number(arg(argv, 'groups', '16'));
  if (!Number.isInteger(groups) || groups < 1 || groups > 1_000) throw new Error('--groups: 1..1000');
  const graphs = arg(argv, 'graphs', 'default,single-judge,cascade').split(',');
  const replicaCounts = arg(argv, 'replicas', '1,4').split(',').map(Number);
  const corpus = loadCorpus();
  const rows: string[] = [];
  for (const graph of graphs) {
    for (const replicas of replicaCounts) {
      const placements: Placement[] = replicas === 1 ? ['single'] : ['affinity', 'round-robin'];
      for (const placement of placements) {
        const r = await measurePrefill({ graph, groups, replicas, placement, corpus });
        rows.push(
          `| ${graph} | ${replicas} | ${placement} | ${r.callsPerJudgment.toFixed(3)} | ` +
            `${r.promptCharsPerJudgment.toFixed(0)} | **${r.uncachedCharsPerJudgment.toFixed(0)}** | ` +
            `${(r.reuse * 100).toFixed(1)} % | ${r.callsPerReplica.join(' / ')} |`,
        );
      }
    }
  }
  const out = [
    `Groups of ${BLOCK}: ${groups} (${groups * BLOCK} judgments per row), block cache 64 chars, LRU, per replica.`,
    '',
    '| graph | replicas | placement | calls/judgment | prompt chars/judgment | uncached chars/judgment | reused | calls per replica |',
    '|---|---:|---|---:|---:|---:|---:|---|',
    ...rows,
  ];
  process.stdout.write(`${out.join('\n')}\n`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main(process.argv.slice(2)).catch((err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  });
}
