/** A progress bar with rate and ETA for long runs, written to stderr (a TTY redraws one line). */

export interface ProgressStream {
  write(chunk: string): unknown;
  isTTY?: boolean | undefined;
}

export interface Progress {
  /** Count `n` more finished units (default 1). */
  tick(n?: number): void;
  /** Final line (printed unless the stage had nothing to do). */
  done(): void;
}

export interface ProgressOptions {
  total: number;
  /** Units already finished before this session (a resumed run); excluded from the rate. */
  initial?: number | undefined;
  label?: string | undefined;
  stream: ProgressStream;
  /** Clock in ms (tests inject one). */
  now?: (() => number) | undefined;
  /** Minimum ms between redraws on a TTY (default 100); non-TTY streams print every 10%. */
  intervalMs?: number | undefined;
}

function clock(seconds: number): string {
  if (!Number.isFinite(seconds)) return '--:--';
  const s = Math.max(0, Math.round(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const rest = String(s % 60).padStart(2, '0');
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${rest}` : `${m}:${rest}`;
}

/**
 * One progress line: `label [#####.....] 50/100  50%  12.0/s  ETA 0:04`. The rate counts only units
 * finished in this session (`done − initial`) over `elapsedMs`.
 */
export function formatProgress(
  label: string,
  done: number,
  total: number,
  initial: number,
  elapsedMs: number,
  width = 24,
): string {
  const fraction = total === 0 ? 1 : Math.min(1, done / total);
  const filled = Math.round(fraction * width);
  const bar = `${'#'.repeat(filled)}${'.'.repeat(width - filled)}`;
  const session = done - initial;
  const rate = elapsedMs > 0 ? (session * 1000) / elapsedMs : 0;
  const eta = rate > 0 ? (total - done) / rate : Number.POSITIVE_INFINITY;
  const percent = `${Math.floor(fraction * 100)}%`.padStart(4);
  const prefix = label === '' ? '' : `${label} `;
  return `${prefix}[${bar}] ${done}/${total} ${percent}  ${rate.toFixed(1)}/s  ETA ${done >= total ? '0:00' : clock(eta)}`;
}

/** A progress bar that writes nothing: the bar of a stage with nothing to do. */
const SILENT: Progress = { tick: () => undefined, done: () => undefined };

/**
 * A progress bar on `options.stream`. A stage with nothing to do (`total` 0, e.g. no budget-matched baseline
 * to add) gets no bar at all: a `0/0 100%` line would say work happened.
 */
export function createProgress(options: ProgressOptions): Progress {
  if (options.total === 0) return SILENT;
  const now = options.now ?? (() => performance.now());
  const started = now();
  const initial = options.initial ?? 0;
  const label = options.label ?? '';
  const tty = options.stream.isTTY === true;
  const interval = options.intervalMs ?? 100;
  let done = initial;
  let lastDraw = Number.NEGATIVE_INFINITY;
  let lastDecile = Math.floor((initial / Math.max(1, options.total)) * 10);
  const line = () => formatProgress(label, done, options.total, initial, now() - started);
  return {
    tick(n = 1) {
      done += n;
      if (tty) {
        const t = now();
        if (t - lastDraw < interval) return;
        lastDraw = t;
        options.stream.write(`\r${line()}`);
        return;
      }
      const decile = Math.floor((done / Math.max(1, options.total)) * 10);
      if (decile > lastDecile && done < options.total) {
        lastDecile = decile;
        options.stream.write(`${line()}\n`);
      }
    },
    done() {
      options.stream.write(`${tty ? '\r' : ''}${line()}\n`);
    },
  };
}
