/**
 * What `ablate` and `probe` add around a run for a researcher: the `--dry-run` estimate, the spend cap, the
 * response cache, the run directory under `--out` (a finished run is kept), the manifest, TRANSCRIPTS_PATH
 * and the transcripts page.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Config } from '../config.js';
import type { CompiledGraph } from '../judge/graph.js';
import type { Router } from '../judge/types.js';
import type { DatasetItem } from './dataset.js';
import { warnGraphs } from './cli-common.js';
import { manifestNodes, runDirectory, startManifest, type ManifestStart } from './manifest.js';
import { ItemRecord, openJsonlSink, type JsonlSink } from './records.js';
import { createResponseCache, createSpendMeter, type ResponseCache, type SpendMeter } from './recording.js';
import { capStop, estimateSpend, renderEstimate, spendCap } from './spend.js';
import { renderTranscriptsHtml } from './transcripts-html.js';

/** Options of the research CLIs (node:util parseArgs format). */
export const RESEARCH_OPTIONS = {
  'dry-run': { type: 'boolean', default: false },
  'max-tokens': { type: 'string' },
  'max-usd': { type: 'string' },
  'usd-per-mtok': { type: 'string' },
  'cache-dir': { type: 'string' },
} as const;

export const RESEARCH_USAGE = `  --dry-run            print the estimated judgments, LLM calls and tokens, then exit without a call
  --max-tokens T       stop taking judgments before this invocation spends T tokens (prompt + completion);
                       the same command run again resumes (exit 3 when the cap stopped the run)
  --max-usd D          the same cap in dollars; needs --usd-per-mtok P (price per million tokens)
  --cache-dir DIR      answer a request seen before (same model, messages, sampling) from DIR, and store
                       new replies there; shared by any number of --out folders (off by default)`;

/** Exit code of a run the spend cap stopped (rerun to resume). */
export const EXIT_SPEND_CAP = 3;

export interface ResearchValues {
  'dry-run'?: boolean | undefined;
  'max-tokens'?: string | undefined;
  'max-usd'?: string | undefined;
  'usd-per-mtok'?: string | undefined;
  'cache-dir'?: string | undefined;
}

export interface SessionPlan {
  /** The npm script (for the manifest's `command`). */
  script: string;
  out: string;
  graphs: readonly { label: string; graph: CompiledGraph }[];
  /** The items the estimate judges offline (the first `sample` of them). */
  items: readonly DatasetItem[];
  /** How many of `items` the estimate judges (default 5). */
  sample?: number | undefined;
  judgmentsPerGraph: number;
  concurrency: number;
  baselines: boolean;
  /** The file a finished run leaves in its directory (default `results.json`): such a run is kept. */
  finished?: string | undefined;
  /** TRANSCRIPTS_PATH: every record is appended there too. */
  transcriptsPath?: string | undefined;
  manifest: Omit<ManifestStart, 'command' | 'git_commit' | 'started_at' | 'out' | 'backend'>;
}

export interface ResearchSession {
  /** The run's directory: `--out`, or `--out/run-N` when `--out` holds a finished run. */
  out: string;
  meter: SpendMeter;
  cache: ResponseCache | undefined;
  stop: (() => boolean) | undefined;
  onRecord: ((record: ItemRecord) => void) | undefined;
  manifest(
    graphs: readonly { label: string; graph: CompiledGraph }[],
    router: Router,
    judge: Config['judge'],
    records: readonly ItemRecord[],
  ): Record<string, unknown>;
  /** Flushes TRANSCRIPTS_PATH; writes the transcripts page to `html` (added to `files`) when not null. */
  close(html: string | null, files: string[]): Promise<void>;
  /** The exit code: `code`, or EXIT_SPEND_CAP with a message when the cap stopped the run. */
  finish(code: number): number;
}

/**
 * The session of a research run, or null after a `--dry-run` (the estimate is printed on stdout). What the
 * graphs' authors should know (a majority that can tie) is printed on stderr first.
 */
export async function researchSession(
  values: ResearchValues,
  plan: SessionPlan,
): Promise<ResearchSession | null> {
  warnGraphs(plan.graphs);
  const cap = spendCap(values);
  const needsEstimate = values['dry-run'] === true || cap.tokens !== null;
  const estimate = needsEstimate
    ? await estimateSpend(plan.graphs, plan.items, plan.judgmentsPerGraph, plan.sample)
    : undefined;
  if (values['dry-run'] === true && estimate !== undefined) {
    console.log(renderEstimate(estimate, cap, plan.baselines));
    return null;
  }
  const out = await runDirectory(plan.out, plan.finished);
  if (out !== plan.out) console.error(`${plan.out} holds a finished run (kept); this run goes to ${out}`);
  const meter = createSpendMeter();
  const reserve = Math.max(0, ...(estimate?.graphs.map((g) => g.maxTokensPerJudgment) ?? [0]));
  const stop = capStop(cap, meter, reserve, plan.concurrency);
  const start = await startManifest(plan.script, { ...plan.manifest, out, backend: '' });
  const sink: JsonlSink<unknown> | undefined =
    plan.transcriptsPath === undefined ? undefined : await openJsonlSink(plan.transcriptsPath);
  if (plan.transcriptsPath !== undefined) {
    console.error(`transcripts: every judgment is appended to ${plan.transcriptsPath} (TRANSCRIPTS_PATH)`);
  }
  const cacheDir = values['cache-dir'];
  return {
    out,
    meter,
    cache: cacheDir === undefined ? undefined : createResponseCache(cacheDir),
    stop,
    onRecord:
      sink === undefined
        ? undefined
        : (record) => void sink.append({ source: plan.script, run: out, ...record }),
    manifest(graphs, router, judge, records) {
      return {
        ...start,
        backend: router.name,
        spend: { tokens: meter.tokens, calls: meter.calls, cache_hits: meter.cacheHits, cap: cap.tokens },
        nodes: manifestNodes(graphs, router, judge, records),
      };
    },
    async close(html, files) {
      await sink?.close();
      if (html === null) return;
      const text = await readFile(join(out, 'items.jsonl'), 'utf8');
      const records: ItemRecord[] = [];
      for (const line of text.split('\n')) {
        if (line.trim() === '') continue;
        const parsed = ItemRecord.safeParse(JSON.parse(line));
        if (parsed.success) records.push(parsed.data);
      }
      await writeFile(html, renderTranscriptsHtml(records, { title: `${plan.script}: ${out}` }));
      files.push(html);
    },
    finish(code) {
      if (code !== 0 && stop?.() === true) {
        console.error(
          `spend cap reached: ${meter.tokens} tokens spent this invocation (${cap.text}); ` +
            'rerun the same command to resume.',
        );
        return EXIT_SPEND_CAP;
      }
      return code;
    },
  };
}
