/**
 * The options of a benchmark run (bench/run.ts, scaleout.ts, ab.ts): scenario sizes, the fake backend's
 * latency, the server command and environment, and the repo root every bench process runs in.
 */
import { fileURLToPath } from 'node:url';

import { BLOCK, DEFAULT_DATASET } from './data.js';

export const ROOT = fileURLToPath(new URL('..', import.meta.url));

export interface BenchOptions {
  /** Independent repetitions (fresh fake and server each); reported as median (min–max). */
  runs: number;
  /** Fake backend latency L, ms. */
  latencyMs: number;
  /** Judgments in flight in the throughput scenarios (groups: inflight / groupSize requests). */
  inflight: number;
  groupSize: number;
  /** Judgments per throughput scenario (and per floor run). */
  judgments: number;
  warmupJudgments: number;
  /** Groups sent one at a time for the light-load latency. */
  lightGroups: number;
  /** Hard bound on each scenario. */
  maxScenarioSeconds: number;
  /**
   * Before each repetition, wait up to this many seconds for the machine to be quiet (other processes
   * below 0.15 cores over 2 s); 0 = don't wait. The background load is reported either way.
   */
  quietWaitSeconds: number;
  /** No new repetition starts if it would likely end after this many seconds (≥ 1 repetition always runs). */
  budgetSeconds: number;
  /** Server env JUDGE_MAX_INFLIGHT: backend calls in flight (analysts-2 peaks at 2 per judgment). */
  judgeMaxInflight: number;
  /** Server CACHE_SIZE (replays are clamped to it so that they are all hits). */
  cacheSize: number;
  /** `dist`: node dist/server/main.js (production build); `src`: the TypeScript sources via tsx. */
  server: 'dist' | 'src';
  /** With `server: 'dist'`: the built entry point to run (default dist/server/main.js; e.g. a prototype's). */
  serverEntry?: string | undefined;
  graph: string;
  dataset: string;
  /** Extra node flags for the server process (e.g. --cpu-prof). */
  serverNodeArgs: string[];
  /** Extra server environment. */
  serverEnv: Record<string, string>;
  log: (line: string) => void;
}

export const DEFAULT_OPTIONS: BenchOptions = {
  runs: 3,
  latencyMs: 20,
  inflight: 256,
  groupSize: BLOCK,
  judgments: 8000,
  warmupJudgments: 2000,
  lightGroups: 30,
  maxScenarioSeconds: 60,
  budgetSeconds: 3600,
  quietWaitSeconds: 0,
  judgeMaxInflight: 512,
  cacheSize: 10_000,
  server: 'dist',
  graph: 'analysts-2',
  dataset: DEFAULT_DATASET,
  // What `npm start` and the Dockerfile run: a larger young generation (measured: +7% judgments/s).
  serverNodeArgs: ['--max-semi-space-size=32'],
  serverEnv: {},
  log: () => {},
};
