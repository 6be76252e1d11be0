import type { ControlSnapshot } from './inflight-control.js';
import type { ComparativeContext, Focus, RoleContext, Verdict } from '../roles/types.js';
import type { ErrorCode } from '../errors.js';
import type { Flow } from './fair-queue.js';
import type { ReasoningEffort } from '../settings/routing-file.js';

export type { Verdict } from '../roles/types.js';

/**
 * How one judgment ended. `ok` and `rejected_input` carry a reward; the others are failures and carry
 * `reward: null` — a failure is never a 0.
 */
export type JudgmentStatus = 'ok' | 'rejected_input' | 'judge_error' | 'timeout' | 'overloaded';

export interface JudgmentInput {
  question: string;
  candidate: string;
  groundTruth: string;
}

export interface Usage {
  calls: number;
  promptTokens: number;
  completionTokens: number;
  /**
   * Prompt tokens the backend served from its prefix cache (`usage.prompt_tokens_details.cached_tokens`),
   * summed over calls; null (unknown) when any call's backend did not report it; 0 with no call.
   */
  cachedPromptTokens: number | null;
  /**
   * Reasoning tokens over calls (`usage.completion_tokens_details.reasoning_tokens`, part of
   * completionTokens), or estimated from a trace where a server reported none: then
   * `reasoningTokensEstimated` is true. Absent: 0, none estimated.
   */
  reasoningTokens?: number | undefined;
  reasoningTokensEstimated?: boolean | undefined;
}

/** One message of the debate (one node's answer in one round). */
export interface TranscriptMessage {
  /** 1-based debate round; `final` nodes carry the last round that ran. */
  round: number;
  stage: 'debate' | 'final';
  nodeId: string;
  role: string;
  model: string;
  stance: Verdict | null;
  confidence: number | null;
  /** The validated structured output; absent when the node failed. */
  output?: unknown;
  promptTokens: number;
  completionTokens: number;
  /** Backend-reported cached prompt tokens over this node's calls; null when not reported. */
  cachedPromptTokens: number | null;
  latencyMs: number;
  /** HTTP attempts (retries) plus re-asks for invalid output. */
  attempts: number;
  reasks: number;
  error?: { code: ErrorCode; message: string } | undefined;
  /**
   * The model id the backend reported in its reply (`model` of the completion; vLLM may report a path or
   * a served name other than the one asked for); absent when no reply arrived or the node is local.
   */
  servedModel?: string | undefined;
  /** host[:port] of the replica that answered (replicated OpenAI-compatible backends only). */
  replica?: string | undefined;
  /**
   * The node's reasoning trace (its last reply's), bounded (`boundTrace`: head and tail with a marker);
   * absent when the judge sent none. Where a judge's mistake shows.
   */
  reasoning?: string | undefined;
  /** Reasoning tokens over this node's calls (see Usage.reasoningTokens); absent: 0. */
  reasoningTokens?: number | undefined;
  reasoningTokensEstimated?: boolean | undefined;
}

export interface Judgment {
  status: JudgmentStatus;
  verdict: Verdict | null;
  reward: 0 | 1 | null;
  /** Committee's estimated probability of `match` in [0,1]; null on failure. */
  score: number | null;
  /**
   * A reply the decision read (the deciding node, or a voter) gave its own stance a confidence below 0.5:
   * an Evaluator answering `no_match` with confidence 0.1 says P(match) = 0.9. The stance still decides
   * the reward; the flag marks the judgment for filtering and is counted in metrics. False unless `ok`.
   */
  incoherent: boolean;
  /** Why an input was rejected, or why the judgment failed. */
  reason?: string | undefined;
  error?: { code: ErrorCode; message: string } | undefined;
  graph: { name: string; hash: string };
  promptVersion: string;
  rounds: number;
  /** e.g. `max_rounds`, `unanimous`, `single_round`, `rejected_input`, `deadline`, `aborted`, `node_failed`. */
  stopReason: string;
  transcript: TranscriptMessage[];
  usage: Usage;
  latencyMs: number;
  /** Per-round similarity and objection shares, for a graph with a `converged` early stop. */
  debate?: DebateMonitor | undefined;
}

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

/** What the executor asks a backend for: one structured completion for one node. */
export interface LlmRequest {
  role: string;
  nodeId: string;
  model: string;
  messages: ChatMessage[];
  schemaName: string;
  jsonSchema: Record<string, unknown>;
  temperature?: number | undefined;
  topP?: number | undefined;
  maxTokens?: number | undefined;
  /** `reasoning_effort` sent; the backend's own (JUDGE_REASONING_EFFORT) when undefined. */
  reasoningEffort?: ReasoningEffort | undefined;
  seed?: number | undefined;
  focus?: Focus | undefined;
  /** The structured context the prompt was rendered from (the offline backend answers from it). */
  context: RoleContext | ComparativeContext;
}

