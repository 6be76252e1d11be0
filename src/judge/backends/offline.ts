import { performance } from 'node:perf_hooks';

import { RewardError } from '../../errors.js';
import { getComparativeSchema, getRole, isComparativeContext } from '../../roles/index.js';
import {
  marginConfidence,
  matchProbability,
  methodSimilarity,
  round4,
  SIMILARITY_THRESHOLDS,
  stem,
  termSet,
  termVector,
  cosine,
  topTerms,
  type TermWeighting,
} from '../../text/similarity.js';
import type { Focus, RoleContext, Verdict, VisibleMessage } from '../../roles/types.js';
import { matchProbability as stanceMatchProbability } from '../decision.js';
import type { Backend, CallOptions, LlmReply, LlmRequest } from '../types.js';
import { offlineComparativeAnswer } from './offline-compare.js';

/**
 * The embedded `offline` backend: a deterministic, in-process heuristic that answers every role's schema
 * from term overlap. It exists so the whole flow runs with no LLM; it is not a real judge.
 *
 * Decision rule (measured on ../shared/datasets dev, see test/judge/backends/offline.test.ts): similarity = cosine
 * of sublinear-tf vectors of stemmed content words (stopwords and generic academic words removed) between
 * candidate and ground truth; a stance is `match` iff similarity ≥ threshold, threshold 0.32 for the
 * default `methodology` weighting (0.25 `statistics`, 0.27 `novelty` for reviewers of that focus).
 * The Critic adds CRITIC_STRICTNESS; members with a seed move the threshold by ±SEED_JITTER (deterministic
 * in the seed); confidence = logistic(15·|similarity − threshold|). The Evaluator averages its own
 * P(match) = logistic(15·margin) with the visible stances (each as P(match) = confidence or 1 − confidence)
 * and says `match` iff the average ≥ 0.5.
 */

export const OFFLINE_MODEL = 'offline';
/** How much stricter the Critic is than the other roles (added to the threshold). */
export const CRITIC_STRICTNESS = 0.03;
/** Largest seed-dependent threshold shift, so parallel members with different seeds are not identical. */
export const SEED_JITTER = 0.02;

const COMPONENTS = 6;

/** Deterministic seed → [-1, 1) (a 32-bit integer hash; no state). */
function seedUnit(seed: number): number {
  let x = Math.trunc(seed) >>> 0;
  x = Math.imul(x ^ (x >>> 16), 0x7feb352d) >>> 0;
  x = Math.imul(x ^ (x >>> 15), 0x846ca68b) >>> 0;
  x = (x ^ (x >>> 16)) >>> 0;
  return (x / 0x1_0000_0000) * 2 - 1;
}

interface Assessment {
  weighting: TermWeighting;
  similarity: number;
  threshold: number;
  stance: Verdict;
  /** Confidence in the stance, [0.5, 1). */
  confidence: number;
  /** P(match) from the margin, (0, 1). */
  pMatch: number;
  shared: string[];
}

function assess(ctx: RoleContext, focus: Focus | undefined, shift: number): Assessment {
  const weighting: TermWeighting = focus ?? 'methodology';
  const similarity = round4(methodSimilarity(ctx, weighting));
  const threshold = round4(SIMILARITY_THRESHOLDS[weighting] + shift);
  const margin = similarity - threshold;
  const gtTerms = termSet(ctx.groundTruth);
  const shared = topTerms(ctx.candidate, 64)
    .filter((word) => gtTerms.has(stem(word)))
    .slice(0, COMPONENTS);
  return {
    weighting,
    similarity,
    threshold,
    stance: margin >= 0 ? 'match' : 'no_match',
    confidence: round4(marginConfidence(margin)),
    pMatch: matchProbability(margin),
    shared,
  };
}

function explain(a: Assessment, who: string): string {
  return (
    `Offline heuristic ${who} (not an LLM): ${a.weighting} term cosine ${a.similarity.toFixed(4)} ` +
    `vs threshold ${a.threshold.toFixed(4)} → ${a.stance}. ` +
    `Shared terms: ${a.shared.length > 0 ? a.shared.join(', ') : 'none'}.`
  );
}

