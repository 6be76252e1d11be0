/**
 * The manifest of a research run (`results.json` → `manifest`): what a reader needs to reproduce a number —
 * the command, the commit, when it ran, and for every node of every graph the backend, model and sampling
 * it was routed to — and where a run goes under `--out` so that a finished run is never overwritten.
 */
import { access, readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Config } from '../config.js';
import type { CompiledGraph } from '../judge/graph.js';
import type { Router } from '../judge/types.js';
import { DEFAULT_BACKEND, OFFLINE_BACKEND, replicaUrls } from '../settings/routing-file.js';
import type { ItemRecord } from './records.js';

/** One node as a run resolved it: where its calls went and how they were sampled. */
export interface ManifestNode {
  graph: string;
  graph_hash: string;
  node: string;
  role: string;
  backend: string;
  model: string;
  /** The backend's URL (each replica's when it has several); null for the offline backend. */
  base_url: string | string[] | null;
  temperature: number | null;
  top_p: number | null;
  max_tokens: number | null;
  seed: number | null;
  /** Every other setting of the node in the graph (focus, strictness, reasoning effort, weight…). */
  settings: Record<string, unknown>;
  /** The backend's bounded HTTP retries per call, and what the run observed. */
  retries: { max_retries: number | null; http_retries: number; reasks: number };
}

const ROUTED_KEYS = new Set([
  'id',
  'role',
  'model',
  'temperature',
  'top_p',
  'max_tokens',
  'seed',
  'sees',
  'stage',
]);

/** Which backend name serves a node, as the router resolves it (node override, role override, default). */
function backendNameOf(judge: Config['judge'], node: { id: string; role: string }): string {
  const file = judge.file;
  return file?.nodes[node.id]?.backend ?? file?.roles[node.role]?.backend ?? file?.default ?? DEFAULT_BACKEND;
}

function backendFacts(
  judge: Config['judge'],
  name: string,
): { base_url: string | string[] | null; max_retries: number | null } {
  const settings = name === DEFAULT_BACKEND ? judge.default : judge.file?.backends[name];
  if (name === OFFLINE_BACKEND || settings === undefined || settings === 'offline') {
    return { base_url: null, max_retries: null };
  }
  const urls = replicaUrls(settings);
  return { base_url: urls.length === 1 ? (urls[0] ?? null) : urls, max_retries: settings.max_retries };
}

/** Observed HTTP retries and re-asks per (graph, node), over the records of a run. */
function observedRetries(records: Iterable<ItemRecord>): Map<string, { http: number; reasks: number }> {
  const out = new Map<string, { http: number; reasks: number }>();
  for (const r of records) {
    for (const m of r.messages) {
      const key = `${r.graphHash}|${m.nodeId}`;
      const seen = out.get(key) ?? { http: 0, reasks: 0 };
      const reasks = m.reasks ?? 0;
      seen.reasks += reasks;
      seen.http += Math.max(0, (m.attempts ?? 0) - 1 - reasks);
      out.set(key, seen);
    }
  }
  return out;
}

/**
 * Every node of every graph (a cascade's escalation nodes too), routed as the run routes it. Nothing secret:
 * API keys are never read.
 */
