/**
 * Append-only JSONL sink for judgment transcripts (TRANSCRIPTS_PATH). Writes are group-committed: lines
 * queued while a write is in progress go out together in the next one, and each `write` resolves once its
 * line has reached the file, so a response can wait for its transcript without serialising on the disk.
 * `toTranscriptRecord` is the line's format.
 */
import { createHash } from 'node:crypto';
import { mkdir, open, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';

import type { PairInput, PairJudgment } from '../../judge/compare.js';
import type { Judgment, JudgmentInput } from '../../judge/types.js';

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

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

/** One JSONL line of TRANSCRIPTS_PATH: ids, graph, hashed and raw inputs, the outcome and the debate. */
export function toTranscriptRecord(
  judgmentId: string,
  j: Judgment,
  input: JudgmentInput,
  graphLabel: string,
  backend: string,
  requestId: string | undefined,
): Record<string, unknown> {
  return {
    judgment_id: judgmentId,
    time: new Date().toISOString(),
    request_id: requestId,
    graph: { name: j.graph.name, hash: j.graph.hash, label: graphLabel },
    prompt_version: j.promptVersion,
    backend,
    input: {
      question_sha256: sha256(input.question),
      candidate_sha256: sha256(input.candidate),
      ground_truth_sha256: sha256(input.groundTruth),
      question: input.question,
      candidate: input.candidate,
      ground_truth: input.groundTruth,
    },
    status: j.status,
    verdict: j.verdict,
    reward: j.reward,
    score: j.score,
    incoherent: j.incoherent,
    reason: j.reason,
    error: j.error,
    rounds: j.rounds,
    stop_reason: j.stopReason,
    latency_ms: Math.round(j.latencyMs),
    usage: {
      calls: j.usage.calls,
      prompt_tokens: j.usage.promptTokens,
      completion_tokens: j.usage.completionTokens,
      cached_prompt_tokens: j.usage.cachedPromptTokens,
      reasoning_tokens: j.usage.reasoningTokens ?? 0,
      reasoning_tokens_estimated: j.usage.reasoningTokensEstimated === true,
    },
    // Each node's message keeps its reasoning trace, bounded (`reasoning`: judge/reply-trace.ts boundTrace).
    transcript: j.transcript,
    debate: j.debate,
  };
}

/**
 * One JSONL line of TRANSCRIPTS_PATH for a computed pairwise comparison (`kind: "comparison"`): ids, criterion,
 * hashed and raw inputs in the order judged (`a` shown first in order `ab`), the outcome and every vote.
 */
export function toComparisonTranscriptRecord(
  comparisonId: string,
  j: PairJudgment,
  input: PairInput,
  judges: number,
  backend: string,
  requestId: string | undefined,
): Record<string, unknown> {
  return {
    kind: 'comparison',
    comparison_id: comparisonId,
    time: new Date().toISOString(),
    request_id: requestId,
    prompt_version: j.promptVersion,
    backend,
    criterion: input.criterion,
    judges,
    input: {
      question_sha256: sha256(input.question),
      ground_truth_sha256: input.groundTruth === null ? null : sha256(input.groundTruth),
      a_sha256: sha256(input.a),
      b_sha256: sha256(input.b),
      question: input.question,
      ground_truth: input.groundTruth,
      a: input.a,
      b: input.b,
    },
    status: j.status,
    preference: j.preference,
    orders: j.orders,
    position_bias: j.positionBias,
    reason: j.reason,
    error: j.error,
    latency_ms: Math.round(j.latencyMs),
    usage: {
      calls: j.usage.calls,
      prompt_tokens: j.usage.promptTokens,
      completion_tokens: j.usage.completionTokens,
      cached_prompt_tokens: j.usage.cachedPromptTokens,
    },
    votes: j.votes,
  };
}
