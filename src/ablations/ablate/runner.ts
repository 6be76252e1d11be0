import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { basename, extname, join } from 'node:path';
import { RewardError } from '../../errors.js';
import type { CompiledGraph } from '../../judge/graph.js';
import { compileSpec, getPreset, PRESETS, voteGraph } from '../../judge/presets.js';
import { judgmentKey, keySettingsOf } from '../../judge/key.js';
import { seededNonce } from '../../judge/nonce.js';
import type { JudgmentInput } from '../../judge/types.js';
import { PROMPT_VERSION } from '../../roles/index.js';
import { analyze } from './analysis.js';
import { withEfforts, type EffortMix } from './effort-variants.js';
import { epochSummary } from './epochs.js';
import { planBaselines, voteTokensPerCall, type PlannedBaseline } from './baselines.js';
import type { Dataset, DatasetItem } from '../dataset.js';
import { f1CostSvg, precisionRecallSvg } from '../plots.js';
import { DEFAULT_DEADLINE_MS, judgeOnce, runResumable, toInput } from '../pool.js';
import { isFailure, loadRecords, recordId, toRecord, type ItemRecord } from '../records.js';
import { recordingRouter, type CallRecord, type ResponseCache, type SpendMeter } from '../recording.js';
import { renderReport } from './report.js';
import type { AblationResults, GraphEntry, ResumableRun, RunOptions, Timing } from '../types.js';
import { timingSummary } from './usage.js';

export interface ResolveOptions {
  /** Reference graph for paired comparisons, added if missing (default `default`; null = none). */
  reference?: string | null | undefined;
  /** Reads a graph JSON file (names ending in `.json`); injected so tests need no files. */
  readGraphFile?: ((path: string) => Promise<string>) | undefined;
  /** Reasoning-effort mixes (`--reasoning-effort`): each adds a variant of every graph asked for. */
  efforts?: readonly EffortMix[] | undefined;
}

/** A graph file's own `name` field, when it has a non-empty one. */
function specName(json: unknown): string | undefined {
  if (typeof json !== 'object' || json === null) return undefined;
  const name = (json as { name?: unknown }).name;
  return typeof name === 'string' && name.trim() !== '' ? name.trim() : undefined;
}

/**
 * The label of a graph asked for by `name`: a graph file (`*.json`) is labelled by its `name` field, else its
 * file name without the extension — never by its path, which is kept as an alias (so `--reference FILE` and
 * `--canary-graph FILE` still find it). A preset keeps its name.
 */
function labelOf(name: string, graph: CompiledGraph): string {
  return name.endsWith('.json') ? graph.name : name;
}