function missingTerms(ctx: RoleContext): string[] {
  return topTerms(ctx.groundTruth, COMPONENTS, termSet(ctx.candidate));
}

/** The ground-truth sentence closest to the whole ground truth: a stand-in for its core method. */
function coreSentence(groundTruth: string): string {
  const whole = termVector(groundTruth);
  let best = '';
  let bestScore = -1;
  for (const sentence of groundTruth.split(/(?<=[.!?])\s+/)) {
    const score = cosine(termVector(sentence), whole);
    if (score > bestScore) {
      best = sentence.trim();
      bestScore = score;
    }
  }
  return best.length > 400 ? `${best.slice(0, 399)}…` : best;
}

function stanceProbability(m: VisibleMessage): number | null {
  return m.stance === null ? null : stanceMatchProbability(m.stance, m.confidence ?? 0.75);
}

/** The role's answer as a plain object in schema field order (reasoning first). */
function answer(request: LlmRequest): Record<string, unknown> {
  const ctx = request.context;
  if (isComparativeContext(ctx)) return offlineComparativeAnswer(ctx);
  const focus = request.focus ?? ctx.node.focus;
  const jitter = request.seed === undefined ? 0 : SEED_JITTER * seedUnit(request.seed);
  switch (request.role) {
    case 'moderator':
      return moderatorAnswer(ctx);
    case 'analyst': {
      const a = assess(ctx, focus, jitter);
      return {
        reasoning: explain(a, 'analyst'),
        gt_components: topTerms(ctx.groundTruth, COMPONENTS),
        candidate_components: topTerms(ctx.candidate, COMPONENTS),
        stance: a.stance,
        confidence: a.confidence,
      };
    }
    case 'critic': {
      const a = assess(ctx, focus, CRITIC_STRICTNESS + jitter);
      return {
        reasoning: explain(a, 'critic'),
        objections: missingTerms(ctx).map(
          (t) => `The candidate does not mention "${t}", a key term of the ground truth.`,
        ),
        stance: a.stance,
        confidence: a.confidence,
      };
    }
    case 'reviewer': {
      const a = assess(ctx, focus, jitter);
      return { reasoning: explain(a, `${a.weighting} reviewer`), stance: a.stance, confidence: a.confidence };
    }
    case 'judge': {
      const a = assess(ctx, focus, jitter);
      return { reasoning: explain(a, 'judge'), verdict: a.stance, confidence: a.confidence };
    }
    case 'evaluator':
      return evaluatorAnswer(assess(ctx, focus, jitter), ctx.visible);
    default:
      return computedAnswer(request.role, ctx);
  }
}

/** The moderator's core method (the closest ground-truth sentence) and a checklist of its heaviest terms. */
function moderatorAnswer(ctx: RoleContext): Record<string, unknown> {
  const terms = topTerms(ctx.groundTruth, 5);
  const disputed = new Set(ctx.visible.map((m) => m.stance).filter((s) => s !== null)).size > 1;
  return {
    reasoning:
      `Offline heuristic moderator (not an LLM), round ${ctx.round}: the core method is taken to be the ` +
      `ground-truth sentence closest to the whole abstract; the checklist asks for its heaviest terms.` +
      (disputed ? ' The committee disagreed in the debate so far.' : ''),
    core_method: coreSentence(ctx.groundTruth),
    checklist: terms.map((t) => `Does the candidate use "${t}" the way the ground truth does?`),
  };
}

