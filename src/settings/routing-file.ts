/**
 * The routing file (REWARD_CONFIG) and backend settings schemas: named backends and per-role / per-node
 * overrides. A leaf (zod and the shared defaults only), so config.ts can validate it without pulling in the
 * engine or its HTTP client.
 */
import { z } from 'zod';

import { BACKEND_DEFAULTS } from './defaults.js';

/** `json_schema` (strict structured output) or `json_object` (the schema goes into the prompt). */
export const ResponseFormat = z.enum(['json_schema', 'json_object']);
export type ResponseFormat = z.infer<typeof ResponseFormat>;

export const ReplicaPolicy = z.enum(['affinity', 'round_robin']);
export type ReplicaPolicy = z.infer<typeof ReplicaPolicy>;

/** `engine`: from the engine's metrics, else a latency gradient; `fixed`: the ceiling; `aimd`: the old mode. */
export const InflightControl = z.enum(['engine', 'fixed', 'aimd']);
export type InflightControl = z.infer<typeof InflightControl>;

/**
 * High-priority calls carry the engine's request priority: `vllm` sends `priority: -1` (lower is earlier;
 * needs `--scheduling-policy priority`, else vLLM refuses any priority but 0), `sglang` sends `priority: 1`
 * (higher is earlier by default; needs `--enable-priority-scheduling`). Normal calls send none.
 */
export const EnginePriority = z.enum(['off', 'vllm', 'sglang']);
export type EnginePriority = z.infer<typeof EnginePriority>;

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/**
 * `reasoning_effort` sent with every request (OpenAI o-series / gpt-5, GPT-OSS on vLLM / SGLang / Ollama):
 * how long a reasoning model thinks before it answers, most of what a judgment costs on such a model.
 */
export const ReasoningEffort = z.enum(['minimal', 'low', 'medium', 'high']);
export type ReasoningEffort = z.infer<typeof ReasoningEffort>;

/**
 * Request fields the server itself sets, refused in `extra_body` / JUDGE_EXTRA_BODY, each with the setting
 * that owns it: an engine field must not change what is asked, how the reply is read, or a sampling value
 * that the routing already decides (and keys).
 */
export const OWNED_BODY_KEYS: ReadonlyMap<string, string> = new Map([
  ['model', 'JUDGE_MODEL / model'],
  ['messages', "the roles' prompts"],
  ['response_format', 'JUDGE_RESPONSE_FORMAT / response_format'],
  ['stream', 'the server (it reads whole replies)'],
  ['stream_options', 'the server (it reads whole replies)'],
  ['n', 'the server (one choice per call; parallel members are graph nodes)'],
  ['tools', 'the server (judges answer in JSON, not tool calls)'],
  ['tool_choice', 'the server (judges answer in JSON, not tool calls)'],
  ['parallel_tool_calls', 'the server (judges answer in JSON, not tool calls)'],
  ['functions', 'the server (judges answer in JSON, not tool calls)'],
  ['function_call', 'the server (judges answer in JSON, not tool calls)'],
  ['max_tokens', 'max_tokens in the routing file or graph (and the learned budgets)'],
  ['max_completion_tokens', 'max_tokens in the routing file or graph (and the learned budgets)'],
  ['temperature', 'temperature in the routing file or graph'],
  ['top_p', 'top_p in the routing file or graph'],
  ['seed', 'seed in the graph'],
  ['reasoning_effort', 'JUDGE_REASONING_EFFORT / reasoning_effort'],
  ['priority', 'JUDGE_ENGINE_PRIORITY / engine_priority'],
]);

/** Engine fields merged into every request (`chat_template_kwargs`, `top_k`, `min_p`, …); owned keys refused. */
export const ExtraBody = z.record(z.string(), z.unknown()).superRefine((body, ctx) => {
  for (const key of Object.keys(body)) {
    const owner = OWNED_BODY_KEYS.get(key);
    if (owner === undefined) continue;
    ctx.addIssue({
      code: 'custom',
      path: [key],
      message: `"${key}" is set by the server, not by extra_body (it comes from ${owner})`,
    });
  }
});
export type ExtraBody = z.infer<typeof ExtraBody>;

