import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, describe, expect, it } from 'vitest';

import { getPreset } from '../../src/judge/presets.js';
import { createFileTranscriptSink, type TranscriptSink } from '../../src/server/observe/transcripts.js';
import { candidate, GROUND_TRUTH, QUESTION, startHarness, type Harness } from './helpers.js';

let h: Harness | undefined;
let sink: TranscriptSink | undefined;
let dir: string | undefined;
afterEach(async () => {
  await h?.close();
  await sink?.close();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  h = undefined;
  sink = undefined;
  dir = undefined;
});

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- parsed JSONL, checked field by field
function lines(path: string): any[] {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l));
}

describe('transcript sink', () => {
  it('writes one JSON line per computed judgment before the response, and none for cache hits', async () => {
    dir = mkdtempSync(join(tmpdir(), 'transcripts-'));
    const path = join(dir, 'nested', 'judgments.jsonl');
    sink = await createFileTranscriptSink(path);
    h = await startHarness({ transcripts: sink });
    const payload = {
      question: QUESTION,
      ground_truth: GROUND_TRUTH,
      candidates: [candidate(0, true), candidate(1, false), candidate(0, true)],
      request_id: 'req-9',
    };
    const res = await h.app.inject({ method: 'POST', url: '/v1/reward', payload });
    expect(res.statusCode).toBe(200);
    // Read right after the response: the lines were written before it was sent.
    const written = lines(path);
    expect(written).toHaveLength(2);
    const ids = res.json().results.map((r: { judgment_id: string }) => r.judgment_id);
    expect(written.map((l) => l.judgment_id).sort()).toEqual([ids[0], ids[1]].sort());
    const first = written.find((l) => l.judgment_id === ids[0]);
    expect(first).toMatchObject({
      graph: { name: 'analysts-2', hash: getPreset('analysts-2')!.hash, label: 'analysts-2' },
      status: 'ok',
      verdict: 'match',
      reward: 1,
      request_id: 'req-9',
      backend: 'openai-compatible',
      input: { candidate: candidate(0, true), ground_truth: GROUND_TRUTH, question: QUESTION },
    });
    expect(first.prompt_version).toMatch(/^[0-9a-f]{12}$/);
    expect(first.input.candidate_sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(first.transcript).toHaveLength(getPreset('analysts-2')!.llmCallsPerJudgment);
    expect(first.usage.calls).toBe(3);
    expect(Date.parse(first.time)).not.toBeNaN();

    await h.app.inject({ method: 'POST', url: '/v1/reward', payload });
    expect(lines(path)).toHaveLength(2);
  });

  it('group-commits concurrent writes and appends to an existing file', async () => {
    dir = mkdtempSync(join(tmpdir(), 'transcripts-'));
    const path = join(dir, 't.jsonl');
    const a = await createFileTranscriptSink(path);
    await a.write({ n: -1 });
    await a.close();
    sink = await createFileTranscriptSink(path);
    await Promise.all(Array.from({ length: 200 }, (_, n) => sink!.write({ n, text: 'x'.repeat(n) })));
    const written = lines(path);
    expect(written).toHaveLength(201);
    expect(written.map((l) => l.n).sort((x, y) => x - y)).toEqual(
      Array.from({ length: 201 }, (_, i) => i - 1),
    );
  });

  it('reports write failures instead of throwing', async () => {
    dir = mkdtempSync(join(tmpdir(), 'transcripts-'));
    const errors: unknown[] = [];
    sink = await createFileTranscriptSink(join(dir, 't.jsonl'), { onError: (e) => errors.push(e) });
    const cyclic: Record<string, unknown> = {};
    cyclic['self'] = cyclic;
    await sink.write(cyclic);
    await sink.close();
    await sink.write({ late: true });
    expect(errors).toHaveLength(2);
  });
});
