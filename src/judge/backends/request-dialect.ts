/**
 * The request dialect of one backend: which field carries the completion budget (`max_tokens`, or
 * `max_completion_tokens` for OpenAI's reasoning models), and whether sampling values may be sent at all
 * (OpenAI's reasoning models accept only the default temperature and top_p). The model name is the first
 * guess (gpt-5*, o1/o3/o4*: no 400 is paid for them); evidence decides after that, as the response-format
 * negotiation does (format-negotiation.ts): a 400 whose `param` names the field switches the whole backend
 * (an Azure deployment of gpt-5 under any name pays one 400 per switch, not one per call), and the attempt
 * that got it is sent again at once in the new dialect, so the call does not fail.
 *
 * OpenAI's refusals, as they come (error.type `invalid_request_error`):
 * - param `max_tokens`, code `unsupported_parameter`: "Unsupported parameter: 'max_tokens' is not supported
 *   with this model. Use 'max_completion_tokens' instead."
 * - param `temperature` (or `top_p`), code `unsupported_value`: "Unsupported value: 'temperature' does not
 *   support 0 with this model. Only the default (1) value is supported."
 */
import type { RequestDialect, TokensParam, WireError } from './openai-wire.js';

export type { RequestDialect, TokensParam };

/** One switch of a backend's dialect, told once, with its evidence. */
export interface RequestDialectSwitch {
  backend: string;
  from: RequestDialect;
  to: RequestDialect;
  /** The refusal's status and message. */
  evidence: string;
}

/** OpenAI's reasoning models, also behind a provider prefix (`openai/gpt-5-mini`, `azure/o3`). */
const REASONING_MODEL = /(?:^|\/)(?:gpt-5|o[1-9](?:$|[-_.]))/i;

/** Whether a model name is one of OpenAI's reasoning models (gpt-5*, o1 / o3 / o4-mini …). */
export const isOpenAIReasoningModel = (model: string): boolean => REASONING_MODEL.test(model);

/** The dialect guessed from the model name: OpenAI's reasoning models get theirs from the first call. */
export function guessDialect(model: string): RequestDialect {
  const reasoning = isOpenAIReasoningModel(model);
  return { tokensParam: reasoning ? 'max_completion_tokens' : 'max_tokens', defaultSamplingOnly: reasoning };
}

export interface BackendDialect {
  /** The dialect the next request is sent in. */
  current(): RequestDialect;
  /**
   * Reads a refusal of a request sent in `sent`: true when it named a field of the dialect and the backend
   * is now (by this refusal or a concurrent one) in a dialect where that field is sent otherwise, so the
   * same request is worth sending again at once.
   */
  learn(status: number, error: WireError, sent: RequestDialect): boolean;
}

const SAMPLING_PARAMS = new Set(['temperature', 'top_p']);

/** A refusal of the field itself (not of its value): OpenAI's code, or a field-unknown wording. */
const UNSUPPORTED_FIELD =
  /not supported|unsupported|unrecognized|unknown (?:field|parameter)|extra (?:fields|inputs)/i;
/** A refusal of any value but the default (OpenAI's `unsupported_value`), not of an out-of-range one. */
const DEFAULT_ONLY = /only the default/i;

/**
 * The refusal names which part of the dialect, or none. A value out of range (`temperature` 3, a
 * `max_tokens` over the context) names the field too, but is not a dialect: it is a failure as before.
 */
function refusedPart(status: number, error: WireError): 'tokens' | 'sampling' | undefined {
  if (status !== 400 && status !== 422) return undefined;
  const param = error.param;
  if (param === 'max_tokens' || param === 'max_completion_tokens') {
    const unsupported = error.code === 'unsupported_parameter' || UNSUPPORTED_FIELD.test(error.message);
    return unsupported ? 'tokens' : undefined;
  }
  if (param !== undefined && SAMPLING_PARAMS.has(param)) {
    const defaultOnly = error.code === 'unsupported_value' || DEFAULT_ONLY.test(error.message);
    return defaultOnly ? 'sampling' : undefined;
  }
  // Without `param` (some proxies drop it), only OpenAI's exact wording counts.
  if (/'max_tokens' is not supported with this model/i.test(error.message)) return 'tokens';
  if (/'(?:temperature|top_p)' does not support .* only the default/i.test(error.message)) return 'sampling';
  return undefined;
}

export function createBackendDialect(options: {
  backend: string;
  model: string;
  onSwitch?: ((event: RequestDialectSwitch) => void) | undefined;
}): BackendDialect {
  let dialect = guessDialect(options.model);
  const change = (to: RequestDialect, status: number, error: WireError): void => {
    const from = dialect;
    dialect = to;
    options.onSwitch?.({ backend: options.backend, from, to, evidence: `HTTP ${status}: ${error.message}` });
  };
  return {
    current: () => dialect,
    learn(status, error, sent) {
      const part = refusedPart(status, error);
      if (part === 'tokens') {
        // The field the refusal names is the one that was sent: send the other one.
        const named = error.param === 'max_completion_tokens' ? 'max_completion_tokens' : 'max_tokens';
        if (named !== sent.tokensParam) return false;
        const other: TokensParam = named === 'max_tokens' ? 'max_completion_tokens' : 'max_tokens';
        if (dialect.tokensParam === named) change({ ...dialect, tokensParam: other }, status, error);
        return true;
      }
      if (part === 'sampling') {
        if (sent.defaultSamplingOnly) return false;
        if (!dialect.defaultSamplingOnly) change({ ...dialect, defaultSamplingOnly: true }, status, error);
        return true;
      }
      return false;
    },
  };
}

/**
 * What stands in for temperature diversity on a model that samples only at its default: its default
 * temperature is 1, so parallel members (distinct seeds) still sample independently — more diverse than at
 * the 0.7 the presets ask for, and nodes asked for temperature 0 are not deterministic there.
 */
export const DEFAULT_SAMPLING_NOTE =
  'temperature and top_p are not sent (only the default, 1, is accepted): every member samples at ' +
  'temperature 1 with its own seed, so parallel members still differ, and temperature-0 nodes are not deterministic';
