/**
 * What a research run may spend: `--max-tokens` / `--max-usd` (with `--usd-per-mtok`) caps on one invocation,
 * and the `--dry-run` estimate printed before anything is sent. The estimate runs each graph on the offline
 * backend (no network) over a few items and measures the prompts the graph really renders.
 */
import { createOfflineBackend } from '../judge/backends/offline.js';
import type { CompiledGraph } from '../judge/graph.js';
import { createRouter } from '../judge/routing.js';
import type { DatasetItem } from './dataset.js';
import { judgeOnce, toInput } from './pool.js';
import type { SpendMeter } from './recording.js';
import { recordingRouter, createSpendMeter } from './recording.js';

export interface SpendCap {
  /** Tokens (prompt + completion) this invocation may spend; null = no cap. */
  tokens: number | null;
  /** How the cap was given, for messages. */
  text: string;
}

/** The spend cap from the CLI options; throws a message naming the flag on a bad combination. */
export function spendCap(values: {
  'max-tokens'?: string | undefined;
  'max-usd'?: string | undefined;
  'usd-per-mtok'?: string | undefined;
}): SpendCap {
  const positive = (name: string, v: string | undefined): number | null => {
    if (v === undefined) return null;
    const n = Number(v);
    if (!Number.isFinite(n) || n <= 0) throw new Error(`--${name} must be a number > 0, got "${v}"`);
    return n;
  };
  const maxTokens = positive('max-tokens', values['max-tokens']);
  const maxUsd = positive('max-usd', values['max-usd']);
  const price = positive('usd-per-mtok', values['usd-per-mtok']);
  if (maxUsd !== null && price === null) {
    throw new Error('--max-usd needs --usd-per-mtok (the price of a million tokens, prompt and completion)');
  }
  const fromUsd = maxUsd === null || price === null ? null : Math.floor((maxUsd / price) * 1e6);
  const caps = [maxTokens, fromUsd].filter((c): c is number => c !== null);
  if (caps.length === 0) return { tokens: null, text: 'no cap' };
  const tokens = Math.min(...caps);
  const parts = [
    ...(maxTokens === null ? [] : [`--max-tokens ${maxTokens}`]),
    ...(maxUsd === null || price === null
      ? []
      : [`--max-usd ${maxUsd} at $${price}/Mtok = ${fromUsd} tokens`]),
  ];
  return { tokens, text: parts.join(', ') };
}

/**
 * The stop rule of a capped run: take no new judgment once what was spent plus one more judgment per lane
 * (`reservePerUnit` tokens each: the costliest judgment of the estimate) would pass the cap. Judgments in flight finish and are kept,
 * so the same command run again resumes. Without a cap, never stops.
 */
export function capStop(
  cap: SpendCap,
  meter: SpendMeter,
  reservePerUnit: number,
  lanes: number,
): (() => boolean) | undefined {
  const limit = cap.tokens;
  if (limit === null) return undefined;
  return () => meter.tokens + reservePerUnit * lanes >= limit;
}

/** What one judgment of a graph costs, measured on the offline backend. */
export interface GraphEstimate {
  label: string;
  callsPerJudgment: number;
  tokensPerJudgment: number;
  /** The most calls one judgment can make: above the measured mean when a debate or a cascade stops early. */
  maxCallsPerJudgment: number;
  /** The most one sampled judgment spent: what a capped run holds back per lane (means hide costly cases). */
  maxTokensPerJudgment: number;
}

export interface Estimate {
  graphs: GraphEstimate[];
  judgments: number;
  calls: number;
  /** Calls if no graph stopped early (each at its maximum per judgment). */
  maxCalls: number;
  tokens: number;
}

/**
 * Runs each graph on the offline backend over the first `sample` items and scales the measured calls and
 * tokens (prompts as rendered; completions as the offline backend writes them, shorter than a reasoning
 * judge's) to `judgments` judgments per graph.
 */
export async function estimateSpend(
  graphs: readonly { label: string; graph: CompiledGraph }[],
  items: readonly DatasetItem[],
  judgmentsPerGraph: number,
  sample = 5,
): Promise<Estimate> {
  const offline = createRouter({ default: 'offline', offline: createOfflineBackend });
  const probe = items.slice(0, Math.max(1, sample));
  const out: GraphEstimate[] = [];
  for (const { label, graph } of graphs) {
    const meter = createSpendMeter();
    let most = 0;
    for (const item of probe) {
      const before = meter.tokens;
      const router = recordingRouter(offline, { calls: [], meter });
      await judgeOnce(graph, toInput(item), router, { deadlineMs: 60_000 });
      most = Math.max(most, meter.tokens - before);
    }
    const n = Math.max(1, probe.length);
    out.push({
      label,
      callsPerJudgment: meter.calls / n,
      tokensPerJudgment: meter.tokens / n,
      maxCallsPerJudgment: graph.llmCallsPerJudgment,
      maxTokensPerJudgment: most,
    });
  }
  const calls = out.reduce((a, g) => a + g.callsPerJudgment * judgmentsPerGraph, 0);
  const maxCalls = out.reduce((a, g) => a + g.maxCallsPerJudgment * judgmentsPerGraph, 0);
  const tokens = out.reduce((a, g) => a + g.tokensPerJudgment * judgmentsPerGraph, 0);
  return { graphs: out, judgments: judgmentsPerGraph * graphs.length, calls, maxCalls, tokens };
}

/** The dry-run report: per graph and in total, plus what the budget-matched baselines may add. */
export function renderEstimate(e: Estimate, cap: SpendCap, baselines: boolean): string {
  // Judgments that make fewer calls than the graph's maximum: a debate or cascade that stopped early (the
  // offline backend's debaters agree more than a real judge's, so that saving is a ceiling) or an input
  // rejected before any call (most probe cases).
  const stopsEarly = (g: GraphEstimate): boolean => g.maxCallsPerJudgment > g.callsPerJudgment + 1e-9;
  const lines = e.graphs.map(
    (g) =>
      `  ${g.label}: ${g.callsPerJudgment.toFixed(2)} calls${stopsEarly(g) ? ` (up to ${g.maxCallsPerJudgment} when a judgment makes every call)` : ''}, ` +
      `~${Math.round(g.tokensPerJudgment)} tokens per judgment`,
  );
  const bound = e.graphs.some(stopsEarly)
    ? ` (at most ${Math.round(e.maxCalls)} if every judgment makes every call)`
    : '';
  const total = `estimate: ${e.judgments} judgments, ${Math.round(e.calls)} LLM calls${bound}, ~${Math.round(e.tokens)} tokens`;
  const extra = baselines
    ? '\n  + the budget-matched vote baselines: up to about twice that again (each matches a graph’s measured spend)'
    : '';
  const capLine = cap.tokens === null ? '' : `\ncap: ${cap.text} (${cap.tokens} tokens per invocation)`;
  return (
    `${total}\n${lines.join('\n')}${extra}${capLine}\n` +
    '(prompt tokens as the graphs render them on this set; completion tokens as the offline backend writes ' +
    'them — a reasoning judge writes more)'
  );
}
