import type { Decision } from './graph.js';
import type { TranscriptMessage, Verdict } from './types.js';

export interface Decided {
  verdict: Verdict;
  /** Estimated probability of `match` in [0,1]. */
  score: number;
  /**
   * A reply the decision read contradicts itself: its confidence in its own stance is below 0.5 (an
   * Evaluator's `no_match` with confidence 0.1 says P(match) = 0.9). The stance still counts as given.
   */
  incoherent: boolean;
}

/** Confidence is the probability that the node's own stance is correct: below 0.5 it argues against it. */
const isIncoherentReply = (m: TranscriptMessage): boolean => m.confidence !== null && m.confidence < 0.5;

/** Probability of `match` expressed by one message: its confidence turned towards `match`. */
export function matchProbability(stance: Verdict, confidence: number | null): number {
  const c = confidence ?? 1;
  return stance === 'match' ? c : 1 - c;
}

/**
 * Applies a graph's decision rule to the last message of each node (its final-round stance).
 * Returns null when a required stance is missing (treated as a judge error by the caller).
 * - evaluator: the node's verdict; score = its confidence turned towards match.
 * - majority: match iff more than half say match (a tie is no_match: a reward must be earned); score = vote share.
 * - unanimous: match iff every voter says match; score = vote share.
 * - confidence_weighted: weight = confidence × track record (node `weight`, default 1);
 *   score = Σ w·p(match) / Σ w; match iff score > 0.5.
 */
export function decide(
  decision: Decision,
  last: ReadonlyMap<string, TranscriptMessage>,
  voters: readonly string[],
  weights: ReadonlyMap<string, number>,
): Decided | null {
  if (decision.rule === 'evaluator') {
    const m = last.get(decision.node);
    if (m?.stance == null) return null;
    return {
      verdict: m.stance,
      score: matchProbability(m.stance, m.confidence),
      incoherent: isIncoherentReply(m),
    };
  }
  const ids = decision.nodes ?? voters;
  const messages: TranscriptMessage[] = [];
  for (const id of ids) {
    const m = last.get(id);
    if (m?.stance == null) return null;
    messages.push(m);
  }
  const matches = messages.filter((m) => m.stance === 'match').length;
  const share = matches / messages.length;
  const incoherent = messages.some(isIncoherentReply);
  switch (decision.rule) {
    case 'majority':
      return { verdict: matches * 2 > messages.length ? 'match' : 'no_match', score: share, incoherent };
    case 'unanimous':
      return { verdict: matches === messages.length ? 'match' : 'no_match', score: share, incoherent };
    case 'confidence_weighted': {
      let total = 0;
      let sum = 0;
      for (const m of messages) {
        const stance = m.stance ?? 'no_match';
        const w = (m.confidence ?? 1) * (weights.get(m.nodeId) ?? 1);
        total += w;
        sum += w * matchProbability(stance, m.confidence);
      }
      const score = total > 0 ? sum / total : share;
      return { verdict: score > 0.5 ? 'match' : 'no_match', score, incoherent };
    }
    default: {
      const exhaustive: never = decision;
      return exhaustive;
    }
  }
}
