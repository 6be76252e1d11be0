/**
 * The identity of a judgment or comparative unit for coalescing and caching (the in-process LRU, the shared
 * Redis tier, idempotency digests, resumable ablation records): the one key function, so that a verdict is
 * replayed only for the same judgment. It takes everything that can change the outcome:
 *
 * - what is asked: the graph hash (or the comparative unit's kind, judges and criterion) and the prompt
 *   version (PROMPT_VERSION / COMPARATIVE_PROMPT_VERSION);
 * - who answers: every LLM node's route (backend, model, temperature, top_p, max_tokens, reasoning effort,
 *   the backend's extra body);
 * - what is judged: the prepared texts, and the settings of their preparation — the preparation rules'
 *   version (PREPARATION_VERSION), REASONING_FORMAT (and REASONING_MARKERS) and MIN/MAX_CANDIDATE_CHARS
 *   (`KeySettings`): with other settings the same raw rollout may be rejected, or judged on another answer.
 *
 * - which outcome the input's preparation had (`KeyForm`): a judged candidate is keyed by its prepared text, a
 *   rejected one by its text as sent with the reason, each in its own namespace, so a rejected text and a
 *   judged one never share a key whatever their texts (issue 38 item 1); an ablation keys the raw input.
 *
 * Which configuration variables are in the key, and why each other one is not, is decided variable by
 * variable in `src/server/serving/key-settings.ts` (a test fails on a variable without a decision). Texts are
 * length-prefixed, so no two inputs collide by concatenation.
 */
import { createHash } from 'node:crypto';

import { COMPARATIVE_PROMPT_VERSION, comparison, PROMPT_VERSION } from '../roles/index.js';
import { PREPARATION_VERSION, reasoningKey, type ReasoningFormat } from './candidate.js';
import { comparisonNodeId, type PairInput, type PickInput, type RatingInput } from './compare.js';
import { DEFAULT_CANDIDATE_LIMITS, type CandidateLimits, type RejectionReason } from './degenerate.js';
import { allNodes, type CompiledGraph } from './graph.js';
import type { JudgmentInput, Router } from './types.js';

/** The settings outside graph and routes that change what is judged (how a candidate is prepared). */
export interface KeySettings {
  /** REASONING_FORMAT (with REASONING_MARKERS' pairs): where the answer after a reasoning trace starts. */
  reasoningFormat: ReasoningFormat;
  /** MIN_CANDIDATE_CHARS / MAX_CANDIDATE_CHARS: what is too short or too long to judge. */
  limits: CandidateLimits;
}

/** The key settings of a preparation's options, with the same defaults `prepareCandidate` applies. */
export function keySettingsOf(options: {
  reasoningFormat?: ReasoningFormat | undefined;
  limits?: CandidateLimits | undefined;
}): KeySettings {
  return {
    reasoningFormat: options.reasoningFormat ?? 'auto',
    limits: options.limits ?? DEFAULT_CANDIDATE_LIMITS,
  };
}

/** A comparative unit as it is keyed (pairs in canonical order: `canonicalPair`). */
export type ComparativeUnit =
  | { kind: 'pair'; input: PairInput; judges: number }
  | { kind: 'pick'; input: PickInput }
  | { kind: 'rating'; input: RatingInput };

function settingsPart(settings: KeySettings): string {
  const { minChars, maxChars } = settings.limits;
  return `|prep=${PREPARATION_VERSION}/${reasoningKey(settings.reasoningFormat)}/${minChars}/${maxChars}`;
}

function routePart(router: Router, node: { id: string; role: string }): string {
  const r = router.route(node);
  const head = `|${node.id}=${r.backend.name}/${r.model}/${r.temperature ?? ''}/${r.topP ?? ''}/${r.maxTokens ?? ''}`;
  // Appended only when set, so the keys of routes without them are what they were.
  if (r.reasoningEffort === undefined && r.backendRequest === undefined) return head;
  const b = r.backendRequest;
  return `${head}/effort=${r.reasoningEffort ?? ''}/${b?.reasoningEffort ?? ''}/extra=${b?.extraBody?.length ?? ''}:${b?.extraBody ?? ''}`;
}

function digest(head: string, texts: ReadonlyArray<string | null>): string {
  const h = createHash('sha256');
  h.update(head);
  for (const text of texts) {
    if (text === null) {
      h.update('|none');
      continue;
    }
    h.update(`|${text.length}:`);
    h.update(text);
  }
  return h.digest('hex');
}

/** Routes are fixed for a router's life, so the key's graph-and-routes part is built once per pair. */
const prefixes = new WeakMap<Router, WeakMap<CompiledGraph, string>>();

function routePrefix(graph: CompiledGraph, router: Router): string {
  let byGraph = prefixes.get(router);
  if (byGraph === undefined) {
    byGraph = new WeakMap();
    prefixes.set(router, byGraph);
  }
  let prefix = byGraph.get(graph);
  if (prefix === undefined) {
    prefix = graph.hash + PROMPT_VERSION;
    for (const r of allNodes(graph)) if (r.role.kind === 'llm') prefix += routePart(router, r.node);
    byGraph.set(graph, prefix);
  }
  return prefix;
}

/**
 * The key space of an input: `judged` (prepared and passed: its prepared text), `rejected:<reason>`
 * (rejected unjudged: its text as sent), `raw` (not prepared yet: an ablation's record of a dataset row).
 */
export type KeyForm = 'judged' | 'raw' | `rejected:${RejectionReason}`;

/** The key space of a preparation's outcome. */
export const keyFormOf = (rejection: RejectionReason | undefined): KeyForm =>
  rejection === undefined ? 'judged' : `rejected:${rejection}`;

/** The key of one judgment (the input as prepared: `prepareInput`, in the key space of its outcome). */
export function judgmentKey(
  graph: CompiledGraph,
  input: JudgmentInput,
  router: Router,
  settings: KeySettings,
  form: KeyForm = 'judged',
): string {
  return digest(`${routePrefix(graph, router)}${settingsPart(settings)}|form=${form}`, [
    input.question,
    input.candidate,
    input.groundTruth,
  ]);
}

/**
 * The key of one comparative unit: kind, comparative prompt version, criterion, every judge's route, the
 * preparation settings, the ground truth (or none), the question and the candidates.
 */
export function comparativeKey(router: Router, unit: ComparativeUnit, settings: KeySettings): string {
  const nodes =
    unit.kind === 'pair'
      ? Array.from({ length: unit.judges }, (_, k) => ({
          id: comparisonNodeId(k + 1),
          role: comparison.name,
        }))
      : [{ id: unit.kind, role: unit.kind }];
  let head = `${unit.kind}|${COMPARATIVE_PROMPT_VERSION}|${unit.input.criterion}`;
  for (const node of nodes) head += routePart(router, node);
  const texts =
    unit.kind === 'pair'
      ? [unit.input.a, unit.input.b]
      : unit.kind === 'pick'
        ? unit.input.candidates
        : [unit.input.idea];
  return digest(head + settingsPart(settings), [unit.input.groundTruth, unit.input.question, ...texts]);
}
