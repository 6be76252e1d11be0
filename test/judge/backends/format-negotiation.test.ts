/**
 * The response-format negotiation alone (format-negotiation.ts), without HTTP: a scripted `send` answers
 * each format, the replica's format state is the real createReplicaFormat. The same rules end to end, over
 * the fake server, are in response-format.test.ts.
 */
import { describe, expect, it } from 'vitest';

import { negotiateFormat } from '../../../src/judge/backends/format-negotiation.js';
import { AttemptError, type HttpReply } from '../../../src/judge/backends/openai-errors.js';
import { createReplicaFormat } from '../../../src/judge/backends/response-format.js';
import type { ResponseFormat } from '../../../src/settings/routing-file.js';

const ok: HttpReply = { status: 200, text: '{}', retryAfterMs: undefined };
const error = (status: number, message: string): HttpReply => ({
  status,
  text: JSON.stringify({ error: { message, type: 'invalid_request_error' } }),
  retryAfterMs: undefined,
});
const NAMED = error(400, 'JSON schema conversion failed');
const SUSPECT = error(400, 'bad request body');

function setup(script: Partial<Record<ResponseFormat, HttpReply[]>>) {
  const sent: ResponseFormat[] = [];
  const format = createReplicaFormat({
    backend: 'b',
    replica: 'r',
    configured: 'json_schema',
    reprobeMs: 1e9,
  });
  const contexts: number[] = [];
  const negotiation = {
    format,
    send: (f: ResponseFormat) => {
      sent.push(f);
      const reply = script[f]?.shift();
      return reply === undefined ? Promise.reject(new Error(`unscripted ${f}`)) : Promise.resolve(reply);
    },
    probeFailed: new Set<string>(),
    previous: { signature: undefined as string | undefined },
    onContextTokens: (n: number) => contexts.push(n),
  };
  return { negotiation, sent, format, contexts };
}

describe('negotiateFormat', () => {
  it('switches to json_object on a refusal naming the schema and a successful probe', async () => {
    const { negotiation, sent, format } = setup({ json_schema: [NAMED], json_object: [ok] });
    await expect(negotiateFormat(negotiation)).resolves.toBe(ok);
    expect(sent).toEqual(['json_schema', 'json_object']);
    expect(format.mode).toBe('json_object');
  });

  it('switches on a suspect refusal only when a second json_schema repeats it word for word', async () => {
    const repeated = setup({ json_schema: [SUSPECT, SUSPECT], json_object: [ok] });
    await expect(negotiateFormat(repeated.negotiation)).resolves.toBe(ok);
    expect(repeated.sent).toEqual(['json_schema', 'json_object', 'json_schema']);
    expect(repeated.format.mode).toBe('json_object');

    const other = setup({ json_schema: [SUSPECT, error(400, 'something else')], json_object: [ok] });
    await expect(negotiateFormat(other.negotiation)).resolves.toBe(ok);
    expect(other.format.mode).toBe('json_schema');
  });

  it('never switches on a 5xx alone, and throws its status AttemptError', async () => {
    const { negotiation, sent, format } = setup({ json_schema: [error(503, 'overloaded')] });
    const thrown = await negotiateFormat(negotiation).catch((e: unknown) => e);
    expect(thrown).toBeInstanceOf(AttemptError);
    expect((thrown as AttemptError).status).toBe(503);
    expect(sent).toEqual(['json_schema']);
    expect(format.mode).toBe('json_schema');
  });

  it('remembers a refusal whose json_object probe is refused too, and probes it no more', async () => {
    const first = setup({ json_schema: [NAMED], json_object: [error(400, 'bad key')] });
    await expect(negotiateFormat(first.negotiation)).rejects.toMatchObject({ status: 400 });
    expect(first.negotiation.probeFailed.size).toBe(1);

    first.sent.length = 0;
    first.negotiation.send = (f) => {
      first.sent.push(f);
      return Promise.resolve(NAMED);
    };
    await expect(negotiateFormat(first.negotiation)).rejects.toMatchObject({ status: 400 });
    expect(first.sent).toEqual(['json_schema']);
  });

  it("learns the context window an overflow names (llama.cpp's n_ctx)", async () => {
    const overflow: HttpReply = {
      status: 400,
      text: JSON.stringify({
        error: { message: 'too long', type: 'exceed_context_size_error', n_ctx: 4096, n_prompt_tokens: 5000 },
      }),
      retryAfterMs: undefined,
    };
    const { negotiation, contexts } = setup({ json_schema: [overflow] });
    await expect(negotiateFormat(negotiation)).rejects.toBeInstanceOf(AttemptError);
    expect(contexts).toEqual([4096]);
  });
});
