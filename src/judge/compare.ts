/**
 * Comparative judging, one unit at a time, with the failure semantics of `runJudgment`: a per-unit deadline
 * (`timeout`), the caller's abort signal, the backend's retries, one re-ask on invalid output, and failures
 * as values (`judge_error` / `timeout` with a null result — never a loss, never a 0).
 *
 * - `comparePair`: one pair, asked in both orders (A,B) and (B,A), by `judges` independent judges each. Each
 *   order's answer is the judges' plurality (a split is a tie). Orders that disagree are a position-bias
 *   event, and the pair is a tie. 2 × judges LLM calls.
 * - `rateIdea`: one idea, an integer 1–5 on one criterion (1 LLM call).
 * - `pickBest`: N ideas in one prompt, the best one named (1 LLM call).
 * Degenerate candidates (empty, fillers, too short or long) are decided without any LLM call: one loses to
 * any real idea, two tie, a rating is 1, and a pick never chooses one.
 */
import { performance } from 'node:perf_hooks';

import type { z } from 'zod';

import { RewardError, type ErrorCode } from '../errors.js';
import { COMPARATIVE_PROMPT_VERSION, comparison, pick, rating } from '../roles/index.js';
import type {
  ComparativeContext,
  ComparativeRole,
  Criterion,
  PickContext,
  RatingContext,
} from '../roles/types.js';
import { askStructured, type AskCost, type AskOptions, type AskResult } from './ask.js';
import { addKnown, deadlineScope } from './calls.js';
import { normalized } from '../text/normalize.js';
import { prepareCandidate, type PreparedCandidate, type ReasoningFormat } from './candidate.js';
import type { CandidateLimits } from './degenerate.js';
import type { Flow } from './fair-queue.js';
import { nextNonce } from './nonce.js';
import type { JudgeObserver, Router, Usage } from './types.js';

/** Parallel judges of one order sample at this temperature with distinct seeds (a single judge at 0). */
export const MULTI_JUDGE_TEMPERATURE = 0.7;
/** Most independent judges per order a request may ask for. */
export const MAX_JUDGES = 5;

export type UnitStatus = 'ok' | 'rejected_input' | 'judge_error' | 'timeout';

export interface ComparativeOptions {
  router: Router;
  /**
   * Absolute deadline, epoch ms: unfinished units end `timeout`. Read again whenever it is needed (a getter
   * may move it later: a request joined the flight), never copied.
   */
  readonly deadline: number;
  signal?: AbortSignal | undefined;
  observer?: JudgeObserver | undefined;
  limits?: CandidateLimits | undefined;
  /** How a candidate's reasoning trace is found (REASONING_FORMAT; default `auto`). */
  reasoningFormat?: ReasoningFormat | undefined;
  /** Fence nonce; random per unit unless a test pins it. */
  nonce?: string | undefined;
  /** High priority (the serving priority lane): its calls take a free backend slot first. */
  urgent?: boolean | undefined;
  /** The tenant's fair-queue flow for backend slots (fair-queue.ts). */
  flow?: Flow | undefined;
  /**
   * The caller's own preparation of the texts it sends (serving prepares them to key them): what
   * `prepareCandidate` gave for a text with these options and this input's question, or undefined for a
   * text it did not prepare. A known text is not prepared again (idempotent, so the outcome is the same).
   */
  preparedText?: ((text: string) => PreparedCandidate | undefined) | undefined;
}

interface Shared {
  question: string;
  /** Null: judge on the criterion alone. */
  groundTruth: string | null;
  criterion: Criterion;
}

export interface PairInput extends Shared {
  a: string;
  b: string;
}

/** Which candidate of a pair is better: `a`, `b`, or a tie. */
export type Preference = 'a' | 'b' | 'tie';

/** One judge's answer in one order, mapped back to the candidates, with what its ask cost. */
export interface OrderVote extends AskCost {
  /** `ab`: a shown as A; `ba`: b shown as A. */
  order: 'ab' | 'ba';
  judge: number;
  nodeId: string;
  /** As answered, in the shown positions; null when the call failed. */
  winner: 'A' | 'B' | 'tie' | null;
  preference: Preference | null;
  margin: string | null;
  confidence: number | null;
  reasoning: string | null;
  error?: { code: ErrorCode; message: string } | undefined;
}

