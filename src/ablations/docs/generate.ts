/**
 * The committed `docs/ablations/` results, regenerated from scratch: every set in DOCS_RUNS is ablated and
 * probed on the offline backend (no LLM, no network, deterministic), and the generated blocks of
 * docs/ablations.md are rendered from the same results. `npm run docs:ablations` writes them; a test regenerates them
 * and fails on any difference (test/ablations/docs.test.ts).
 */
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createOfflineBackend } from '../../judge/backends/offline.js';
import { getPreset } from '../../judge/presets.js';
import { createRouter } from '../../judge/routing.js';
import type { Router } from '../../judge/types.js';
import { loadDataset } from '../dataset.js';
import { graphLabel, pPair, proportionCell, table, withCi } from '../format.js';
import { f1CostSvg, precisionRecallSvg } from '../plots.js';
import { METRIC_TEXT, renderProbeReport, resultText } from '../probe/report.js';
import { runProbes } from '../probe/run.js';
import type { ProbeResults } from '../probe/scoring.js';
import { renderReport, renderSummary } from '../ablate/report.js';
import { resolveGraphs, runAblation } from '../ablate/runner.js';
import type { AblationResults } from '../types.js';

export type BlockKind = 'summary' | 'paired' | 'probes';

/** One documented run: a set of `../shared/datasets`, the graphs, and where it goes under docs/ablations/. */
export interface DocsRun {
  /** Prefix of its generated blocks (`openreview-summary`, …). */
  key: string;
  dataset: string;
  dir: string;
  graphs: readonly string[];
  probeGraph: string;
  blocks: readonly BlockKind[];
}

const GRAPHS = [
  'default',
  'ordinary',
  'single-judge',
  'vote-3',
  'lexical',
  'proposer-critic',
  'round-robin-3',
];

export const DOCS_RUNS: readonly DocsRun[] = [
  {
    key: 'openreview',
    dataset: 'openreview-pairs.jsonl',
    dir: 'openreview-offline',
    graphs: GRAPHS,
    probeGraph: 'default',
    blocks: ['summary', 'paired', 'probes'],
  },
  {
    key: 'moose',
    dataset: 'moose-chem-expert-pairs.jsonl',
    dir: 'moose-chem-offline',
    graphs: GRAPHS,
    probeGraph: 'default',
    blocks: ['summary', 'paired'],
  },
];

/** Files rendered into each run's directory (no items.jsonl or probe cases: they hold dataset text). */
export const RUN_FILES = [
  'results.json',
  'report.md',
  'precision-recall.svg',
  'f1-vs-tokens.svg',
  'probes.json',
  'probe-report.md',
] as const;

/** docs/ablations/FINGERPRINTS: each run's fingerprint when its docs were generated. */
export const FINGERPRINTS = 'fingerprints.json';

export interface RunResults {
  run: DocsRun;
  ablation: AblationResults;
  probes: ProbeResults;
}

export interface GeneratedDocs {
  /** Path under docs/ablations/ → content. */
  files: Map<string, string>;
  /** Name → content of the `<!-- generated:NAME -->` blocks of docs/ablations.md. */
  blocks: Map<string, string>;
  results: RunResults[];
}

const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;

function offlineRouter(): Router {
  return createRouter({ default: 'offline', offline: createOfflineBackend });
}

async function runOne(
  run: DocsRun,
  datasetsDir: string,
  scratch: string,
  router: Router,
): Promise<RunResults> {
  const dataset = await loadDataset(join(datasetsDir, run.dataset));
  const { entries, reference } = await resolveGraphs(run.graphs);
  const ablation = await runAblation({
    dataset,
    entries,
    reference,
    router,
    outDir: join(scratch, run.dir),
    seed: 1,
  });
  if (ablation.results === null) throw new Error(`docs: the ablation of ${run.dataset} did not complete`);
  const graph = getPreset(run.probeGraph);
  if (graph === undefined) throw new Error(`docs: no graph ${run.probeGraph}`);
  const probes = await runProbes({ items: dataset.items, graph, router });
  return { run, ablation: ablation.results, probes };
}

/** The probe table of docs/ablations.md: probe, metric, rate with its interval, gate, result. */
function probeTable(p: ProbeResults): string {
  return table(
    ['probe', 'metric', 'rate [95% CI]', 'gate', 'result'],
    p.probes.map((r) => [
      r.name,
      METRIC_TEXT[r.metric],
      `${proportionCell(r.rate)}${r.flipsToMatch === null ? '' : `, ${r.flipsToMatch} towards match`}`,
      r.gate === null ? 'report only' : `≤ ${(r.gate * 100).toFixed(0)}%`,
      resultText(r),
    ]),
  );
}

