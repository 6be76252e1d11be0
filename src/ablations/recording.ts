/**
 * What a research run sees of each LLM call, without the judge engine knowing: a router wrapper that
 * records every call of one judgment (the messages sent, the raw reply, the reasoning when the backend
 * returned one), answers repeated requests from an opt-in response cache that outlives an output folder,
 * and counts the tokens spent for a spend cap.
 */
import { createHash } from 'node:crypto';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { canonicalJson } from '../judge/graph.js';
import type { Backend, ChatMessage, LlmReply, LlmRequest, Route, Router } from '../judge/types.js';

/** One LLM call of a judgment as `items.jsonl` keeps it. */
export const CallRecord = z.object({
  nodeId: z.string(),
  role: z.string(),
  round: z.number().int().nullable(),
  model: z.string(),
  messages: z.array(z.object({ role: z.string(), content: z.string() })),
  /** The raw completion text (null when the call failed). */
  reply: z.string().nullable(),
  reasoning: z.string().optional(),
  error: z.string().optional(),
  cached: z.boolean().optional(),
});
export type CallRecord = z.infer<typeof CallRecord>;

/** Tokens spent by every call of a run (cache hits spend nothing). */
export interface SpendMeter {
  tokens: number;
  calls: number;
  cacheHits: number;
}

export function createSpendMeter(): SpendMeter {
  return { tokens: 0, calls: 0, cacheHits: 0 };
}

/** The request fields that decide a reply: the key of the response cache. */
export function requestHash(request: LlmRequest): string {
  const keyed = {
    model: request.model,
    messages: request.messages,
    schema: request.schemaName,
    temperature: request.temperature,
    topP: request.topP,
    maxTokens: request.maxTokens,
    seed: request.seed,
    reasoningEffort: request.reasoningEffort,
  };
  return createHash('sha256').update(canonicalJson(keyed)).digest('hex');
}

const CachedReply = z.object({
  text: z.string(),
  model: z.string(),
  promptTokens: z.number(),
  completionTokens: z.number(),
  finishReason: z.string(),
  reasoning: z.string().optional(),
});

/**
 * A directory of replies keyed by `requestHash` (`DIR/ab/abcdef….json`), shared by any number of output
 * folders: the same request (same model, messages, sampling, seed) is answered from it without a call.
 * Only successful replies are stored; a reply is written to a temporary name and renamed (no torn reads).
 */
export interface ResponseCache {
  get(hash: string): Promise<LlmReply | undefined>;
  put(hash: string, reply: LlmReply): Promise<void>;
}

export function createResponseCache(dir: string): ResponseCache {
  const pathOf = (hash: string): string => join(dir, hash.slice(0, 2), `${hash}.json`);
  return {
    async get(hash) {
      let text: string;
      try {
        text = await readFile(pathOf(hash), 'utf8');
      } catch {
        return undefined;
      }
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch {
        return undefined;
      }
      const parsed = CachedReply.safeParse(json);
      if (!parsed.success) return undefined;
      const { reasoning, ...reply } = parsed.data;
      return {
        ...reply,
        ...(reasoning === undefined
          ? {}
          : { reasoning: { text: reasoning, source: 'field', unclosed: false } }),
        latencyMs: 0,
        attempts: 1,
        cachedPromptTokens: null,
      };
    },
    async put(hash, reply) {
      const path = pathOf(hash);
      await mkdir(join(dir, hash.slice(0, 2)), { recursive: true });
      const tmp = `${path}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
      const stored: z.infer<typeof CachedReply> = {
        text: reply.text,
        model: reply.model,
        promptTokens: reply.promptTokens,
        completionTokens: reply.completionTokens,
        finishReason: reply.finishReason,
      };
      const reasoning = reasoningOf(reply);
      if (reasoning !== undefined) stored.reasoning = reasoning;
      await writeFile(tmp, JSON.stringify(stored));
      await rename(tmp, path);
    },
  };
}

/** The reasoning trace a backend returned beside the reply, when it has the field. */
function reasoningOf(reply: LlmReply): string | undefined {
  return reply.reasoning?.text;
}

function roundOf(request: LlmRequest): number | null {
  const ctx = request.context;
  return 'round' in ctx && typeof ctx.round === 'number' ? ctx.round : null;
}

const copyMessages = (messages: readonly ChatMessage[]): CallRecord['messages'] =>
  messages.map((m) => ({ role: m.role, content: m.content }));

export interface RecordingOptions {
  /** Every call of this judgment is appended here. */
  calls: CallRecord[];
  cache?: ResponseCache | undefined;
  meter?: SpendMeter | undefined;
}

function recordingBackend(backend: Backend, options: RecordingOptions): Backend {
  const wrapped: Backend = {
    name: backend.name,
    async complete(request, callOptions) {
      const record: CallRecord = {
        nodeId: request.nodeId,
        role: request.role,
        round: roundOf(request),
        model: request.model,
        messages: copyMessages(request.messages),
        reply: null,
      };
      options.calls.push(record);
      const hash = options.cache === undefined ? '' : requestHash(request);
      const hit = await options.cache?.get(hash);
      if (hit !== undefined) {
        record.reply = hit.text;
        record.cached = true;
        if (options.meter !== undefined) options.meter.cacheHits += 1;
        return hit;
      }
      try {
        const reply = await backend.complete(request, callOptions);
        record.reply = reply.text;
        const reasoning = reasoningOf(reply);
        if (reasoning !== undefined) record.reasoning = reasoning;
        if (options.meter !== undefined) {
          options.meter.calls += 1;
          options.meter.tokens += reply.promptTokens + reply.completionTokens;
        }
        await options.cache?.put(hash, reply);
        return reply;
      } catch (err) {
        record.error = err instanceof Error ? err.message : String(err);
        throw err;
      }
    },
  };
  const contextTokens = backend.contextTokens?.bind(backend);
  if (contextTokens !== undefined) wrapped.contextTokens = contextTokens;
  return wrapped;
}

/**
 * A router for one judgment that routes as `router` does and records every call into `options.calls`
 * (the backends themselves are shared: limits, retries and replicas behave as without the wrapper).
 */
export function recordingRouter(router: Router, options: RecordingOptions): Router {
  const wrappers = new Map<Backend, Backend>();
  const wrap = (backend: Backend): Backend => {
    let w = wrappers.get(backend);
    if (w === undefined) {
      w = recordingBackend(backend, options);
      wrappers.set(backend, w);
    }
    return w;
  };
  return {
    name: router.name,
    route(node): Route {
      const route = router.route(node);
      return { ...route, backend: wrap(route.backend) };
    },
    backends: () => router.backends(),
  };
}
