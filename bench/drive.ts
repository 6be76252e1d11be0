/**
 * The request loop the load generator (bench/load.ts) and the floor client (bench/floor.ts) share: `total`
 * tasks by index, at most `concurrency` at a time, none started after `maxMs`.
 */

export interface Driven {
  /** From the start to the last task's end (or to the first failure), ms. */
  wallMs: number;
  /** Tasks that finished. */
  done: number;
  /** A worker found `maxMs` passed before it started its next task. */
  timedOut: boolean;
  /** The message of the first task that threw (the loop stops waiting then, as Promise.all does). */
  error?: string;
}

/**
 * Runs `task(0)` … `task(total − 1)` in index order on `concurrency` workers; each starts its next task when
 * its last one ended, while the time since the start is at most `maxMs`. Resolves, never rejects.
 */
export async function drive(
  total: number,
  concurrency: number,
  maxMs: number,
  task: (index: number) => Promise<void>,
): Promise<Driven> {
  const t0 = performance.now();
  let next = 0;
  let done = 0;
  let timedOut = false;
  const worker = async (): Promise<void> => {
    while (next < total) {
      if (performance.now() - t0 > maxMs) {
        timedOut = true;
        return;
      }
      const i = next++;
      await task(i);
      done += 1;
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.min(concurrency, total) }, worker));
  } catch (err) {
    const error = err instanceof Error ? err.message : String(err);
    return { wallMs: performance.now() - t0, done, timedOut, error };
  }
  return { wallMs: performance.now() - t0, done, timedOut };
}