export const BackendSettings = z
  .strictObject({
    /** One replica; or use `base_urls`. */
    base_url: z.url().optional(),
    /** Replicas of one model (same weights, same model name), routed by ground-truth affinity. */
    base_urls: z.array(z.url()).min(1).max(64).optional(),
    api_key: z.string().default(BACKEND_DEFAULTS.apiKey),
    model: z.string().min(1),
    /** Per HTTP attempt, ms (clipped to the judgment's deadline). */
    timeout_ms: z.number().int().positive().default(BACKEND_DEFAULTS.timeoutMs),
    max_retries: z.number().int().min(0).max(10).default(BACKEND_DEFAULTS.maxRetries),
    max_inflight: z.number().int().positive().default(BACKEND_DEFAULTS.maxInflight),
    rpm: z.number().int().positive().optional(),
    tpm: z.number().int().positive().optional(),
    response_format: ResponseFormat.default(BACKEND_DEFAULTS.responseFormat),
    /** The old opt-in adaptive limit (AIMD); `true` means `inflight_control: aimd`. */
    adaptive_inflight: z.boolean().default(BACKEND_DEFAULTS.adaptiveInflight),
    /** How each replica's in-flight limit is set (`max_inflight` is the ceiling); default `engine`. */
    inflight_control: InflightControl.optional(),
    /** `auto` (each replica's base URL with `/v1` replaced by `/metrics`), `off`, or one URL per replica. */
    engine_metrics: z.union([z.enum(['auto', 'off']), z.array(z.url()).min(1)]).default('auto'),
    /** ms between two reads of an engine's metrics. */
    engine_metrics_interval_ms: z
      .number()
      .int()
      .min(10)
      .max(60_000)
      .default(BACKEND_DEFAULTS.engineMetricsIntervalMs),
    engine_priority: EnginePriority.default('off'),
    replica_policy: ReplicaPolicy.default(BACKEND_DEFAULTS.replicaPolicy),
    /** ms; 0 sends parallel calls sharing a prompt prefix at once. */
    prefix_stagger_ms: z.number().int().min(0).max(10_000).default(BACKEND_DEFAULTS.prefixStaggerMs),
    routing_key_header: z
      .string()
      .regex(HEADER_NAME, 'must be an HTTP header name')
      .transform((h) => h.toLowerCase())
      .default(BACKEND_DEFAULTS.routingKeyHeader),
    /**
     * Context window per request, in tokens (vLLM `--max-model-len`; llama.cpp `--ctx-size` ÷ `--parallel`).
     * Optional: re-asks are checked against it (or against a size the backend names in an overflow error).
     */
    context_tokens: z.number().int().min(256).optional(),
    /** Retry budget: retries ≤ this fraction of calls over a sliding window (plus a small floor). */
    retry_budget: z.number().min(0).max(1).default(BACKEND_DEFAULTS.retryBudget),
    /** After a replica falls back to json_object, ms until json_schema is tried again. */
    schema_reprobe_ms: z.number().int().positive().default(BACKEND_DEFAULTS.schemaReprobeMs),
    /** Sent with every call that its node or role does not set otherwise (JUDGE_REASONING_EFFORT). */
    reasoning_effort: ReasoningEffort.optional(),
    /** Merged into every request body (JUDGE_EXTRA_BODY): engine fields; keys the server owns refused. */
    extra_body: ExtraBody.optional(),
  })
  .superRefine((s, ctx) => {
    if ((s.base_url === undefined) === (s.base_urls === undefined)) {
      ctx.addIssue({
        code: 'custom',
        path: ['base_url'],
        message: 'set exactly one of base_url and base_urls',
      });
    }
    if (s.base_urls !== undefined && new Set(s.base_urls).size !== s.base_urls.length) {
      ctx.addIssue({ code: 'custom', path: ['base_urls'], message: 'lists a replica twice' });
    }
    if (s.adaptive_inflight && s.inflight_control !== undefined && s.inflight_control !== 'aimd') {
      ctx.addIssue({
        code: 'custom',
        path: ['adaptive_inflight'],
        message: `adaptive_inflight: true is inflight_control "aimd"; it contradicts "${s.inflight_control}"`,
      });
    }
    const replicas = s.base_urls?.length ?? 1;
    if (Array.isArray(s.engine_metrics) && s.engine_metrics.length !== replicas) {
      ctx.addIssue({
        code: 'custom',
        path: ['engine_metrics'],
        message: `lists ${s.engine_metrics.length} metrics URL(s) for ${replicas} replica(s): one per replica, in order`,
      });
    }
  });
