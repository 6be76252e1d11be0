/**
 * A request's new judgments before admission (judge-service.ts): their shapes as admission counts them, and
 * the request decided whole — admitted at once, or held while the fleet's capacity is measured and tried
 * again.
 */
import type { RewardError } from '../../errors.js';
import type { CompiledGraph } from '../../judge/graph.js';
import {
  admitOrHold,
  admitWhole,
  type Admission,
  type AdmitOrHold,
  type Refusal,
  type RefusalReporting,
  type WorkShape,
} from '../admission/admission.js';
import type { HoldPlace } from '../admission/hold.js';
import type { SharedLookup } from './shared-judgments.js';
import type { JudgeItem, JudgedItem, JudgeRequest } from './judge-types.js';

/** What admission counts for an item: its graph, or nothing at all for a candidate rejected unjudged. */
export function shapeOf(item: JudgeItem): WorkShape {
  const graph = item.graph.graph;
  return item.prepared?.rejection === undefined ? graph : { ...pickShape(graph), rejected: true };
}

const pickShape = (g: CompiledGraph): WorkShape => ({
  hash: g.hash,
  llmCallsPerJudgment: g.llmCallsPerJudgment,
  criticalPathCalls: g.criticalPathCalls,
});

/** A signal that never aborts (a request without a disconnect signal). */
const NEVER = new AbortController().signal;

/** The shapes of the flights this request starts that no other process is computing (its new work). */
export function newWork(
  items: readonly JudgeItem[],
  starters: ReadonlyMap<string, number>,
  elsewhere: SharedLookup | undefined,
): WorkShape[] {
  const shapes: WorkShape[] = [];
  for (const [key, i] of starters) {
    const item = items[i];
    if (item !== undefined && elsewhere?.running.has(key) !== true) shapes.push(shapeOf(item));
  }
  return shapes;
}

/** One pass over a request: answered, or held before admission (`newJudgments`: what it would start). */
export type Once =
  { kind: 'done'; results: JudgedItem[] } | { kind: 'held'; place: HoldPlace; newJudgments: number };

/**
 * The request, decided whole: admitted at once, or held while the fleet's capacity is being measured
 * (admission.ts `hold`) and then tried again from the start by `once` (the cache and the flights may have
 * moved meanwhile; the admitted request's backlog is reserved for it until it admits its judgments).
 */
export async function judgeHolding(
  request: JudgeRequest,
  once: (request: JudgeRequest, admitted: HoldPlace | undefined, noHold?: boolean) => Promise<Once>,
  refuse: (refusal: Refusal, n: number) => RewardError,
): Promise<JudgedItem[]> {
  let place: HoldPlace | undefined;
  try {
    for (;;) {
      const outcome = await once(request, place);
      if (outcome.kind === 'done') return outcome.results;
      place = outcome.place;
      const verdict = await place.verdict;
      if (verdict.kind === 'refuse') throw refuse(verdict.refusal, outcome.newJudgments);
      if (verdict.kind === 'gone') {
        place.leave();
        place = undefined;
        // Cancelled, its client gone, or its deadline passed while held: decided now without holding
        // (a cancelled request answers `cancelled`, an expired one is refused).
        const last = await once(request, undefined, true);
        return last.kind === 'done' ? last.results : [];
      }
      request = { ...request, deadline: verdict.deadline };
    }
  } finally {
    place?.leave();
  }
}

/**
 * A request's new judgments admitted whole (admission.ts), in its lane and with its hold window: held while
 * the capacity is measured when `mayHold`, else decided now (`deadline` absolute, `now` epoch ms).
 */
export function admitRequest(
  admission: Admission,
  shapes: readonly WorkShape[],
  request: JudgeRequest,
  deadline: number,
  now: number,
  mayHold: boolean,
  reporting: RefusalReporting,
): AdmitOrHold {
  const lane = request.priority ?? 'normal';
  const hint = 'split it into smaller requests';
  const options = { holdUntil: request.holdUntil, work: request.tenant };
  if (mayHold)
    return admitOrHold(
      admission,
      shapes,
      deadline,
      request.signal ?? NEVER,
      'judgments',
      hint,
      reporting,
      lane,
      options,
    );
  return {
    kind: 'admitted',
    ...admitWhole(admission, shapes, deadline - now, 'judgments', hint, reporting, lane, options),
  };
}