/** A reasoning judge's trace, set apart from its final message (reply-trace.ts). */
export interface ReplyReasoning {
  /** The trace as it came (unbounded; transcripts bound it). */
  text: string;
  /**
   * `field`: a reasoning field (`reasoning_content`, `reasoning`: the engine has a reasoning parser);
   * `inline`: in the content (no parser: with a grammar from the first token such a model cannot think).
   */
  source: 'field' | 'inline';
  /** An inline trace that never closed: the reply is all trace, cut. */
  unclosed: boolean;
}

export interface LlmReply {
  /** Raw completion text; the executor parses and validates it. */
  text: string;
  model: string;
  promptTokens: number;
  completionTokens: number;
  /** `usage.prompt_tokens_details.cached_tokens`; null or absent when the backend does not report it. */
  cachedPromptTokens?: number | null | undefined;
  latencyMs: number;
  /** HTTP attempts made, ≥ 1. */
  attempts: number;
  /** `finish_reason` of the reply; `length` means it was cut at `max_tokens` (or the context's end). */
  finishReason: string;
  /** The replica that answered (its metrics label), when the backend has replicas. */
  replica?: string | undefined;
  /** The trace set apart from `text`, when the reply had one. */
  reasoning?: ReplyReasoning | undefined;
  /** Reasoning tokens (reported, else estimated from the trace: `reasoningTokensEstimated`); absent: 0. */
  reasoningTokens?: number | undefined;
  reasoningTokensEstimated?: boolean | undefined;
}

export interface CallOptions {
  signal: AbortSignal;
  /** Absolute deadline (epoch ms): no attempt or backoff may extend past it. */
  deadline: number;
  /**
   * Order among calls waiting for a backend slot: higher first, equal in arrival order. The executor
   * ranks calls of judgments that are further along (and then older) first, so that under a deadline the
   * judgments already started finish instead of every judgment getting halfway. Default 0.
   */
  priority?: number | undefined;
  /** The tenant's fair-queue flow (fair-queue.ts): backend slots are shared between flows by weight. */
  flow?: Flow | undefined;
  /**
   * A call of the high-priority lane: an engine with request priority configured (`engine_priority`) is
   * told so too. Default false.
   */
  urgent?: boolean | undefined;
  /** Told about each retry the backend wants to make (allowed or denied by its retry budget). */
  observer?: JudgeObserver | undefined;
  /**
   * Canaries and audits: backend name → replica label. Every attempt of a backend named here goes to that
   * replica (retries included, quarantine ignored; an open circuit fails the call).
   */
  pin?: ReadonlyMap<string, string> | undefined;
}

/** How one HTTP attempt on a replica ended (a bounded label set). */
export type ReplicaOutcome =
  | 'ok'
  | 'unparsable'
  | 'timeout'
  | 'connection'
  | 'http_429'
  | 'http_503'
  | 'http_5xx'
  | 'http_4xx'
  | 'deadline'
  | 'aborted';

/** One replica's state, read at scrape time. */
export interface ReplicaSnapshot {
  backend: string;
  /** host[:port] of the replica (from config: bounded). */
  replica: string;
  state: 'closed' | 'open' | 'half_open';
  inflight: number;
  /** Calls queued for one of its slots. */
  waiting: number;
  /** Current adaptive in-flight limit. */
  limit: number;
  /** The ceiling (max_inflight). */
  maxInflight: number;
  /** Cumulative attempts by outcome. */
  attempts: ReadonlyMap<ReplicaOutcome, number>;
  /** Cumulative times its circuit opened. */
  circuitOpens: number;
  /** OpenAI-compatible replicas: the response format it is sent now (json_object after a refusal). */
  responseFormat?: 'json_schema' | 'json_object' | undefined;
  /** Cumulative response-format switches, by the format switched to. */
  responseFormatSwitches?: ReadonlyMap<'json_schema' | 'json_object', number> | undefined;
  /** Taken out of real work by the canaries' sequential test (it still receives canaries). */
  quarantined?: boolean | undefined;
  /** How its in-flight limit is set (`inflight_control`). */
  inflightControl?: 'engine' | 'fixed' | 'aimd' | undefined;
  /** The engine-aware control's state (mode `engine`): the engine's load, its capacity, saturation. */
  control?: ControlSnapshot | undefined;
}

