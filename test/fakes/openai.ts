/**
 * Fake OpenAI-compatible chat-completions server for tests and benchmarks.
 *
 * A real HTTP server on 127.0.0.1 (plain `node:http`, so that it stays cheap under benchmark load) that
 * plays a script of replies, one per call, then a fallback, and records every call it receives.
 */
import { createHash } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

import { createBatchingEngine, type BatchingEngine, type EngineOptions } from './engine.js';
import { openaiReasoningRefusal } from './openai-refusals.js';

/** What the fake answers to one chat-completions call. */
export type FakeReply =
  /** `body` is JSON.stringify'd into `choices[0].message.content`. */
  | { kind: 'json'; body: unknown; finishReason?: string }
  /** Raw content (invalid JSON, prose, empty string…). `null` sends `content: null`. */
  | { kind: 'text'; text: string | null; finishReason?: string }
  /** An HTTP error status; default body is an OpenAI-style `{error: {...}}`. */
  | { kind: 'status'; status: number; retryAfter?: string; body?: unknown }
  /** Never answers; the socket stays open until the client gives up or the fake closes. */
  | { kind: 'hang' }
  /** Waits `ms` (on top of `latencyMs`) then plays `then`. */
  | { kind: 'slow'; ms: number; then: FakeReply }
  /** Destroys the socket without answering. */
  | { kind: 'reset' }
  /**
   * Like a model that needs `needTokens` completion tokens for `body`: with `max_tokens` ≥ needTokens (or
   * none) it answers `body`; with fewer it answers HTTP 200 with the JSON cut at the fraction
   * max_tokens / needTokens and `finish_reason: "length"` (usage: max_tokens), as llama.cpp and vLLM do.
   */
  | { kind: 'budget'; body: unknown; needTokens: number }
  /**
   * A whole choice as given: `message` (content, `reasoning_content`, …), its finish_reason and usage
   * (`completion_tokens_details` and all). The reasoning judge (thinking.ts) answers with it.
   */
  | {
      kind: 'completion';
      message: Record<string, unknown>;
      finishReason: string;
      usage: Record<string, unknown>;
    };

/** llama.cpp's 400 when the prompt does not fit the slot's context (server.cpp, `exceed_context_size_error`). */
export function llamaContextOverflow(nPromptTokens: number, nCtx: number): FakeReply {
  return {
    kind: 'status',
    status: 400,
    body: {
      error: {
        code: 400,
        message: 'the request exceeds the available context size, try increasing it',
        type: 'exceed_context_size_error',
        n_prompt_tokens: nPromptTokens,
        n_ctx: nCtx,
      },
    },
  };
}

/** OpenAI's 400 for a prompt + max_tokens over the model's context. */
export function openaiContextOverflow(): FakeReply {
  return {
    kind: 'status',
    status: 400,
    body: {
      error: {
        message:
          "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens. Please reduce the length of the messages.",
        type: 'invalid_request_error',
        param: 'messages',
        code: 'context_length_exceeded',
      },
    },
  };
}

/**
 * llama.cpp's answer when it cannot turn a json_schema into a grammar (`json_schema_to_grammar` throws
 * "JSON schema conversion failed:\n<reason>"): current llama-server answers 400 `invalid_request_error`
 * (since ggml-org/llama.cpp#17572, Nov 2025; body as quoted in #19716); older builds rethrow it from
 * `params_from_json_cmpl` as `"json_schema": <message>`, which the server's handler maps to 500
 * `server_error`. Both bodies carry `code` = the status and no `param`.
 */
export function llamaSchemaFailed(status: 400 | 500 = 400): FakeReply {
  return {
    kind: 'status',
    status,
    body: {
      error: {
        code: status,
        message:
          status === 400
            ? 'JSON schema conversion failed:\nUnrecognized schema: {"description":"x"}'
            : "\"json_schema\": JSON schema conversion failed:\nPattern must start with '^' and end with '$'",
        type: status === 400 ? 'invalid_request_error' : 'server_error',
      },
    },
  };
}