export function manifestNodes(
  graphs: readonly { label: string; graph: CompiledGraph }[],
  router: Router,
  judge: Config['judge'],
  records: Iterable<ItemRecord> = [],
): ManifestNode[] {
  const retries = observedRetries(records);
  const out: ManifestNode[] = [];
  const visit = (label: string, graph: CompiledGraph): void => {
    for (const node of graph.spec.nodes) {
      const route = router.route(node);
      const backend = backendNameOf(judge, node);
      const facts = backendFacts(judge, backend);
      const seen = retries.get(`${graph.hash}|${node.id}`);
      const settings: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(node)) if (!ROUTED_KEYS.has(k) && v !== undefined) settings[k] = v;
      out.push({
        graph: label,
        graph_hash: graph.hash,
        node: node.id,
        role: node.role,
        backend: route.model === 'offline' ? OFFLINE_BACKEND : backend,
        model: route.model,
        base_url: facts.base_url,
        temperature: route.temperature ?? node.temperature ?? null,
        top_p: route.topP ?? node.top_p ?? null,
        max_tokens: route.maxTokens ?? node.max_tokens ?? null,
        seed: node.seed ?? null,
        settings,
        retries: { max_retries: facts.max_retries, http_retries: seen?.http ?? 0, reasks: seen?.reasks ?? 0 },
      });
    }
    if (graph.cascade !== undefined) visit(`${label} → ${graph.cascade.then.name}`, graph.cascade.then);
  };
  for (const g of graphs) visit(g.label, g.graph);
  return out;
}

/** The checkout's commit (read from .git, worktrees included), or null outside a git checkout. */
export async function gitCommit(cwd = process.cwd()): Promise<string | null> {
  try {
    let gitDir = join(cwd, '.git');
    const dotGit = await readFile(gitDir, 'utf8').catch(() => null);
    if (dotGit !== null && dotGit.startsWith('gitdir:')) gitDir = dotGit.slice(7).trim();
    const head = (await readFile(join(gitDir, 'HEAD'), 'utf8')).trim();
    if (!head.startsWith('ref:')) return head;
    const ref = head.slice(4).trim();
    const common = (await readFile(join(gitDir, 'commondir'), 'utf8').catch(() => null))?.trim();
    const roots = [gitDir, ...(common === undefined ? [] : [resolve(gitDir, common)])];
    for (const root of roots) {
      const loose = await readFile(join(root, ref), 'utf8').catch(() => null);
      if (loose !== null) return loose.trim();
      const packed = await readFile(join(root, 'packed-refs'), 'utf8').catch(() => null);
      const line = packed?.split('\n').find((l) => l.endsWith(` ${ref}`));
      if (line !== undefined) return line.split(' ')[0] ?? null;
    }
    return null;
  } catch {
    return null;
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}

/** Most runs kept side by side under one `--out` (a bound on the search, not on the user). */
export const MAX_RUNS_PER_OUT = 1000;

/**
 * Where a run writes under `--out`: `OUT` itself unless it holds a finished run (a `results.json`), else the
 * first `OUT/run-N` (N = 2, 3, …) without one. An unfinished run there is resumed (its records are keyed by
 * judgment, item and nonce, so only what the same settings would send is reused); a finished one is kept.
 */
export async function runDirectory(out: string, finished = 'results.json'): Promise<string> {
  if (!(await exists(join(out, finished)))) return out;
  for (let n = 2; n <= MAX_RUNS_PER_OUT; n++) {
    const dir = join(out, `run-${n}`);
    if (!(await exists(join(dir, finished)))) return dir;
  }
  throw new Error(`${out} already holds ${MAX_RUNS_PER_OUT} finished runs; pick another --out`);
}

/** The manifest fields known when a run starts (`finished_at` and `nodes` are added when it ends). */
export interface ManifestStart {
  command: string[];
  git_commit: string | null;
  started_at: string;
  out: string;
  limit: number | null;
  epochs: number;
  /** Seeds the fence nonces and the bootstrap; null when the run draws random nonces (`probe`). */
  seed: number | null;
  backend: string;
  dataset: string;
  dataset_sha256: string;
}

/** `command` is the npm script and the argv after it, as it can be run again. */
export async function startManifest(
  script: string,
  fields: Omit<ManifestStart, 'command' | 'git_commit' | 'started_at'>,
): Promise<ManifestStart> {
  const start: ManifestStart = {
    command: ['npm', 'run', script, '--', ...process.argv.slice(2)],
    git_commit: await gitCommit(),
    started_at: new Date().toISOString(),
    ...fields,
  };
  return start;
}