interface UnitBase {
  status: UnitStatus;
  reason?: string | undefined;
  error?: { code: ErrorCode; message: string } | undefined;
  usage: Usage;
  latencyMs: number;
  promptVersion: string;
}

export interface PairJudgment extends UnitBase {
  /** The pair's result; null exactly when the comparison failed. */
  preference: Preference | null;
  /** Each order's plurality, mapped to the candidates (null when that order failed or was not asked). */
  orders: { ab: Preference | null; ba: Preference | null };
  /** The two orders disagreed (the pair counts as a tie). */
  positionBias: boolean;
  votes: OrderVote[];
}

export interface RatingInput extends Shared {
  idea: string;
}

export interface RatingJudgment extends UnitBase {
  /** 1–5; null exactly on failure. */
  score: number | null;
  reasoning: string | null;
}

export interface PickInput extends Shared {
  candidates: readonly string[];
}

export interface PickJudgment extends UnitBase {
  /** 0-based index into the input candidates; null on failure or when every candidate is degenerate. */
  best: number | null;
  confidence: number | null;
  reasoning: string | null;
}

/** The question and ground truth through the normaliser (src/text/normalize.ts), as judgments get them. */
export function normalizeShared<T extends { question: string; groundTruth: string | null }>(input: T): T {
  return {
    ...input,
    question: normalized(input.question),
    groundTruth: input.groundTruth === null ? null : normalized(input.groundTruth),
  };
}

/** One candidate as a comparison judges it (src/judge/candidate.ts): its prepared text, or why it is not an idea. */
function prepared(text: string, question: string, options: ComparativeOptions): PreparedCandidate {
  return (
    options.preparedText?.(text) ??
    prepareCandidate(text, {
      reasoningFormat: options.reasoningFormat,
      limits: options.limits,
      question,
    })
  );
}

const noUsage = (): Usage => ({ calls: 0, promptTokens: 0, completionTokens: 0, cachedPromptTokens: 0 });

/** The status and error of a unit whose calls failed. */
function failureOf(
  failed: { code: ErrorCode; message: string },
  scope: { timedOut: () => boolean },
  options: ComparativeOptions,
): Pick<UnitBase, 'status' | 'error' | 'reason'> {
  const timedOut = scope.timedOut() || Date.now() >= options.deadline;
  if (timedOut && (failed.code === 'RW_JUDGE_TIMEOUT' || failed.code === 'RW_CALL_CANCELLED')) {
    return {
      status: 'timeout',
      error: { code: 'RW_JUDGE_TIMEOUT', message: 'request deadline reached before the comparison finished' },
      reason: 'deadline',
    };
  }
  if (options.signal?.aborted === true) {
    // The caller's own reason (e.g. shutdown) when it gave one, else the caller left.
    const reason: unknown = options.signal.reason;
    const code = reason instanceof RewardError ? reason.code : 'RW_CLIENT_ABORTED';
    return { status: 'judge_error', error: { code, message: 'aborted by the caller' }, reason: 'aborted' };
  }
  return { status: 'judge_error', error: failed, reason: failed.message };
}

/**
 * A unit's calls' options: its scope's signal, and its deadline read through `options` at every call (serving
 * moves a comparison flight's deadline later when a request joins it; a spread would freeze it).
 */
function askOptions(signal: AbortSignal, options: ComparativeOptions): AskOptions {
  return {
    signal,
    get deadline() {
      return options.deadline;
    },
    observer: options.observer,
    urgent: options.urgent,
    flow: options.flow,
  };
}

/** Adds one ask's (or one vote's) cost to a unit's usage. */
function addCost(
  usage: Usage,
  r: Pick<AskCost, 'calls' | 'promptTokens' | 'completionTokens' | 'cachedPromptTokens'> &
    Partial<Pick<AskCost, 'reasoningTokens' | 'reasoningTokensEstimated'>>,
): void {
  usage.calls += r.calls;
  usage.promptTokens += r.promptTokens;
  usage.completionTokens += r.completionTokens;
  usage.cachedPromptTokens = addKnown(usage.cachedPromptTokens, r.cachedPromptTokens);
  // Only for a judge that reasons, so the usage of others stays as it was.
  if ((r.reasoningTokens ?? 0) > 0)
    usage.reasoningTokens = (usage.reasoningTokens ?? 0) + (r.reasoningTokens ?? 0);
  if (r.reasoningTokensEstimated === true) usage.reasoningTokensEstimated = true;
}