export type BackendSettings = z.infer<typeof BackendSettings>;
export type BackendSettingsInput = z.input<typeof BackendSettings>;

const RouteOverride = z.strictObject({
  /** A key of `backends`, or `default` / `offline`. */
  backend: z.string().min(1).optional(),
  model: z.string().min(1).optional(),
  temperature: z.number().min(0).max(2).optional(),
  top_p: z.number().gt(0).max(1).optional(),
  max_tokens: z.number().int().min(16).max(32_768).optional(),
  reasoning_effort: ReasoningEffort.optional(),
});
export type RouteOverride = z.infer<typeof RouteOverride>;

/** Backend names that a routing file may reference but not define. */
export const DEFAULT_BACKEND = 'default';
export const OFFLINE_BACKEND = 'offline';
const RESERVED = new Set([DEFAULT_BACKEND, OFFLINE_BACKEND]);

export const RoutingFile = z
  .strictObject({
    backends: z.record(z.string().min(1), BackendSettings).default({}),
    /** Backend for nodes without a `backend` override (default: the environment's backend). */
    default: z.string().min(1).optional(),
    roles: z.record(z.string().min(1), RouteOverride).default({}),
    nodes: z.record(z.string().min(1), RouteOverride).default({}),
  })
  .superRefine((file, ctx) => {
    const defined = new Set(Object.keys(file.backends));
    for (const name of defined) {
      if (RESERVED.has(name)) {
        ctx.addIssue({
          code: 'custom',
          path: ['backends', name],
          message: `"${name}" is reserved; pick another name`,
        });
      }
    }
    const known = (name: string): boolean => defined.has(name) || RESERVED.has(name);
    if (file.default !== undefined && !known(file.default)) {
      ctx.addIssue({ code: 'custom', path: ['default'], message: `unknown backend "${file.default}"` });
    }
    for (const section of ['roles', 'nodes'] as const) {
      for (const [key, override] of Object.entries(file[section])) {
        if (override.backend !== undefined && !known(override.backend)) {
          ctx.addIssue({
            code: 'custom',
            path: [section, key, 'backend'],
            message: `unknown backend "${override.backend}" (defined: ${[...defined, ...RESERVED].join(', ')})`,
          });
        }
      }
    }
  });
export type RoutingFile = z.infer<typeof RoutingFile>;

/** How a backend's replicas' in-flight limits are set (`adaptive_inflight: true` is the old `aimd`). */
export function inflightControlOf(settings: BackendSettings): InflightControl {
  return settings.inflight_control ?? (settings.adaptive_inflight ? 'aimd' : 'engine');
}

/** The replica URLs of a backend (`base_urls`, else the one `base_url`). */
export function replicaUrls(settings: BackendSettings): string[] {
  return settings.base_urls ?? (settings.base_url === undefined ? [] : [settings.base_url]);
}

/** Validates a parsed routing file; throws an Error whose message names each offending field. */
export function loadRoutingFile(json: unknown): RoutingFile {
  const result = RoutingFile.safeParse(json);
  if (!result.success) throw new Error(`invalid routing config:\n${z.prettifyError(result.error)}`);
  return result.data;
}
