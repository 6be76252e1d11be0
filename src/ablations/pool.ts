/** Running judgments for the ablation and probe runners: a bounded pool and one judgment that never throws. */
import type { CompiledGraph } from '../judge/graph.js';
import { failedJudgment } from '../judge/judgment.js';
import { runJudgment } from '../judge/run.js';
import type { Judgment, JudgmentInput, Router } from '../judge/types.js';
import type { DatasetItem } from './dataset.js';

/** Default per-judgment deadline of an ablation or probe run (ms). */
export const DEFAULT_DEADLINE_MS = 120_000;

/** Runs `worker` over `tasks` with at most `concurrency` in flight; stops taking tasks once `signal` aborts. */
export async function runPool<T>(
  tasks: readonly T[],
  concurrency: number,
  worker: (task: T) => Promise<void>,
  signal?: AbortSignal,
): Promise<void> {
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < tasks.length && signal?.aborted !== true) {
      const task = tasks[next++];
      if (task !== undefined) await worker(task);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, tasks.length)) }, lane));
}

export function toInput(item: DatasetItem): JudgmentInput {
  return { question: item.question, candidate: item.candidate, groundTruth: item.ground_truth };
}

/**
 * Runs one judgment with its own deadline. A bug that makes the engine reject is recorded as a
 * `judge_error` (RW_INTERNAL) rather than killing a long run; the report lists failure codes.
 */
export async function judgeOnce(
  graph: CompiledGraph,
  input: JudgmentInput,
  router: Router,
  options: {
    deadlineMs: number;
    signal?: AbortSignal | undefined;
    limits?: { minChars: number; maxChars: number } | undefined;
  },
): Promise<Judgment> {
  try {
    return await runJudgment(graph, input, {
      router,
      deadline: Date.now() + options.deadlineMs,
      signal: options.signal,
      limits: options.limits,
    });
  } catch (err) {
    return failedJudgment(graph, {
      status: 'judge_error',
      code: 'RW_INTERNAL',
      message: err instanceof Error ? err.message : String(err),
      reason: 'engine error',
      stopReason: 'engine_error',
    });
  }
}