/** The evaluator's verdict: its own P(match) averaged with the visible stances' mean, if any. */
function evaluatorAnswer(a: Assessment, visible: readonly VisibleMessage[]): Record<string, unknown> {
  const votes = visible.map(stanceProbability).filter((p) => p !== null);
  const pCommittee = votes.length > 0 ? votes.reduce((s, p) => s + p, 0) / votes.length : null;
  const p = pCommittee === null ? a.pMatch : (a.pMatch + pCommittee) / 2;
  const verdict: Verdict = p >= 0.5 ? 'match' : 'no_match';
  return {
    reasoning:
      `${explain(a, 'evaluator')} Own P(match) ${a.pMatch.toFixed(4)}` +
      (pCommittee === null
        ? '; no committee stances visible.'
        : `; committee P(match) ${pCommittee.toFixed(4)} over ${votes.length} stance(s); average ${p.toFixed(4)}.`),
    verdict,
    confidence: round4(Math.max(p, 1 - p)),
  };
}

/** A role with no case of its own: a local role's computed output; any other is a bug, RW_INTERNAL. */
function computedAnswer(roleName: string, ctx: RoleContext): Record<string, unknown> {
  const role = getRole(roleName);
  if (role?.compute !== undefined) {
    const output: unknown = role.compute(ctx);
    if (typeof output === 'object' && output !== null) return { ...output };
  }
  // Every registered LLM role has a case in `answer`: reaching this is a bug, not a judge failure.
  throw new RewardError('RW_INTERNAL', `offline backend has no answer for role '${roleName}'`);
}

/** Longest stretch of offline work between two turns of the event loop, ms. */
export const OFFLINE_SLICE_MS = 10;
/** Most calls answered per slice: each answer's continuation (reply parsing, the next node's prompt) runs
 * as microtasks right after the slice, so this bounds that work too. */
export const OFFLINE_SLICE_CALLS = 8;

/**
 * Runs offline calls one after another in slices of at most OFFLINE_SLICE_MS, yielding to the event loop
 * between slices: a request with thousands of calls would otherwise run them back to back (as microtasks
 * or one long setImmediate phase) and starve every other socket, /healthz included.
 */
function createWorkQueue(): <T>(work: () => T) => Promise<T> {
  const pending: Array<(() => void) | undefined> = [];
  let head = 0;
  let scheduled = false;
  const drain = (): void => {
    const until = performance.now() + OFFLINE_SLICE_MS;
    const last = head + OFFLINE_SLICE_CALLS;
    while (head < pending.length && head < last && performance.now() < until) {
      const job = pending[head];
      pending[head] = undefined;
      head += 1;
      job?.();
    }
    if (head < pending.length) {
      setImmediate(drain);
      return;
    }
    pending.length = 0;
    head = 0;
    scheduled = false;
  };
  return (work) =>
    new Promise((resolve, reject) => {
      pending.push(() => {
        try {
          resolve(work());
        } catch (err) {
          reject(err instanceof Error ? err : new Error(String(err)));
        }
      });
      if (!scheduled) {
        scheduled = true;
        setImmediate(drain);
      }
    });
}

function estimateTokens(chars: number): number {
  return Math.ceil(chars / 4);
}

/**
 * Creates the offline backend. `complete` is deterministic in the request (same request → same text),
 * answers the role's schema (validated before returning), and rejects with the signal's reason if the call
 * was aborted before it started.
 */
export function createOfflineBackend(): Backend {
  const schedule = createWorkQueue();
  return {
    name: 'offline',
    async complete(request: LlmRequest, options: CallOptions): Promise<LlmReply> {
      options.signal.throwIfAborted();
      const started = performance.now();
      const value = await schedule(() => {
        options.signal.throwIfAborted();
        return answer(request);
      });
      const schema = getRole(request.role)?.output ?? getComparativeSchema(request.role);
      if (schema === undefined || !schema.safeParse(value).success) {
        throw new RewardError('RW_INTERNAL', `offline backend produced no valid '${request.role}' answer`);
      }
      const text = JSON.stringify(value);
      const promptChars = request.messages.reduce((n, m) => n + m.content.length, 0);
      return {
        text,
        model: OFFLINE_MODEL,
        promptTokens: estimateTokens(promptChars),
        completionTokens: estimateTokens(text.length),
        latencyMs: performance.now() - started,
        attempts: 1,
        finishReason: 'stop',
      };
    },
    ping: () => Promise.resolve(true),
    isSaturated: () => false,
  };
}
