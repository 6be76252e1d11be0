/**
 * The response-format negotiation of one attempt: which `response_format` is sent, when a refused
 * `json_schema` is probed as `json_object`, and what evidence switches the replica (response-format.ts holds
 * the replica's state; this decides from one attempt's answers).
 */
import type { ResponseFormat } from '../../settings/routing-file.js';
import { isOk, statusError, type HttpReply } from './openai-errors.js';
import { errorSignature, isContextOverflow, readWireError, schemaRefusal } from './openai-wire.js';
import type { ReplicaFormat } from './response-format.js';

/** Distinct errors remembered as "not about the schema" (each would otherwise cost a probe per call). */
export const MAX_PROBE_MEMO = 64;

/** What one attempt's negotiation works with. */
export interface Negotiation {
  /** The replica's response format (its plan, and where the evidence goes). */
  format: ReplicaFormat;
  /** Sends the attempt's request once in this format; rejects on a transport failure. */
  send: (format: ResponseFormat) => Promise<HttpReply>;
  /**
   * Signatures of refusals whose json_object probe was refused too (not about the schema): not probed
   * again. Shared by the backend's calls; grows to MAX_PROBE_MEMO entries at most.
   */
  probeFailed: Set<string>;
  /** The call's previous failed attempt's error signature (read and updated: see statusError). */
  previous: { signature: string | undefined };
  /** Told the context window (tokens) an overflow error named (llama.cpp's `n_ctx`). */
  onContextTokens: (tokens: number) => void;
}

/**
 * One attempt, in the replica's current response format (see response-format.ts). A `json_schema` request
 * refused in a way that may be about the schema (schemaRefusal) is sent once as `json_object` within the
 * same attempt; the replica switches to `json_object` only on evidence that the schema itself is refused:
 * a refusal that names the schema (4xx) and a successful probe, or a suspect refusal that a second
 * `json_schema` request, sent after the successful probe, repeats word for word. A 5xx, 429 or timeout
 * alone never switches it. A re-probe (json_schema sent while the replica is on json_object) that is
 * accepted switches it back; one refused again is answered as `json_object` in the same attempt; one that
 * ends otherwise (another status, a timeout, a connection error) leaves the next request to re-probe.
 * Resolves with the 2xx answer; throws the last answer's `status` AttemptError otherwise, and rethrows
 * `send`'s rejections.
 */
export async function negotiateFormat(n: Negotiation): Promise<HttpReply> {
  const plan = n.format.plan();
  let reprobeSettled = !plan.reprobe;
  try {
    let reply = await n.send(plan.format);
    if (plan.reprobe && isOk(reply.status)) {
      reprobeSettled = true;
      n.format.reprobeAccepted();
    }
    if (isOk(reply.status)) return reply;
    const refused = reply;
    const first = statusError(refused, n.previous);
    const refusal = plan.format === 'json_schema' ? schemaRefusal(reply.status, first.wire) : undefined;
    if (plan.reprobe) {
      reprobeSettled = true;
      if (refusal === undefined) {
        // Not about the schema (a 5xx, 429…): the next request re-probes.
        n.format.reprobeInconclusive();
      } else {
        n.format.reprobeRefused();
        reply = await n.send('json_object');
      }
    } else if (refusal !== undefined && !n.probeFailed.has(first.signature)) {
      reply = await probe(n, refused, refusal, first.signature, first.wire.message);
    }
    if (isOk(reply.status)) return reply;
    // The last answer decides (a probe's 5xx is retried even if the json_schema 4xx would not be).
    const last = reply === refused ? first : statusError(reply, n.previous);
    if (isContextOverflow(reply.status, last.wire) && last.wire.nCtx !== undefined) {
      n.onContextTokens(last.wire.nCtx);
    }
    throw last.failed;
  } finally {
    // A re-probe cut short (timeout, abort, connection) says nothing: the next request re-probes.
    if (!reprobeSettled) n.format.reprobeInconclusive();
  }
}

/**
 * A `json_schema` refusal (`refused`, with its signature and message) that may be about the schema, probed
 * as `json_object`: the answer the attempt ends with, and the replica switched on evidence.
 */
async function probe(
  n: Negotiation,
  refused: HttpReply,
  refusal: 'named' | 'suspect',
  signature: string,
  message: string,
): Promise<HttpReply> {
  const probed = await n.send('json_object');
  if (!isOk(probed.status)) {
    // json_object refused too (a 4xx): the error was not about the schema; not probed again. A
    // 5xx or 429 says nothing either way.
    if (probed.status < 500 && probed.status !== 429 && n.probeFailed.size < MAX_PROBE_MEMO) {
      n.probeFailed.add(signature);
    }
    return probed;
  }
  if (refusal === 'named') {
    n.format.refused(
      `json_schema refused with HTTP ${refused.status} naming the schema (${message}); json_object accepted`,
      refused.status,
    );
    return probed;
  }
  // The server answers json_object: is json_schema refused again, the same way?
  const again = await n.send('json_schema');
  if (isOk(again.status)) return again;
  if (errorSignature(again.status, readWireError(again.text)) === signature) {
    n.format.refused(
      `json_schema refused twice with HTTP ${refused.status} (${message}); json_object accepted in between`,
      refused.status,
    );
  }
  return probed;
}