/**
 * llama-server before structured-output support (Sept 2024, ggml-org/llama.cpp#9522): every `json_schema`
 * response_format is refused with a 500 `server_error` that names it.
 */
export function llamaJsonSchemaUnsupported(): FakeReply {
  return {
    kind: 'status',
    status: 500,
    body: {
      error: {
        code: 500,
        message: 'response_format type must be one of "text" or "json_object", but got: json_schema',
        type: 'server_error',
      },
    },
  };
}

/** The parsed request body, as the client sent it. */
export interface FakeChatRequest {
  model?: string;
  messages?: Array<{ role: string; content: string }>;
  response_format?: {
    type: string;
    json_schema?: { name: string; strict?: boolean; schema?: Record<string, unknown> };
  };
  temperature?: number;
  top_p?: number;
  seed?: number;
  max_tokens?: number;
  [key: string]: unknown;
}

export type CallOutcome = 'pending' | 'replied' | 'client_closed' | 'reset' | 'server_closed';

export interface RecordedCall {
  /** 0-based arrival order. */
  index: number;
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: FakeChatRequest;
  /** Role of the call: `response_format.json_schema.name`, else guessed from the system prompt. */
  role: string | undefined;
  /** `performance.now()` when the full request body had arrived. */
  arrivedAt: number;
  /** `performance.now()` when the call got a slot (= `arrivedAt` without `slots`); undefined while queued. */
  startedAt: number | undefined;
  /** `performance.now()` when the reply was written or the socket closed. */
  finishedAt: number | undefined;
  outcome: CallOutcome;
  /** HTTP status sent, when one was. */
  status: number | undefined;
}

export type FakeReplyFn = (body: FakeChatRequest, call: RecordedCall) => FakeReply;

export interface FakeOpenAIOptions {
  /** Replies played in order, one per chat-completions call. */
  script?: FakeReply[];
  /** Used once the script is exhausted. Default: 500, so a surprise call fails loudly. */
  fallback?: FakeReply | FakeReplyFn;
  /** Fixed latency before every reply (not before `hang`/`reset`). Default 0. */
  latencyMs?: number;
  /** Record calls in `calls` (default true). Benchmarks that run forever turn it off. */
  record?: boolean;
  /** Port to listen on (default 0 = any free port). Always 127.0.0.1. */
  port?: number;
  /**
   * Serve at most this many calls at once, like a llama.cpp / vLLM server with N slots: the others wait in
   * a FIFO (never a 429) and their wait counts in the client's latency. A call closed while queued leaves
   * the queue. The block cache sees a call when it gets its slot. Service time is `latencyMs` (+ a `slow`
   * reply's own delay). Default: unlimited.
   */
  slots?: number;
  /**
   * Simulate vLLM's automatic prefix caching and report `usage.prompt_tokens_details.cached_tokens`
   * (default off: usage then has no such field, like a backend that does not report it).
   */
  blockCache?: BlockCacheOptions | boolean;
  /**
   * Context per request, in tokens (4 chars each), like llama.cpp's slot: a prompt of more tokens is
   * answered with `llamaContextOverflow` before the script plays (and does not consume a script entry).
   */
  contextTokens?: number;
  /** Answer every `json_schema` request with `llamaSchemaFailed(status)` (json_object requests play on). */
  rejectJsonSchema?: 400 | 500;
  /**
   * Requests whose `model` matches are refused like OpenAI's reasoning models refuse them (a 400 for
   * `max_tokens`, then for a non-default temperature / top_p: reasoning-model.ts) before the script plays.
   */
  openaiReasoningModels?: RegExp;
  /**
   * The `model` the replies report (vLLM reports its served name or path, not the one asked for). Default:
   * the request's `model`.
   */
  replyModel?: string;
  /**
   * Serve like a continuous-batching engine (engine.ts: `slots` sequences decode at once, the rest wait in
   * its queue, a step slows as the batch grows) and publish vLLM's `/metrics`. Replaces `slots` and
   * `latencyMs` for replies with content; statuses, hangs and resets are played at once.
   */
  engine?: EngineOptions;
}