/**
 * The one call of a single-call unit (a rating, a pick) in its own scope, routed by the role's name at
 * temperature 0: the call's usage, and its value or the unit's failure.
 */
async function askAlone<T, C extends RatingContext | PickContext>(
  role: ComparativeRole<z.ZodType<T>, C>,
  context: C,
  options: ComparativeOptions,
  check?: (value: T) => string | null,
): Promise<
  | { usage: Usage; value: T; failure?: undefined }
  | { usage: Usage; value?: undefined; failure: Pick<UnitBase, 'status' | 'error' | 'reason'> }
> {
  const scope = deadlineScope(options, 'unit ended');
  try {
    const r = await askStructured(
      {
        role: role.name,
        nodeId: role.name,
        route: options.router.route({ id: role.name, role: role.name }),
        prompt: role.render(context),
        schema: role.output,
        jsonSchema: role.jsonSchema,
        context,
        temperature: 0,
        check,
      },
      askOptions(scope.signal, options),
    );
    const usage = noUsage();
    addCost(usage, r);
    return r.ok ? { usage, value: r.value } : { usage, failure: failureOf(r.error, scope, options) };
  } finally {
    scope.end();
  }
}

/** Plurality of one order's votes; a split (or no vote) is a tie. */
export function plurality(prefs: readonly Preference[]): Preference {
  const counts = { a: 0, b: 0, tie: 0 };
  for (const p of prefs) counts[p] += 1;
  if (counts.a > counts.b && counts.a > counts.tie) return 'a';
  if (counts.b > counts.a && counts.b > counts.tie) return 'b';
  return 'tie';
}

/** Routing node id of judge `j` (1-based): the routing file may send `comparison_2` to another model. */
export function comparisonNodeId(judge: number): string {
  return `comparison_${judge}`;
}

/** A pair decided without an LLM call: a degenerate idea (a real loss), or a deadline already past. */
function decidedWithoutCall(
  pa: PreparedCandidate,
  pb: PreparedCandidate,
  options: ComparativeOptions,
  started: number,
): PairJudgment | undefined {
  const base = { usage: noUsage(), promptVersion: COMPARATIVE_PROMPT_VERSION, votes: [] };
  if (pa.rejection !== undefined || pb.rejection !== undefined) {
    // A degenerate idea is a real loss (a real 0 elsewhere), decided without an LLM call.
    const okA = pa.rejection === undefined;
    const okB = pb.rejection === undefined;
    const preference: Preference = !okA && !okB ? 'tie' : okA ? 'a' : 'b';
    const reasons = [okA ? null : `a: ${pa.rejection}`, okB ? null : `b: ${pb.rejection}`];
    return {
      ...base,
      status: 'rejected_input',
      preference,
      orders: { ab: preference, ba: preference },
      positionBias: false,
      reason: reasons.filter((r) => r !== null).join(', '),
      latencyMs: performance.now() - started,
    };
  }
  if (options.deadline <= Date.now()) {
    return {
      ...base,
      status: 'timeout',
      preference: null,
      orders: { ab: null, ba: null },
      positionBias: false,
      reason: 'deadline',
      error: { code: 'RW_JUDGE_TIMEOUT', message: 'request deadline reached before start' },
      latencyMs: performance.now() - started,
    };
  }
  return undefined;
}

/**
 * Every judge's call in both orders, concurrently, in `scope`. The first call to fail (in time) ends the
 * scope, so its siblings' calls and retries are cancelled, and is returned as `firstFailure`.
 */