async function compileNamed(name: string, read: (path: string) => Promise<string>): Promise<CompiledGraph> {
  if (name.endsWith('.json')) {
    let json: unknown;
    try {
      json = JSON.parse(await read(name));
    } catch (err) {
      throw new RewardError(
        'RW_INVALID_GRAPH',
        `graph file ${name}: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
    return compileSpec(json, specName(json) ?? basename(name, extname(name)));
  }
  const preset = getPreset(name);
  if (preset === undefined) throw new RewardError('RW_UNKNOWN_GRAPH', `unknown graph "${name}"`);
  return preset;
}

/** A cascade stage as the preset with the same hash if there is one, else under `fallback`. */
function asStage(graph: CompiledGraph, fallback: string): [string, CompiledGraph] {
  for (const [name, preset] of PRESETS) {
    if (preset.hash === graph.hash && name !== 'default') return [name, preset];
  }
  return [fallback, graph];
}

/**
 * Adds a graph to `entries` unless one with the same hash is there: then `label` becomes an alias of that
 * entry (which stops being `auto` when asked for). Returns the entry that holds the graph.
 */
export function addEntry(
  entries: GraphEntry[],
  label: string,
  graph: CompiledGraph,
  auto: boolean,
): GraphEntry {
  const existing = entries.find((e) => e.graph.hash === graph.hash);
  if (existing !== undefined) {
    if (existing.label !== label && !existing.aliases.includes(label)) existing.aliases.push(label);
    if (!auto) existing.auto = false;
    return existing;
  }
  if (entries.some((e) => e.label === label)) {
    throw new RewardError('RW_INVALID_GRAPH', `two different graphs are both named "${label}"`);
  }
  const entry: GraphEntry = { label, graph, aliases: [], baselineFor: [], auto };
  entries.push(entry);
  return entry;
}

/** Adds the graph asked for as `name` under its label (see `labelOf`), a file's path as an alias. */
async function addNamed(
  entries: GraphEntry[],
  name: string,
  read: (path: string) => Promise<string>,
  auto: boolean,
): Promise<GraphEntry> {
  const graph = await compileNamed(name, read);
  const label = labelOf(name, graph);
  const clash = entries.find((e) => e.label === label && e.graph.hash !== graph.hash);
  if (clash !== undefined) {
    throw new RewardError(
      'RW_INVALID_GRAPH',
      `two different graphs are both named "${label}" (${[name, ...clash.aliases].join(' and ')}): ` +
        'give a graph file another "name"',
    );
  }
  const entry = addEntry(entries, label, graph, auto);
  if (label !== name && entry.label !== name && !entry.aliases.includes(name)) entry.aliases.push(name);
  return entry;
}

/**
 * Turns graph names (presets or `*.json` spec files) into run entries: one entry per distinct graph hash
 * (a second name of the same graph becomes an alias), then the reference graph, added once. The
 * budget-matched vote baselines are added by `runAblation`, once it has measured what each graph spends.
 */
export async function resolveGraphs(
  names: readonly string[],
  options: ResolveOptions = {},
): Promise<{ entries: GraphEntry[]; reference: string | null }> {
  const read = options.readGraphFile ?? ((path: string) => readFile(path, 'utf8'));
  const entries: GraphEntry[] = [];
  if (names.length === 0) throw new RewardError('RW_BAD_REQUEST', 'no graphs given');
  for (const name of names) await addNamed(entries, name, read, false);
  for (const entry of [...entries]) {
    for (const mix of options.efforts ?? [])
      addEntry(entries, ...withEfforts(entry.graph, entry.label, mix), false);
  }
  const referenceName = options.reference === undefined ? 'default' : options.reference;
  // The reference may resolve to a graph asked for under another name (`default` = `analysts-2`).
  const reference =
    referenceName === null ? null : (await addNamed(entries, referenceName, read, true)).label;
  // A cascade is reported beside its two stages, so its savings and precision cost are read off one table.
  for (const entry of [...entries]) {
    const cascade = entry.graph.cascade;
    if (cascade === undefined) continue;
    addEntry(entries, ...asStage(cascade.first, `${entry.label}.first`), true);
    addEntry(entries, ...asStage(cascade.then, `${entry.label}.then`), true);
  }
  return { entries, reference };
}

export interface AblationOptions extends RunOptions {
  dataset: Dataset;
  entries: readonly GraphEntry[];
  /** Use only the first N items of the dataset. */
  limit?: number | undefined;
  /** Label of the reference graph for paired comparisons (must be among `entries`), or null. */
  reference?: string | null | undefined;
  /**
   * Add the budget-matched vote baselines (default true): after the entries ran, `vote-N` matched to each
   * graph's measured mean calls, then to its mean tokens (N from the vote judges' tokens per call).
   */
  baseline?: boolean | undefined;
  /** Re-run items whose stored result is a failure (default: a stored failure is a finished item). */
  retryFailed?: boolean | undefined;
  /** Called after each record is appended (tests use it to interrupt a run). */
  onRecord?: ((record: ItemRecord) => void) | undefined;
  /** Judge every item this many times, each repeat with its own seeded nonce (default 1). */
  epochs?: number | undefined;
  /** Answer repeated requests from this cache (shared across output folders; opt-in). */
  cache?: ResponseCache | undefined;
  /** Counts the tokens every call spends (the spend cap reads it). */
  meter?: SpendMeter | undefined;
  /**
   * Builds `results.json`'s `manifest` from the run's entries (baselines included) and records;
   * `finished_at` is set when the results are written.
   */
  manifest?:
    ((entries: readonly GraphEntry[], records: readonly ItemRecord[]) => Record<string, unknown>) | undefined;
}

/** One planned judgment of an ablation. */
interface Task {
  entry: GraphEntry;
  item: DatasetItem;
  input: JudgmentInput;
  key: string;
  epoch: number;
  nonce: string;
}

/** `ran`/`reused` count judgments; the records file is `items.jsonl`. */
export interface AblationRun extends ResumableRun<AblationResults> {
  /** Per entry label, its records aligned with the items run (empty when the run did not complete). */
  outcomes: ReadonlyMap<string, readonly ItemRecord[]>;
  /** Per entry label, per epoch, its records aligned with the items (epoch 0 is `outcomes`). */
  epochOutcomes: ReadonlyMap<string, readonly (readonly ItemRecord[])[]>;
}

/** Runs one planned judgment, recording its calls, and converts it to its record. */
async function judgeTask(
  { entry, item, input, key, epoch, nonce }: Task,
  options: AblationOptions,
): Promise<ItemRecord> {
  const calls: CallRecord[] = [];
  const router = recordingRouter(options.router, { calls, cache: options.cache, meter: options.meter });
  const judgment = await judgeOnce(entry.graph, input, router, {
    deadlineMs: options.deadlineMs ?? DEFAULT_DEADLINE_MS,
    signal: options.signal,
    limits: options.limits,
    reasoningFormat: options.reasoningFormat,
    nonce,
  });
  return toRecord(judgment, key, item.id, { item, epoch, nonce, calls });
}

/** The reference label of a run, checked to be among its entries (default `default`; null = none). */
function checkedReference(options: AblationOptions): string | null {
  const reference = options.reference === undefined ? 'default' : options.reference;
  if (reference !== null && !options.entries.some((e) => e.label === reference)) {
    throw new RewardError('RW_BAD_REQUEST', `reference graph "${reference}" is not among the graphs`);
  }
  return reference;
}

/** Copies of the entries, so the baselines can be added and linked without changing the caller's. */
function copyEntries(entries: readonly GraphEntry[]): GraphEntry[] {
  return entries.map((e) => ({ ...e, aliases: [...e.aliases], baselineFor: [...e.baselineFor] }));
}

/** The judgments of `batch` over every item and epoch; records each entry's record ids per epoch in `ids`. */
function planTasks(
  batch: readonly GraphEntry[],
  items: readonly DatasetItem[],
  ids: Map<string, string[][]>,
  options: AblationOptions,
): Task[] {
  const tasks: Task[] = [];
  const settings = keySettingsOf(options);
  const seed = options.seed ?? 1;
  const epochs = options.epochs ?? 1;
  for (const entry of batch) ids.set(entry.label, []);
  // Epoch-major, then item-major: an interrupted run has paired results across graphs for the items it
  // finished, and a whole first epoch before any repeat.
  for (let epoch = 0; epoch < epochs; epoch++) {
    for (const item of items) {
      const input = toInput(item);
      for (const entry of batch) {
        const key = judgmentKey(entry.graph, input, options.router, settings, 'raw');
        const nonce = seededNonce(seed, key, item.id, String(epoch));
        const perEpoch = ids.get(entry.label) ?? [];
        (perEpoch[epoch] ??= []).push(recordId(key, item.id, nonce));
        tasks.push({ entry, item, input, key, epoch, nonce });
      }
    }
  }
  return tasks;
}

/** The analysed results of a finished run, with the epoch summary and the manifest when asked for. */
function buildResults(
  options: AblationOptions,
  items: readonly DatasetItem[],
  entries: readonly GraphEntry[],
  outcomes: ReadonlyMap<string, readonly ItemRecord[]>,
  epochOutcomes: ReadonlyMap<string, readonly (readonly ItemRecord[])[]>,
  reference: string | null,
): AblationResults {
  const results = analyze({
    items,
    datasetSha256: options.dataset.sha256,
    invalidLines: options.dataset.invalid.length,
    entries,
    outcomes,
    seed: options.seed ?? 1,
    resamples: options.resamples,
    backend: options.router.name,
    promptVersion: PROMPT_VERSION,
    reference,
  });
  if ((options.epochs ?? 1) > 1) results.epochs = epochSummary(items, epochOutcomes);
  if (options.manifest !== undefined) {
    const records = [...epochOutcomes.values()].flat(2);
    results.manifest = { ...options.manifest(entries, records), finished_at: new Date().toISOString() };
  }
  return results;
}

/** Writes results.json, timing.json, report.md and the two plots into `outDir`; returns their paths. */
async function writeOutputs(outDir: string, results: AblationResults, timing: Timing): Promise<string[]> {
  const files = {
    results: join(outDir, 'results.json'),
    timing: join(outDir, 'timing.json'),
    report: join(outDir, 'report.md'),
    pr: join(outDir, 'precision-recall.svg'),
    cost: join(outDir, 'f1-vs-tokens.svg'),
  };
  await writeFile(files.results, `${JSON.stringify(results, null, 2)}\n`);
  await writeFile(files.timing, `${JSON.stringify(timing, null, 2)}\n`);
  await writeFile(files.report, renderReport(results, timing));
  await writeFile(files.pr, precisionRecallSvg(results));
  await writeFile(files.cost, f1CostSvg(results));
  return Object.values(files);
}

/**
 * Runs every entry over every item, appending each result to `OUT/items.jsonl` as it arrives, then the
 * budget-matched vote baselines (which need the entries' measured spend). Items already in that file (same
 * judgment key and item id) are not run again, so an interrupted run resumes. When every item is done,
 * writes `results.json` (deterministic for a given set of records and seed), `timing.json` (latencies,
 * run-dependent), `report.md` and the SVG plots.
 */
export async function runAblation(options: AblationOptions): Promise<AblationRun> {
  const items =
    options.limit === undefined ? options.dataset.items : options.dataset.items.slice(0, options.limit);
  const reference = checkedReference(options);
  const entries = copyEntries(options.entries);
  await mkdir(options.outDir, { recursive: true });
  const itemsPath = join(options.outDir, 'items.jsonl');
  const loaded = await loadRecords(itemsPath);
  const stored = loaded.records;
  /** Per label, per epoch, the record id of each item. */
  const ids = new Map<string, string[][]>();
  const epochs = options.epochs ?? 1;
  let ran = 0;
  let reused = 0;

  /** Judges `batch` over every item and epoch (what is not stored yet); false when interrupted. */
  const judgeAll = async (batch: readonly GraphEntry[], label: string): Promise<boolean> => {
    const session = await runResumable(
      {
        tasks: planTasks(batch, items, ids, options),
        idOf: ({ key, item, nonce }) => recordId(key, item.id, nonce),
        stored,
        isFailure,
        retryFailed: options.retryFailed,
        path: itemsPath,
        label,
        onRecord: options.onRecord,
        run: (task) => judgeTask(task, options),
      },
      options,
    );
    ran += session.ran;
    reused += session.reused;
    return session.completed;
  };
  const recordsOf = (label: string, epoch = 0): ItemRecord[] => {
    const list = ids.get(label)?.[epoch] ?? [];
    return items.map((item, i) => {
      const record = stored.get(list[i] ?? '');
      if (record === undefined) throw new Error(`no result for ${label} / ${item.id} (epoch ${epoch + 1})`);
      return record;
    });
  };
  /** Adds the planned baselines and judges the new ones. */
  const addBaselines = async (plan: readonly PlannedBaseline[], label: string): Promise<boolean> => {
    const before = entries.length;
    for (const b of plan) {
      const vote = addEntry(entries, `vote-${b.n}`, voteGraph(b.n), true);
      vote.baselineFor.push({ graph: b.graph, matchedOn: b.matchedOn, tokensPerCall: b.tokensPerCall });
    }
    return judgeAll(entries.slice(before), label);
  };

  let completed = await judgeAll(entries, 'ablate');
  if (completed && (options.baseline ?? true)) {
    completed = await addBaselines(planBaselines(entries, recordsOf), 'baselines (calls)');
    const perCall = completed ? voteTokensPerCall(entries, recordsOf) : null;
    if (completed && perCall !== null) {
      completed = await addBaselines(planBaselines(entries, recordsOf, perCall), 'baselines (tokens)');
    }
  }
  if (!completed) {
    return {
      completed: false,
      results: null,
      ran,
      reused,
      badLines: loaded.badLines,
      files: [itemsPath],
      outcomes: new Map(),
      epochOutcomes: new Map(),
    };
  }

  const outcomes = new Map<string, ItemRecord[]>(entries.map((e) => [e.label, recordsOf(e.label)]));
  const epochOutcomes = new Map(
    entries.map((e) => [e.label, Array.from({ length: epochs }, (_, k) => recordsOf(e.label, k))]),
  );
  const results = buildResults(options, items, entries, outcomes, epochOutcomes, reference);
  const timing = timingSummary(entries, outcomes);
  const files = await writeOutputs(options.outDir, results, timing);
  return {
    completed: true,
    results,
    ran,
    reused,
    badLines: loaded.badLines,
    files: [itemsPath, ...files],
    outcomes,
    epochOutcomes,
  };
}
