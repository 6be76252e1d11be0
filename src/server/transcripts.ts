/**
 * Append-only JSONL sink for judgment transcripts (TRANSCRIPTS_PATH). Writes are group-committed: lines
 * queued while a write is in progress go out together in the next one, and each `write` resolves once its
 * line has reached the file, so a response can wait for its transcript without serialising on the disk.
 */
import { mkdir, open, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';

export interface TranscriptSink {
  /** Appends one JSON line; resolves once written (or once the failure was reported to `onError`). */
  write(record: unknown): Promise<void>;
  /** Resolves when every queued line has been written. */
  flush(): Promise<void>;
  /** Flushes, then closes the file; later writes are dropped and reported. */
  close(): Promise<void>;
}

export interface FileSinkOptions {
  /** A write failed; the reward is still answered (default: ignore). */
  onError?: ((err: unknown) => void) | undefined;
}

interface Pending {
  line: string;
  done(): void;
}

/** Opens (creating it and its directory if needed) `path` for appending. */
export async function createFileTranscriptSink(
  path: string,
  options: FileSinkOptions = {},
): Promise<TranscriptSink> {
  await mkdir(dirname(path), { recursive: true });
  const handle: FileHandle = await open(path, 'a');
  const onError = options.onError ?? (() => undefined);
  let queue: Pending[] = [];
  let draining: Promise<void> | undefined;
  let closed = false;

  const drain = async (): Promise<void> => {
    while (queue.length > 0) {
      const batch = queue;
      queue = [];
      try {
        await handle.appendFile(batch.map((p) => p.line).join(''), 'utf8');
      } catch (err) {
        onError(err);
      }
      for (const p of batch) p.done();
    }
    draining = undefined;
  };

  return {
    write(record) {
      if (closed) {
        onError(new Error('transcript sink is closed'));
        return Promise.resolve();
      }
      let line: string;
      try {
        line = `${JSON.stringify(record)}\n`;
      } catch (err) {
        onError(err);
        return Promise.resolve();
      }
      return new Promise<void>((resolve) => {
        queue.push({ line, done: resolve });
        draining ??= drain();
      });
    },
    async flush() {
      while (draining !== undefined) await draining;
    },
    async close() {
      if (closed) return;
      closed = true;
      while (draining !== undefined) await draining;
      await handle.close();
    },
  };
}