async function askBothOrders(
  input: PairInput,
  judges: number,
  nonce: string,
  scope: ReturnType<typeof deadlineScope>,
  options: ComparativeOptions,
): Promise<{ votes: OrderVote[]; firstFailure: { code: ErrorCode; message: string } | undefined }> {
  const asks: Array<Promise<OrderVote>> = [];
  let firstFailure: { code: ErrorCode; message: string } | undefined;
  for (const order of ['ab', 'ba'] as const) {
    const context: ComparativeContext = {
      kind: 'pair',
      question: input.question,
      groundTruth: input.groundTruth,
      criterion: input.criterion,
      nonce,
      a: order === 'ab' ? input.a : input.b,
      b: order === 'ab' ? input.b : input.a,
    };
    const prompt = comparison.render(context);
    for (let judge = 1; judge <= judges; judge++) {
      const nodeId = comparisonNodeId(judge);
      const route = options.router.route({ id: nodeId, role: comparison.name });
      asks.push(
        askStructured(
          {
            role: comparison.name,
            nodeId,
            route,
            prompt,
            schema: comparison.output,
            jsonSchema: comparison.jsonSchema,
            context,
            temperature: judges > 1 ? MULTI_JUDGE_TEMPERATURE : 0,
            seed: judge,
          },
          askOptions(scope.signal, options),
        ).then((r) => {
          // A failed call ends the pair now: its siblings' calls (and retries) are cancelled.
          if (!r.ok) {
            firstFailure ??= r.error;
            scope.end();
          }
          return toVote(order, judge, nodeId, r);
        }),
      );
    }
  }
  const votes = await Promise.all(asks);
  return { votes, firstFailure };
}

/**
 * Compares two candidates in both orders. `judges` (1–MAX_JUDGES, default 1) independent judges per order;
 * with more than one they sample at MULTI_JUDGE_TEMPERATURE with seeds 1..judges. Any failed call fails the
 * pair (its result is null, counted as a failed comparison by the caller, never a loss).
 */
export async function comparePair(
  rawInput: PairInput,
  options: ComparativeOptions & { judges?: number | undefined },
): Promise<PairJudgment> {
  const started = performance.now();
  const judges = Math.min(MAX_JUDGES, Math.max(1, Math.trunc(options.judges ?? 1)));
  const shared = normalizeShared(rawInput);
  const pa = prepared(rawInput.a, shared.question, options);
  const pb = prepared(rawInput.b, shared.question, options);
  const decided = decidedWithoutCall(pa, pb, options, started);
  if (decided !== undefined) return decided;
  const input: PairInput = { ...shared, a: pa.candidate, b: pb.candidate };
  const base = { promptVersion: COMPARATIVE_PROMPT_VERSION };
  const scope = deadlineScope(options, 'unit ended');
  try {
    const { votes, firstFailure } = await askBothOrders(
      input,
      judges,
      options.nonce ?? nextNonce(),
      scope,
      options,
    );
    const usage = noUsage();
    for (const v of votes) addCost(usage, v);
    if (firstFailure !== undefined) {
      return {
        ...base,
        ...failureOf(firstFailure, scope, options),
        usage,
        votes,
        preference: null,
        orders: { ab: null, ba: null },
        positionBias: false,
        latencyMs: performance.now() - started,
      };
    }
    const orderResult = (order: 'ab' | 'ba'): Preference =>
      plurality(votes.filter((v) => v.order === order).map((v) => v.preference ?? 'tie'));
    const ab = orderResult('ab');
    const ba = orderResult('ba');
    return {
      ...base,
      status: 'ok',
      usage,
      votes,
      preference: ab === ba ? ab : 'tie',
      orders: { ab, ba },
      positionBias: ab !== ba,
      latencyMs: performance.now() - started,
    };
  } finally {
    scope.end();
  }
}

function toVote(
  order: 'ab' | 'ba',
  judge: number,
  nodeId: string,
  r: AskResult<{ reasoning: string; winner: 'A' | 'B' | 'tie'; margin: string; confidence: number }>,
): OrderVote {
  const cost = {
    order,
    judge,
    nodeId,
    model: r.model,
    calls: r.calls,
    attempts: r.attempts,
    reasks: r.reasks,
    promptTokens: r.promptTokens,
    completionTokens: r.completionTokens,
    cachedPromptTokens: r.cachedPromptTokens,
    latencyMs: r.latencyMs,
    ...(r.reasoningTokens === undefined
      ? {}
      : { reasoningTokens: r.reasoningTokens, reasoningTokensEstimated: r.reasoningTokensEstimated }),
  };
  if (!r.ok) {
    return {
      ...cost,
      winner: null,
      preference: null,
      margin: null,
      confidence: null,
      reasoning: null,
      error: r.error,
    };
  }
  const shown = r.value.winner;
  // In order `ba`, position A holds candidate b.
  const preference: Preference = shown === 'tie' ? 'tie' : (shown === 'A') === (order === 'ab') ? 'a' : 'b';
  return {
    ...cost,
    winner: shown,
    preference,
    margin: r.value.margin,
    confidence: r.value.confidence,
    reasoning: r.value.reasoning,
  };
}

