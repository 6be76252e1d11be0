/**
 * Completion budgets learned per (backend, role, reasoning effort): a reasoning judge's trace length depends
 * on the model, the role's task and the effort, and a fixed default is either cut often (a re-ask per cut
 * reply) or far too large. Each key keeps its last LENGTH_WINDOW completion lengths; its budget is
 * max(default, q99 × LEARNED_MARGIN), bounded by MAX_RAISED_TOKENS, once it has MIN_LENGTH_SAMPLES. A reply
 * cut at its budget counts as that budget (a lower bound of its length): when more than 1 % of replies are
 * cut, the q99 is the budget itself and the next budget is LEARNED_MARGIN × larger, until cuts are rare.
 * Learned budgets apply only where no max_tokens is configured (routing file or graph node), and never
 * change what a completed reply says, so they are not part of the judgment key.
 */
import type { ReasoningEffort } from '../settings/routing-file.js';
import { MAX_RAISED_TOKENS } from './budgets.js';

/** Completion lengths remembered per key (the most recent ones). */
export const LENGTH_WINDOW = 256;
/** Lengths needed before the learned quantile is trusted over the default. */
export const MIN_LENGTH_SAMPLES = 16;
/** The quantile of completion lengths a budget must cover. */
export const LENGTH_QUANTILE = 0.99;
/** Headroom over that quantile. */
export const LEARNED_MARGIN = 1.25;

interface Lengths {
  ring: number[];
  next: number;
  /** The budget the quantile implies, recomputed when stale (undefined). */
  quantile: number | undefined;
}

/** Per backend (the object, so a backend's lengths go with it), then per `role\0effort`. */
const byBackend = new WeakMap<object, Map<string, Lengths>>();

const keyOf = (role: string, effort: ReasoningEffort | undefined): string => `${role}\0${effort ?? ''}`;

function lengthsOf(backend: object, key: string): Lengths {
  let roles = byBackend.get(backend);
  if (roles === undefined) {
    roles = new Map();
    byBackend.set(backend, roles);
  }
  let lengths = roles.get(key);
  if (lengths === undefined) {
    lengths = { ring: [], next: 0, quantile: undefined };
    roles.set(key, lengths);
  }
  return lengths;
}

/** One completed call's `completion_tokens` (trace and answer; a cut reply: its budget). Ignores ≤ 0. */
export function observeCompletion(
  backend: object,
  role: string,
  effort: ReasoningEffort | undefined,
  completionTokens: number,
): void {
  if (!Number.isFinite(completionTokens) || completionTokens <= 0) return;
  const lengths = lengthsOf(backend, keyOf(role, effort));
  if (lengths.ring.length < LENGTH_WINDOW) lengths.ring.push(completionTokens);
  else lengths.ring[lengths.next] = completionTokens;
  lengths.next = (lengths.next + 1) % LENGTH_WINDOW;
  lengths.quantile = undefined;
}

/** The quantile of a window's lengths (nearest rank). */
function quantileOf(ring: readonly number[]): number {
  const sorted = [...ring].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(LENGTH_QUANTILE * sorted.length) - 1)] ?? 0;
}

/**
 * The budget of the next call of (backend, role, effort): `defaultTokens` until MIN_LENGTH_SAMPLES lengths
 * are known, then max(defaultTokens, ⌈q99 × LEARNED_MARGIN⌉), at most MAX_RAISED_TOKENS (never below
 * `defaultTokens`).
 */
export function learnedBudget(
  backend: object,
  role: string,
  effort: ReasoningEffort | undefined,
  defaultTokens: number,
): number {
  const lengths = byBackend.get(backend)?.get(keyOf(role, effort));
  if (lengths === undefined || lengths.ring.length < MIN_LENGTH_SAMPLES) return defaultTokens;
  lengths.quantile ??= Math.ceil(quantileOf(lengths.ring) * LEARNED_MARGIN);
  return Math.max(defaultTokens, Math.min(lengths.quantile, MAX_RAISED_TOKENS));
}
