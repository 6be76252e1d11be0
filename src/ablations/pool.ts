/**
 * Running judgments for the ablation, evaluate and probe runners: a bounded pool, one judgment that never
 * throws, and the resumable loop over a records file.
 */
import type { ReasoningFormat } from '../judge/candidate.js';
import type { CompiledGraph } from '../judge/graph.js';
import { failedJudgment } from '../judge/judgment.js';
import { runJudgment } from '../judge/run.js';
import type { Judgment, JudgmentInput, Router } from '../judge/types.js';
import type { DatasetItem } from './dataset.js';
import { createProgress } from './progress.js';
import { openJsonlSink } from './records.js';
import type { RunOptions } from './types.js';

/** Default per-judgment deadline of an ablation or probe run (ms). */
export const DEFAULT_DEADLINE_MS = 120_000;

/**
 * Runs `worker` over `tasks` with at most `concurrency` in flight; stops taking tasks once `signal` aborts
 * or `stop` returns true (a spend cap: what is in flight finishes).
 */
export async function runPool<T>(
  tasks: readonly T[],
  concurrency: number,
  worker: (task: T) => Promise<void>,
  signal?: AbortSignal,
  stop?: () => boolean,
): Promise<void> {
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < tasks.length && signal?.aborted !== true && stop?.() !== true) {
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
    /** REASONING_FORMAT, as serving has it (default `auto`). */
    reasoningFormat?: ReasoningFormat | undefined;
    /** The fence nonce (seeded runs); random when absent. */
    nonce?: string | undefined;
  },
): Promise<Judgment> {
  try {
    return await runJudgment(graph, input, {
      router,
      deadline: Date.now() + options.deadlineMs,
      signal: options.signal,
      limits: options.limits,
      reasoningFormat: options.reasoningFormat,
      nonce: options.nonce,
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

/** The units of a resumable run (ablate, evaluate) and how to run one; see `runResumable`. */
export interface ResumableUnits<T, R> {
  /** Every planned unit, in run order. */
  tasks: readonly T[];
  /** A unit's id in `stored`. */
  idOf(task: T): string;
  /** Records read back from `path`; each new record is set here too. */
  stored: Map<string, R>;
  /** With `retryFailed`, a stored record for which this holds is run again. */
  isFailure(record: R): boolean;
  retryFailed?: boolean | undefined;
  /** The JSONL records file every new record is appended to; none = records stay in `stored` only. */
  path?: string | undefined;
  run(task: T): Promise<R>;
  /** Progress bar label. */
  label: string;
  /** Called after each record is appended. */
  onRecord?: ((record: R) => void) | undefined;
}

/**
 * Runs the units not already in `stored` (a stored failure counts as done unless `retryFailed`) over a pool
 * of `concurrency` (default 8), appending each record as it arrives. A unit cut short by our own
 * interruption is not a result: the next run redoes it. `completed` is false when `signal` aborted.
 */
export async function runResumable<T, R>(
  units: ResumableUnits<T, R>,
  options: Pick<RunOptions, 'concurrency' | 'signal' | 'progress' | 'stop'>,
): Promise<{ ran: number; reused: number; completed: boolean }> {
  const todo = units.tasks.filter((task) => {
    const previous = units.stored.get(units.idOf(task));
    return previous === undefined || (units.retryFailed === true && units.isFailure(previous));
  });
  const reused = units.tasks.length - todo.length;
  const progress =
    options.progress === undefined
      ? undefined
      : createProgress({
          total: units.tasks.length,
          initial: reused,
          label: units.label,
          stream: options.progress,
        });
  const sink = units.path === undefined ? undefined : await openJsonlSink<R>(units.path);
  let ran = 0;
  try {
    await runPool(
      todo,
      options.concurrency ?? 8,
      async (task) => {
        const record = await units.run(task);
        if (options.signal?.aborted === true) return;
        units.stored.set(units.idOf(task), record);
        await sink?.append(record);
        ran++;
        progress?.tick();
        units.onRecord?.(record);
      },
      options.signal,
      options.stop,
    );
  } finally {
    await sink?.close();
  }
  progress?.done();
  const stopped = options.stop?.() === true && ran + reused < units.tasks.length;
  return { ran, reused, completed: options.signal?.aborted !== true && !stopped };
}