/** vLLM-like prefix cache over characters: fixed-size blocks, each keyed by its whole prefix, LRU. */
export interface BlockCacheOptions {
  /** Characters per block (vLLM: 16 tokens per block; 64 chars ≈ 16 tokens). Default 64. */
  blockChars?: number;
  /** Blocks kept before the least recently used one is evicted. Default 1 048 576 (64 MiB of text). */
  capacityBlocks?: number;
  /**
   * When a request's blocks become reusable. `arrival` (default): at once, as if prefill took no time, so
   * identical prefixes arriving together share (an upper bound). `reply`: only once the reply is sent, like
   * a real server, where a prefix being computed cannot serve a request that arrives meanwhile.
   */
  registerOn?: 'arrival' | 'reply';
}

/** Prefill accounting of a fake with a block cache, in prompt characters. */
export interface PrefillStats {
  /** Chat-completions calls the cache saw. */
  calls: number;
  /** Characters of rendered prompt text (`promptText`) over those calls. */
  promptChars: number;
  /** Characters served from cached blocks. */
  cachedChars: number;
  /** `promptChars - cachedChars`: what the backend would have to prefill. */
  uncachedChars: number;
}

export interface FakeOpenAI {
  /** e.g. `http://127.0.0.1:40123/v1`. */
  baseURL: string;
  /** Every chat-completions call, in arrival order (empty when `record: false`). */
  calls: RecordedCall[];
  /** Total chat-completions calls received (counted even when not recorded). */
  readonly callCount: number;
  /** Chat-completions calls currently received but not yet answered or closed. */
  inflight(): number;
  /** Peak of `inflight()` since start (or since `resetStats`). */
  readonly maxInflight: number;
  /** Peak number of calls being served at once (≤ `slots`). */
  readonly maxServing: number;
  /** Total ms calls spent being served (from taking a slot to their reply), summed over calls. */
  readonly servedMs: number;
  /** Replace the script (played from its start) and, optionally, the fallback. */
  setScript(script: FakeReply[], fallback?: FakeReply | FakeReplyFn): void;
  /** Resolves once `callCount >= n` (rejects after `timeoutMs`, default 5 s). */
  waitForCalls(n: number, timeoutMs?: number): Promise<void>;
  /** Resolves once no chat-completions call is in flight (rejects after `timeoutMs`, default 5 s). */
  waitForIdle(timeoutMs?: number): Promise<void>;
  /** Clears `calls` and `maxInflight` (and the prefill counters, not the cache's content). */
  resetStats(): void;
  /** Prefill accounting since start (or `resetStats`); all zero when `blockCache` is off. */
  prefill(): PrefillStats;
  /** Empties the block cache (a backend restart). */
  clearBlockCache(): void;
  /** The batching engine, when started with `engine`. */
  readonly engine: BatchingEngine | undefined;
  /** Stops listening and destroys every open socket (hung calls included). */
  close(): Promise<void>;
}

const ROLE_NAMES = ['moderator', 'analyst', 'critic', 'evaluator', 'judge', 'reviewer', 'proposer'];

/** Fenced data (`<<<X>>>…<<<END_X>>>`, with or without a nonce) is text under evaluation, not the prompt. */
const FENCED = /<<<([A-Z_]+?)((?:_[A-Za-z0-9_-]+)?)>>>[\s\S]*?<<<END_\1\2>>>/g;

function firstRoleName(text: string): string | undefined {
  let best: string | undefined;
  let bestAt = Infinity;
  for (const role of ROLE_NAMES) {
    const at = text.indexOf(role);
    if (at >= 0 && at < bestAt) {
      best = role;
      bestAt = at;
    }
  }
  return best;
}

/**
 * Role of a request: the json_schema name the client sets to the role name, or (json_object mode) the
 * first known role name in the user message outside its data fences (the role's instruction lives there
 * since the prompts put the shared text first), else in the system prompt.
 */