/**
 * An LLM backend. `complete` resolves with the raw reply or rejects with a RewardError
 * (RW_JUDGE_TIMEOUT, RW_JUDGE_UNAVAILABLE, RW_JUDGE_UNPARSABLE; RW_CLIENT_ABORTED or the abort reason's own
 * code when the call's signal aborts) once retries are exhausted.
 */
export interface Backend {
  readonly name: string;
  complete(request: LlmRequest, options: CallOptions): Promise<LlmReply>;
  /** Cheap reachability probe for /readyz. */
  ping?(signal: AbortSignal): Promise<boolean>;
  /** True while every slot is busy and calls are queueing. */
  isSaturated?(): boolean;
  /** Per-replica state for metrics (OpenAI-compatible backends). */
  replicas?(): ReplicaSnapshot[];
  /** Takes a replica (by label) out of routing for real work, or puts it back (canary quarantine). */
  setQuarantined?(replica: string, quarantined: boolean): void;
  /** Calls held back so a sibling's prefix prefill could finish first (cumulative). */
  staggeredCalls?(): number;
  /**
   * Context window per request (per slot) in tokens, when known: configured (`context_tokens`) or learned
   * from an overflow error that named it (llama.cpp's `n_ctx`). The executor checks re-asks against it.
   */
  contextTokens?(): number | undefined;
  close?(): Promise<void>;
}

/** Where one node's calls go: which backend, which model, and sampling overrides. */
export interface Route {
  backend: Backend;
  model: string;
  temperature?: number | undefined;
  topP?: number | undefined;
  maxTokens?: number | undefined;
  /** `reasoning_effort` from the routing file's node or role override (it wins over the graph node's). */
  reasoningEffort?: ReasoningEffort | undefined;
  /**
   * What the chosen backend adds to every request of its own (both part of the judgment key): its
   * `reasoning_effort` (JUDGE_REASONING_EFFORT), used where neither route nor node sets one, and a
   * fingerprint of its `extra_body` (JUDGE_EXTRA_BODY); undefined for a backend that adds neither.
   */
  backendRequest?:
    { reasoningEffort?: ReasoningEffort | undefined; extraBody?: string | undefined } | undefined;
}

/** Maps a node (by id, then role) to a route. Created from config in `routing.ts`. */
export interface Router {
  route(node: { id: string; role: string; model?: string | undefined }): Route;
  /** Name reported in responses (`backend`): e.g. `offline`, `openai-compatible`. */
  readonly name: string;
  backends(): Backend[];
}

/** One LLM call as the engine reports it (a re-ask is its own call). */
export interface CallEvent {
  role: string;
  model: string;
  /** The backend's name (from config: bounded). */
  backend: string;
  outcome: 'ok' | ErrorCode;
  latencyMs: number;
  promptTokens: number;
  completionTokens: number;
  /** Backend-reported cached prompt tokens; null when not reported (or the call failed). */
  cachedPromptTokens: number | null;
  /** Reasoning tokens of the reply (part of completionTokens; estimated where not reported); absent: 0. */
  reasoningTokens?: number | undefined;
}

/** A retry a backend wanted to make, and whether its retry budget allowed it. */
export interface RetryEvent {
  backend: string;
  allowed: boolean;
}

/** Observer hooks so serving can count calls without the engine knowing about metrics. */
export interface JudgeObserver {
  onCall?(event: CallEvent): void;
  onRetry?(event: RetryEvent): void;
}

/** The debate monitor's row for one round (src/judge/monitor.ts). */
export interface RoundMonitor {
  round: number;
  /** Per debate node that spoke this round and the previous one: similarity to its previous turn (4 decimals). */
  similarity: Record<string, number>;
  /** True when every such node kept its stance and reached the threshold (false in round 1). */
  repeated: boolean;
  objections: { substantive: number; stylistic: number; unclassified: number };
  /** substantive / (substantive + stylistic); null when neither occurred. */
  substantiveShare: number | null;
  /** Prompt + completion tokens spent up to the end of this round. */
  tokens: number;
}

/** The debate monitor of one judgment: its threshold, budget, rounds and why it stopped. */
export interface DebateMonitor {
  threshold: number;
  budgetTokens: number | null;
  rounds: RoundMonitor[];
  /** Why the debate stopped early, when it did. */
  stop?: { reason: 'converged' | 'token_budget'; round: number; detail: string } | undefined;
}