/** The paired table of docs/ablations.md: ΔF1 (headline) beside Δaccuracy and McNemar (tests of accuracy). */
function pairedTable(a: AblationResults): string {
  return table(
    [
      'graph',
      'ΔF1 [95% CI]',
      'p (Holm)',
      'Δaccuracy [95% CI]',
      'McNemar exact p (Holm)',
      'clustered McNemar p (Holm)',
    ],
    a.graphs.flatMap((g) => {
      const c = g.paired;
      if (c === null) return [];
      return [
        [
          graphLabel(g),
          withCi(c.rates.f1.point, c.rates.f1.ci),
          pPair(c.rates.f1.p, c.holm.f1),
          withCi(c.rates.accuracy.point, c.rates.accuracy.ci),
          pPair(c.rates.mcnemar.exactP, c.holm.mcnemarExact),
          pPair(c.rates.mcnemar.clusteredP, c.holm.mcnemarClustered),
        ],
      ];
    }),
  );
}

const BLOCKS: Record<BlockKind, (r: RunResults) => string> = {
  summary: (r) => renderSummary(r.ablation).trimEnd(),
  paired: (r) => pairedTable(r.ablation),
  probes: (r) => probeTable(r.probes),
};

/**
 * Runs the given sets (default: every DOCS_RUNS set) on the offline backend (scratch files under `scratch`,
 * which the caller owns) and renders their files and blocks. Deterministic: the same code and data give the
 * same bytes.
 */
export async function generateDocs(
  datasetsDir: string,
  scratch: string,
  runs: readonly DocsRun[] = DOCS_RUNS,
): Promise<GeneratedDocs> {
  const router = offlineRouter();
  const results: RunResults[] = [];
  for (const run of runs) results.push(await runOne(run, datasetsDir, scratch, router));
  const files = new Map<string, string>();
  const blocks = new Map<string, string>();
  for (const r of results) {
    const { run, ablation, probes } = r;
    const rendered: Record<(typeof RUN_FILES)[number], string> = {
      'results.json': json(ablation),
      // Without timing: latencies are run-dependent, the committed report must not be.
      'report.md': renderReport(ablation),
      'precision-recall.svg': precisionRecallSvg(ablation),
      'f1-vs-tokens.svg': f1CostSvg(ablation),
      'probes.json': json(probes),
      'probe-report.md': renderProbeReport(probes),
    };
    for (const name of RUN_FILES) files.set(`${run.dir}/${name}`, rendered[name]);
    for (const kind of run.blocks) blocks.set(`${run.key}-${kind}`, BLOCKS[kind](r));
  }
  return { files, blocks, results };
}

/**
 * What the docs of `run` are computed from: its dataset's bytes and every source file under `srcDir` (the
 * code), as one sha256. Equal fingerprints give equal docs (the run is deterministic), so a check can skip
 * regenerating a set whose fingerprint is the committed one.
 */
export async function fingerprint(run: DocsRun, datasetsDir: string, srcDir: string): Promise<string> {
  const hash = createHash('sha256');
  hash.update(`${run.key}\0`).update(await readFile(join(datasetsDir, run.dataset)));
  const files = (await readdir(srcDir, { recursive: true })).filter((f) => f.endsWith('.ts')).sort();
  for (const file of files) hash.update(`\0${file}\0`).update(await readFile(join(srcDir, file)));
  return hash.digest('hex').slice(0, 16);
}

const BLOCK = /<!-- generated:([a-z-]+) -->\n+([\s\S]*?)\n+<!-- \/generated:\1 -->/g;

/**
 * A Markdown block with its tables normalised (cells trimmed, separator rows `---`), so that a formatter
 * padding a page's table columns (prettier does) does not make a block look stale.
 */
export function normaliseTables(block: string): string {
  return block
    .split('\n')
    .map((line) => {
      if (!line.startsWith('|')) return line;
      const cells = line
        .slice(1, line.endsWith('|') ? -1 : undefined)
        .split(/(?<!\\)\|/)
        .map((c) => c.trim());
      return cells.every((c) => /^:?-+:?$/.test(c))
        ? `|${cells.map(() => '---').join('|')}|`
        : `| ${cells.join(' | ')} |`;
    })
    .join('\n');
}

/** The generated blocks of a Markdown text, by name. */
export function readBlocks(text: string): Map<string, string> {
  return new Map([...text.matchAll(BLOCK)].map((m) => [m[1] ?? '', m[2] ?? '']));
}

/** `text` with every generated block replaced by its new content; throws on a block with no content. */
export function fillBlocks(text: string, blocks: ReadonlyMap<string, string>): string {
  return text.replace(BLOCK, (_, name: string) => {
    const content = blocks.get(name);
    if (content === undefined) throw new Error(`docs: no generated content for block "${name}"`);
    // Blank lines around the content: what a Markdown formatter leaves as it is.
    return `<!-- generated:${name} -->\n\n${content}\n\n<!-- /generated:${name} -->`;
  });
}