export function requestRole(body: FakeChatRequest): string | undefined {
  const name = body.response_format?.json_schema?.name;
  if (typeof name === 'string') return name;
  const text = (role: string): string | undefined =>
    body.messages
      ?.find((m) => m.role === role)
      ?.content.replace(FENCED, '')
      .toLowerCase();
  const user = text('user');
  const system = text('system');
  return (
    (user === undefined ? undefined : firstRoleName(user)) ??
    (system === undefined ? undefined : firstRoleName(system))
  );
}

/** An object that validates against every role's output schema (extra keys are stripped by zod). */
export function universalReply(stance: 'match' | 'no_match', confidence = 0.9): Record<string, unknown> {
  return {
    reasoning: 'The candidate and the ground truth share the same core mechanism.',
    core_method: 'A shared core method.',
    checklist: [],
    gt_components: [],
    candidate_components: [],
    objections: [],
    stance,
    verdict: stance,
    confidence,
  };
}

const estimateTokens = (chars: number): number => Math.max(1, Math.ceil(chars / 4));

/**
 * The prompt text as a chat template renders it: each message as a role header, its content and an end
 * marker, in order (ChatML-like). The block cache works on this string, so a change in an earlier message
 * invalidates every later block, as it does in a real server.
 */
export function promptText(body: FakeChatRequest): string {
  let text = '';
  for (const m of body.messages ?? []) {
    text += `<|im_start|>${m.role}\n${typeof m.content === 'string' ? m.content : ''}<|im_end|>\n`;
  }
  return text;
}

/** A block cache over prompt texts. */
export interface BlockCache {
  /** Leading cached characters of `text`, then (unless `register: false`) caches all its blocks. */
  lookup(text: string, options?: { register?: boolean }): number;
  /** Caches all full blocks of `text` (for `registerOn: 'reply'`). */
  register(text: string): void;
  clear(): void;
  readonly size: number;
}

/**
 * vLLM's automatic prefix caching over characters: the prompt is cut into full blocks of `blockChars`;
 * block i's key is a hash of the whole prefix up to its end (vLLM chains each block's hash with its
 * parent's, which is the same thing), so a block is reused only when everything before it is identical.
 * The cached prefix is the longest run of leading blocks already present; the partial last block is never
 * cached, and at least one character is always computed (vLLM recomputes the last token of a full hit).
 * LRU eviction; when a request's blocks are registered is the fake's `registerOn` choice.
 */
export function createBlockCache(options: BlockCacheOptions = {}): BlockCache {
  const blockChars = options.blockChars ?? 64;
  const capacity = options.capacityBlocks ?? 1 << 20;
  if (!Number.isInteger(blockChars) || blockChars < 1) throw new RangeError('blockChars must be ≥ 1');
  if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError('capacityBlocks must be ≥ 1');
  const blocks = new Map<string, true>();
  const keysOf = (text: string): string[] => {
    const hash = createHash('sha256');
    const keys: string[] = [];
    for (let i = 0; i < Math.floor(text.length / blockChars); i++) {
      hash.update(text.slice(i * blockChars, (i + 1) * blockChars));
      keys.push(hash.copy().digest('base64'));
    }
    return keys;
  };
  const insert = (key: string): void => {
    blocks.delete(key); // refresh: Map iteration order is the LRU order
    blocks.set(key, true);
    if (blocks.size > capacity) {
      const oldest = blocks.keys().next().value;
      if (oldest !== undefined) blocks.delete(oldest);
    }
  };
  return {
    lookup(text, options = {}) {
      const keys = keysOf(text);
      let hits = 0;
      while (hits < keys.length && blocks.has(keys[hits]!)) hits += 1;
      // A hit refreshes its blocks; registering adds (and refreshes) every block of the prompt.
      for (const key of (options.register ?? true) ? keys : keys.slice(0, hits)) insert(key);
      return Math.min(hits * blockChars, Math.max(0, text.length - 1));
    },
    register(text) {
      for (const key of keysOf(text)) insert(key);
    },
    clear: () => blocks.clear(),
    get size() {
      return blocks.size;
    },
  };
}