/** Rates one idea 1–5 on a criterion (one LLM call; a degenerate idea is a 1 without a call). */
export async function rateIdea(rawInput: RatingInput, options: ComparativeOptions): Promise<RatingJudgment> {
  const started = performance.now();
  const shared = normalizeShared(rawInput);
  const check = prepared(rawInput.idea, shared.question, options);
  const input: RatingInput = { ...shared, idea: check.candidate };
  const base = { usage: noUsage(), promptVersion: COMPARATIVE_PROMPT_VERSION };
  if (check.rejection !== undefined) {
    return {
      ...base,
      status: 'rejected_input',
      score: 1,
      reasoning: null,
      reason: check.rejection,
      latencyMs: 0,
    };
  }
  const context: RatingContext = {
    kind: 'rating',
    question: input.question,
    groundTruth: input.groundTruth,
    criterion: input.criterion,
    nonce: options.nonce ?? nextNonce(),
    idea: input.idea,
  };
  const r = await askAlone(rating, context, options);
  const latencyMs = performance.now() - started;
  if (r.failure !== undefined) {
    return { ...base, ...r.failure, usage: r.usage, score: null, reasoning: null, latencyMs };
  }
  return {
    ...base,
    status: 'ok',
    usage: r.usage,
    score: r.value.score,
    reasoning: r.value.reasoning,
    latencyMs,
  };
}

/**
 * Names the best of N ideas in one call. Degenerate ideas are left out of the prompt (and can never be
 * picked); with every idea degenerate, `best` is null and the status `rejected_input`.
 */
export async function pickBest(rawInput: PickInput, options: ComparativeOptions): Promise<PickJudgment> {
  const started = performance.now();
  const shared = normalizeShared(rawInput);
  const shown: number[] = [];
  const texts = rawInput.candidates.map((c, i) => {
    const p = prepared(c, shared.question, options);
    if (p.rejection === undefined) shown.push(i);
    return p.candidate;
  });
  const input: PickInput = { ...shared, candidates: texts };
  const base = {
    usage: noUsage(),
    promptVersion: COMPARATIVE_PROMPT_VERSION,
    reasoning: null,
    confidence: null,
  };
  if (shown.length === 0) {
    return {
      ...base,
      status: 'rejected_input',
      best: null,
      reason: 'every candidate is degenerate',
      latencyMs: 0,
    };
  }
  if (shown.length === 1) {
    return { ...base, status: 'ok', best: shown[0] ?? null, reason: 'only one real candidate', latencyMs: 0 };
  }
  const context: PickContext = {
    kind: 'pick',
    question: input.question,
    groundTruth: input.groundTruth,
    criterion: input.criterion,
    nonce: options.nonce ?? nextNonce(),
    candidates: shown.map((i) => input.candidates[i] ?? ''),
  };
  const r = await askAlone(pick, context, options, (v) =>
    v.best <= shown.length ? null : `best: must be a candidate number from 1 to ${shown.length}`,
  );
  const latencyMs = performance.now() - started;
  if (r.failure !== undefined) return { ...base, ...r.failure, usage: r.usage, best: null, latencyMs };
  return {
    ...base,
    status: 'ok',
    usage: r.usage,
    best: shown[r.value.best - 1] ?? null,
    confidence: r.value.confidence,
    reasoning: r.value.reasoning,
    latencyMs,
  };
}

const flip = (p: Preference | null): Preference | null => (p === 'a' ? 'b' : p === 'b' ? 'a' : p);

/**
 * The same judgment seen with its candidates swapped: the pair (b, a) judged as (a, b). Both orders were asked
 * either way, so a comparison can be computed once for a canonical order and mirrored for the other.
 */
export function mirrorPair(j: PairJudgment): PairJudgment {
  return {
    ...j,
    preference: flip(j.preference),
    orders: { ab: flip(j.orders.ba), ba: flip(j.orders.ab) },
    votes: j.votes.map((v) => ({
      ...v,
      order: v.order === 'ab' ? 'ba' : 'ab',
      preference: flip(v.preference),
    })),
  };
}

/** The pair in canonical order (a ≤ b by code units) and whether it had to be swapped. */
export function canonicalPair(input: PairInput): { input: PairInput; swapped: boolean } {
  return input.a <= input.b
    ? { input, swapped: false }
    : { input: { ...input, a: input.b, b: input.a }, swapped: true };
}
