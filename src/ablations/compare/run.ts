/**
 * Two ablation runs side by side (`npm run compare -- RUN_A RUN_B`): for each graph both ran (or a named
 * pair), the paired differences B − A of F1, precision, recall and accuracy on the items both decided, with
 * the same cluster jackknife-t intervals and McNemar tests `ablate` uses (Holm over the graphs), and the
 * items whose verdict flipped. For two models, prompt versions or dates of the same judge.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { pairedClusters } from '../ablate/analysis.js';
import { clusterIndex, type DatasetItem } from '../dataset.js';
import { isFailure, loadRecords, type ItemRecord } from '../records.js';
import type { ItemSet } from '../tallies.js';
import { DEFAULT_RESAMPLES } from '../stats/clustered.js';
import { pairedRates, type PairedRates } from '../stats/rates.js';
import { holm } from '../stats/significance.js';

const RunResults = z.object({
  graphs: z.array(z.object({ name: z.string(), hash: z.string() })),
  manifest: z
    .object({
      nodes: z.array(z.object({ model: z.string() })).optional(),
      git_commit: z.string().nullable().optional(),
      started_at: z.string().optional(),
    })
    .optional(),
  promptVersion: z.string().optional(),
  backend: z.string().optional(),
});

export interface LoadedRun {
  dir: string;
  /** Graph label → its hash, from `results.json`. */
  graphs: Map<string, string>;
  records: ItemRecord[];
  /** What the manifest says the run used (model per node), for the header. */
  describe: string;
}

/** A finished run folder: its `results.json` graph labels and its `items.jsonl` records. */
export async function loadRun(dir: string): Promise<LoadedRun> {
  let text: string;
  try {
    text = await readFile(join(dir, 'results.json'), 'utf8');
  } catch {
    throw new Error(`${dir}: no results.json (not a finished ablate run)`);
  }
  const results = RunResults.parse(JSON.parse(text));
  const loaded = await loadRecords(join(dir, 'items.jsonl'));
  const models = new Set((results.manifest?.nodes ?? []).map((n) => n.model));
  const commit = results.manifest?.git_commit;
  const started = results.manifest?.started_at;
  const describe = [
    `backend ${results.backend ?? '?'}`,
    `models ${models.size === 0 ? '?' : [...models].join(', ')}`,
    `prompt ${results.promptVersion ?? '?'}`,
    ...(typeof commit === 'string' ? [`commit ${commit.slice(0, 12)}`] : []),
    ...(typeof started === 'string' ? [`started ${started}`] : []),
  ].join(' · ');
  return {
    dir,
    graphs: new Map(results.graphs.map((g) => [g.name, g.hash])),
    records: [...loaded.records.values()],
    describe,
  };
}

export interface Flip {
  item: string;
  label: 0 | 1 | null;
  a: string;
  b: string;
}

export interface GraphComparison {
  /** Graph label in A and in B (the same unless a pair was named). */
  a: string;
  b: string;
  /** Items both runs judged (epoch 1), and among them both decided. */
  shared: number;
  /** B − A on the items both decided. */
  rates: PairedRates;
  holmF1: number | null;
  holmMcnemar: number | null;
  flips: Flip[];
  /** Items whose label neither record carries (older runs): left out of the rates. */
  unlabelled: number;
}

export interface Comparison {
  a: { dir: string; describe: string };
  b: { dir: string; describe: string };
  graphs: GraphComparison[];
  /** Graphs only one run has. */
  onlyA: string[];
  onlyB: string[];
}

const outcome = (r: ItemRecord): string => (isFailure(r) ? r.status : (r.verdict ?? r.status));

/** Epoch-1 records of one graph, by item id. */
function byItem(run: LoadedRun, label: string): Map<string, ItemRecord> {
  const hash = run.graphs.get(label);
  const out = new Map<string, ItemRecord>();
  for (const r of run.records) if (r.graphHash === hash && (r.epoch ?? 0) === 0) out.set(r.item, r);
  return out;
}

function compareGraph(
  runA: LoadedRun,
  runB: LoadedRun,
  pair: { a: string; b: string },
  options: { seed: number; resamples: number },
): Omit<GraphComparison, 'holmF1' | 'holmMcnemar'> {
  const a = byItem(runA, pair.a);
  const b = byItem(runB, pair.b);
  const ids = [...a.keys()].filter((id) => b.has(id)).sort();
  const items: DatasetItem[] = [];
  const recA: ItemRecord[] = [];
  const recB: ItemRecord[] = [];
  const flips: Flip[] = [];
  let unlabelled = 0;
  for (const id of ids) {
    const x = a.get(id);
    const y = b.get(id);
    if (x === undefined || y === undefined) continue;
    const label = x.label ?? y.label ?? null;
    if (outcome(x) !== outcome(y)) flips.push({ item: id, label, a: outcome(x), b: outcome(y) });
    if (label === null) {
      unlabelled += 1;
      continue;
    }
    const cluster = x.cluster ?? y.cluster ?? id;
    items.push({
      id,
      question: '',
      candidate: '',
      ground_truth: cluster,
      label,
      kind: 'positive',
      source: '',
      venue: '',
      area: '',
    });
    recA.push(x);
    recB.push(y);
  }
  const set: ItemSet = { items, clusters: clusterIndex(items), hardNegatives: false };
  // B − A: the later run against the earlier one.
  const rates = pairedRates(pairedClusters(set, recB, recA), {
    seed: options.seed,
    resamples: options.resamples,
    level: 0.95,
    method: 'jackknife-t',
  });
  return { a: pair.a, b: pair.b, shared: ids.length, rates, flips, unlabelled };
}

/**
 * Compares two runs. `pairs` names graph pairs (`A-label` in run A against `B-label` in run B); by default
 * every graph label both runs have, asked-for ones and automatic ones alike.
 */
export async function compareRuns(
  dirA: string,
  dirB: string,
  options: { pairs?: { a: string; b: string }[] | undefined; seed?: number; resamples?: number } = {},
): Promise<Comparison> {
  const [runA, runB] = await Promise.all([loadRun(dirA), loadRun(dirB)]);
  const shared = [...runA.graphs.keys()].filter((g) => runB.graphs.has(g));
  const pairs = options.pairs ?? shared.map((g) => ({ a: g, b: g }));
  for (const p of pairs) {
    if (!runA.graphs.has(p.a)) throw new Error(`${dirA} has no graph "${p.a}"`);
    if (!runB.graphs.has(p.b)) throw new Error(`${dirB} has no graph "${p.b}"`);
  }
  const est = { seed: options.seed ?? 1, resamples: options.resamples ?? DEFAULT_RESAMPLES };
  const raw = pairs.map((p) => compareGraph(runA, runB, p, est));
  const f1 = holm(raw.map((g) => g.rates.f1.p));
  const mcnemar = holm(raw.map((g) => g.rates.mcnemar.clusteredP));
  return {
    a: { dir: dirA, describe: runA.describe },
    b: { dir: dirB, describe: runB.describe },
    graphs: raw.map((g, i) => ({ ...g, holmF1: f1[i] ?? null, holmMcnemar: mcnemar[i] ?? null })),
    onlyA: [...runA.graphs.keys()].filter((g) => !runB.graphs.has(g)),
    onlyB: [...runB.graphs.keys()].filter((g) => !runA.graphs.has(g)),
  };
}