function promptChars(body: FakeChatRequest): number {
  let n = 0;
  for (const m of body.messages ?? []) n += typeof m.content === 'string' ? m.content.length : 0;
  return n;
}

/** Starts the fake on 127.0.0.1 and resolves once it listens. */
export async function startFakeOpenAI(options: FakeOpenAIOptions = {}): Promise<FakeOpenAI> {
  let script = options.script ?? [];
  let scriptPos = 0;
  let fallback: FakeReply | FakeReplyFn = options.fallback ?? { kind: 'status', status: 500 };
  const latencyMs = options.latencyMs ?? 0;
  const record = options.record ?? true;
  const calls: RecordedCall[] = [];
  let callCount = 0;
  let inflight = 0;
  let maxInflight = 0;
  let completionSeq = 0;
  let closing = false;
  /** A chat.completion body with one assistant `message` (its other fields as given) and `usage`. */
  const completionBody = (
    body: FakeChatRequest,
    message: Record<string, unknown>,
    finishReason: string,
    usage: Record<string, unknown>,
  ): string => {
    completionSeq += 1;
    return JSON.stringify({
      id: `chatcmpl-fake-${completionSeq}`,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: options.replyModel ?? (typeof body.model === 'string' ? body.model : 'fake-model'),
      choices: [
        { index: 0, message: { role: 'assistant', ...message }, logprobs: null, finish_reason: finishReason },
      ],
      usage,
    });
  };
  const blockCache =
    options.blockCache === undefined || options.blockCache === false
      ? undefined
      : createBlockCache(options.blockCache === true ? {} : options.blockCache);
  const prefill = { calls: 0, promptChars: 0, cachedChars: 0 };
  const registerOnArrival =
    typeof options.blockCache !== 'object' || (options.blockCache.registerOn ?? 'arrival') === 'arrival';
  /** Cached characters of each call's prompt, looked up once when it is served. */
  const cachedByCall = new WeakMap<FakeChatRequest, { textChars: number; cachedChars: number }>();
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  const engine = options.engine === undefined ? undefined : createBatchingEngine(options.engine);
  const slots = engine === undefined ? (options.slots ?? Infinity) : Infinity;
  let busy = 0;
  let maxServing = 0;
  let servedMs = 0;
  const queued: Array<{ call: RecordedCall; start: () => void }> = [];

  const watchers = new Set<() => void>();
  const notify = (): void => {
    for (const watcher of watchers) watcher();
  };
  const waitUntil = (condition: () => boolean, what: string, timeoutMs = 5_000): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      if (condition()) {
        resolve();
        return;
      }
      const timer = setTimeout(() => {
        watchers.delete(check);
        reject(new Error(`fake OpenAI: timed out after ${timeoutMs} ms waiting for ${what}`));
      }, timeoutMs);
      const check = (): void => {
        if (!condition()) return;
        clearTimeout(timer);
        watchers.delete(check);
        resolve();
      };
      watchers.add(check);
    });

  const later = (ms: number, fn: () => void): void => {
    const t = setTimeout(() => {
      timers.delete(t);
      fn();
    }, ms);
    timers.add(t);
  };

  const nextReply = (body: FakeChatRequest, call: RecordedCall): FakeReply => {
    const scripted = script[scriptPos];
    if (scripted !== undefined) {
      scriptPos += 1;
      return scripted;
    }
    return typeof fallback === 'function' ? fallback(body, call) : fallback;
  };

  const sendJson = (
    res: ServerResponse,
    call: RecordedCall,
    status: number,
    payload: string,
    extra?: Record<string, string>,
  ): void => {
    if (res.destroyed || res.writableEnded) return;
    call.status = status;
    res.writeHead(status, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(payload),
      ...extra,
    });
    res.end(payload);
  };

  const play = (
    reply: FakeReply,
    body: FakeChatRequest,
    call: RecordedCall,
    req: IncomingMessage,
    res: ServerResponse,
  ): void => {
    switch (reply.kind) {
      case 'hang':
        return;
      case 'reset':
        call.outcome = 'reset';
        req.socket.destroy();
        return;
      case 'slow':
        later(reply.ms, () => play(reply.then, body, call, req, res));
        return;
      case 'status': {
        const errorBody = reply.body ?? {
          error: { message: `fake status ${reply.status}`, type: 'server_error', param: null, code: null },
        };
        const headers: Record<string, string> = {};
        if (reply.retryAfter !== undefined) headers['retry-after'] = reply.retryAfter;
        sendJson(res, call, reply.status, JSON.stringify(errorBody), headers);
        return;
      }
      case 'budget': {
        const budget = typeof body.max_tokens === 'number' ? body.max_tokens : Infinity;
        if (budget >= reply.needTokens) {
          play({ kind: 'json', body: reply.body }, body, call, req, res);
        } else {
          // The model wanted needTokens for the whole body: it got the same fraction of it.
          const full = JSON.stringify(reply.body);
          const cut = full.slice(0, Math.floor((full.length * budget) / reply.needTokens));
          play({ kind: 'text', text: cut, finishReason: 'length' }, body, call, req, res);
        }
        return;
      }
      case 'completion': {
        const usage = { prompt_tokens: estimateTokens(promptChars(body)), ...reply.usage };
        sendJson(
          res,
          call,
          200,
          completionBody(body, { refusal: null, ...reply.message }, reply.finishReason, usage),
        );
        return;
      }
      case 'json':
      case 'text': {
        const content = reply.kind === 'json' ? JSON.stringify(reply.body) : reply.text;
        const cached = cachedByCall.get(body);
        if (cached !== undefined && !registerOnArrival) blockCache?.register(promptText(body));
        // With a block cache, tokens count the rendered template, the text the cache works on.
        const promptTokens = estimateTokens(cached === undefined ? promptChars(body) : cached.textChars);
        const cutAt = reply.finishReason === 'length' && typeof body.max_tokens === 'number';
        const completionTokens =
          content === null ? 0 : cutAt ? (body.max_tokens ?? 0) : estimateTokens(content.length);
        const cachedChars = cached?.cachedChars;
        // Tokens ≈ chars / 4 like prompt_tokens; a cached token is a whole one, so round down.
        const details =
          cachedChars === undefined
            ? {}
            : {
                prompt_tokens_details: {
                  cached_tokens: Math.min(promptTokens, Math.floor(cachedChars / 4)),
                },
              };
        const usage = {
          prompt_tokens: promptTokens,
          completion_tokens: completionTokens,
          total_tokens: promptTokens + completionTokens,
          ...details,
        };
        sendJson(
          res,
          call,
          200,
          completionBody(body, { content, refusal: null }, reply.finishReason ?? 'stop', usage),
        );
        return;
      }
    }
  };

  const onChat = (req: IncomingMessage, res: ServerResponse, raw: string): void => {
    let body: FakeChatRequest;
    try {
      body = JSON.parse(raw) as FakeChatRequest;
    } catch {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end('{"error":{"message":"invalid JSON body","type":"invalid_request_error"}}');
      return;
    }
    const call: RecordedCall = {
      index: callCount,
      method: req.method ?? '',
      path: req.url ?? '',
      headers: req.headers,
      body,
      role: requestRole(body),
      arrivedAt: performance.now(),
      startedAt: undefined,
      finishedAt: undefined,
      outcome: 'pending',
      status: undefined,
    };
    callCount += 1;
    if (record) calls.push(call);
    inflight += 1;
    if (inflight > maxInflight) maxInflight = inflight;
    let started = false;
    /** The call gets a slot: the block cache sees its prompt and its reply is played. */
    const start = (): void => {
      started = true;
      busy += 1;
      if (busy > maxServing) maxServing = busy;
      call.startedAt = performance.now();
      if (blockCache !== undefined) {
        const text = promptText(body);
        const cached = blockCache.lookup(text, { register: registerOnArrival });
        cachedByCall.set(body, { textChars: text.length, cachedChars: cached });
        prefill.calls += 1;
        prefill.promptChars += text.length;
        prefill.cachedChars += cached;
      }
      const promptTokens = estimateTokens(promptChars(body));
      const reply =
        options.contextTokens !== undefined && promptTokens > options.contextTokens
          ? llamaContextOverflow(promptTokens, options.contextTokens)
          : options.rejectJsonSchema !== undefined && body.response_format?.type === 'json_schema'
            ? llamaSchemaFailed(options.rejectJsonSchema)
            : ((options.openaiReasoningModels?.test(body.model ?? '') === true
                ? openaiReasoningRefusal(body)
                : undefined) ?? nextReply(body, call));
      if (engine !== undefined) {
        const priority = typeof body['priority'] === 'number' ? body['priority'] : 0;
        const refused = engine.refuse(priority);
        if (refused !== undefined) {
          play({ kind: 'status', status: refused.status, body: refused.body }, body, call, req, res);
        } else if (reply.kind === 'hang' || reply.kind === 'reset' || reply.kind === 'status') {
          play(reply, body, call, req, res);
        } else {
          const cancel = engine.submit(priority, () => play(reply, body, call, req, res));
          res.once('close', cancel);
        }
      } else if (latencyMs > 0 && reply.kind !== 'hang' && reply.kind !== 'reset') {
        later(latencyMs, () => play(reply, body, call, req, res));
      } else {
        play(reply, body, call, req, res);
      }
    };
    res.once('close', () => {
      inflight -= 1;
      call.finishedAt = performance.now();
      if (call.outcome === 'pending') {
        call.outcome = res.writableFinished ? 'replied' : closing ? 'server_closed' : 'client_closed';
      }
      if (started) {
        busy -= 1;
        servedMs += call.finishedAt - (call.startedAt ?? call.finishedAt);
        const next = queued.shift();
        if (next !== undefined && !closing) next.start();
      } else {
        const at = queued.findIndex((q) => q.call === call);
        if (at >= 0) queued.splice(at, 1);
      }
      notify();
    });
    notify();
    if (busy < slots) start();
    else queued.push({ call, start });
  };

  const server = createServer((req, res) => {
    const url = req.url ?? '';
    if (engine !== undefined && req.method === 'GET' && url === '/metrics') {
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
      res.end(engine.metrics(options.replyModel ?? 'fake-model'));
      return;
    }
    if (req.method === 'GET' && (url === '/v1/models' || url.startsWith('/v1/models?'))) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"object":"list","data":[{"id":"fake-model","object":"model","owned_by":"fake"}]}');
      return;
    }
    if (req.method !== 'POST' || url !== '/v1/chat/completions') {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end('{"error":{"message":"not found","type":"invalid_request_error"}}');
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () =>
      onChat(req, res, chunks.length === 1 ? chunks[0]!.toString() : Buffer.concat(chunks).toString()),
    );
  });
  server.keepAliveTimeout = 30_000;
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;

  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    calls,
    get callCount() {
      return callCount;
    },
    inflight: () => inflight,
    get maxInflight() {
      return maxInflight;
    },
    get maxServing() {
      return maxServing;
    },
    get servedMs() {
      return servedMs;
    },
    setScript(next, nextFallback) {
      script = next;
      scriptPos = 0;
      if (nextFallback !== undefined) fallback = nextFallback;
    },
    waitForCalls: (n, timeoutMs) => waitUntil(() => callCount >= n, `${n} call(s)`, timeoutMs),
    waitForIdle: (timeoutMs) => waitUntil(() => inflight === 0, 'no call in flight', timeoutMs),
    resetStats() {
      calls.length = 0;
      maxInflight = inflight;
      prefill.calls = 0;
      prefill.promptChars = 0;
      prefill.cachedChars = 0;
    },
    prefill: () => ({ ...prefill, uncachedChars: prefill.promptChars - prefill.cachedChars }),
    clearBlockCache: () => blockCache?.clear(),
    engine,
    close() {
      closing = true;
      engine?.close();
      for (const t of timers) clearTimeout(t);
      timers.clear();
      return new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const socket of sockets) socket.destroy();
        server.closeAllConnections();
      });
    },
  };
}
