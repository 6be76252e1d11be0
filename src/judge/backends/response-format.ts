/**
 * Which `response_format` one replica gets: `json_schema` (constrained decoding) unless the replica has
 * shown that it refuses the schema itself, then `json_object` (the schema in the prompt) — and only for a
 * while: after `reprobeMs` one call is sent as `json_schema` again, and if the replica accepts it the
 * replica is back on `json_schema`. A replica configured `json_object` never switches.
 *
 * What counts as evidence is decided in format-negotiation.ts (`schemaRefusal` in openai-wire.ts): a 4xx
 * that names the schema, with a successful `json_object` probe; or a suspect refusal (a 4xx that rejects the
 * body's shape without naming it, a 5xx that names the schema) repeated word for word by a second
 * `json_schema` request sent after a successful `json_object` probe. Never a 5xx, 429 or timeout alone.
 */
import type { ResponseFormat } from '../../settings/routing-file.js';

/** One switch, told once: which replica, which way, and why. */
export interface ResponseFormatSwitch {
  backend: string;
  replica: string;
  from: ResponseFormat;
  to: ResponseFormat;
  /** Why, in words (the refusal's status and message, or the accepted re-probe). */
  evidence: string;
  /** The refusal's HTTP status (`to: json_object`). */
  status?: number | undefined;
  /** ms until json_schema is tried again (`to: json_object`). */
  reprobeInMs?: number | undefined;
}

/** What the next request to the replica is sent as. `reprobe`: this request tests json_schema again. */
export interface FormatPlan {
  format: ResponseFormat;
  reprobe: boolean;
}

export interface ReplicaFormat {
  /** The format now in use (a re-probe in flight does not change it). */
  readonly mode: ResponseFormat;
  /** Switches so far, by the format switched to. */
  readonly switches: ReadonlyMap<ResponseFormat, number>;
  /** The next request's format; at most one re-probe is handed out at a time. */
  plan(): FormatPlan;
  /** Evidence that the schema itself is refused: switch to json_object (once; later calls are no-ops). */
  refused(evidence: string, status: number | undefined): void;
  /** The re-probe was accepted: back to json_schema. */
  reprobeAccepted(): void;
  /** The re-probe was refused again: stay on json_object, next re-probe after `reprobeMs`. */
  reprobeRefused(): void;
  /** The re-probe failed for another reason (timeout, 5xx, 429…): the next request re-probes. */
  reprobeInconclusive(): void;
}

export interface ReplicaFormatOptions {
  backend: string;
  replica: string;
  configured: ResponseFormat;
  /** How long a fallback lasts before json_schema is tried again, ms. */
  reprobeMs: number;
  now?: (() => number) | undefined;
  onSwitch?: ((event: ResponseFormatSwitch) => void) | undefined;
}

export function createReplicaFormat(options: ReplicaFormatOptions): ReplicaFormat {
  const now = options.now ?? Date.now;
  let mode: ResponseFormat = options.configured;
  let nextProbeAt = Infinity;
  let probing = false;
  const switches = new Map<ResponseFormat, number>();
  const record = (to: ResponseFormat, evidence: string, status?: number): void => {
    const from = mode;
    mode = to;
    switches.set(to, (switches.get(to) ?? 0) + 1);
    options.onSwitch?.({
      backend: options.backend,
      replica: options.replica,
      from,
      to,
      evidence,
      ...(status === undefined ? {} : { status }),
      ...(to === 'json_object' ? { reprobeInMs: options.reprobeMs } : {}),
    });
  };
  return {
    get mode() {
      return mode;
    },
    switches,
    plan() {
      if (mode === 'json_schema' || options.configured === 'json_object')
        return { format: mode, reprobe: false };
      if (!probing && now() >= nextProbeAt) {
        probing = true;
        return { format: 'json_schema', reprobe: true };
      }
      return { format: 'json_object', reprobe: false };
    },
    refused(evidence, status) {
      if (options.configured === 'json_object' || mode === 'json_object') return;
      nextProbeAt = now() + options.reprobeMs;
      record('json_object', evidence, status);
    },
    reprobeAccepted() {
      probing = false;
      nextProbeAt = Infinity;
      if (mode === 'json_object') record('json_schema', 'json_schema re-probe accepted');
    },
    reprobeRefused() {
      probing = false;
      nextProbeAt = now() + options.reprobeMs;
    },
    reprobeInconclusive() {
      probing = false;
    },
  };
}
