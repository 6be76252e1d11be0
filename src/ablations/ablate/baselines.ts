/**
 * Budget-matched vote baselines: a committee is worth its cost only if it beats N independent single
 * judges given the same budget. N comes from what the graph **measurably** spent (its mean calls, or its
 * mean tokens over the vote judges' tokens per call), not from its maximum: proposer-critic stops early and
 * averages ~2 calls, so its baseline is vote-3, not vote-6.
 */
import { voteGraph } from '../../judge/presets.js';
import type { ItemRecord } from '../records.js';
import type { GraphEntry, MatchedOn } from '../types.js';
import { spend } from './usage.js';

/**
 * The odd vote size nearest to `budget` (odd: a majority of an even vote can tie, and `vote-N` breaks ties
 * towards no_match, which shifts its operating point). An exactly even budget takes the larger odd N, so the
 * baseline never gets less than the graph. At least 1.
 */
export function matchedVoteSize(budget: number): number {
  if (!(budget > 1)) return 1;
  const below = 2 * Math.floor((budget - 1) / 2) + 1;
  const above = below + 2;
  return budget - below < above - budget ? below : above;
}

export interface PlannedBaseline {
  /** The graph the baseline is for. */
  graph: string;
  matchedOn: MatchedOn;
  n: number;
  /** Token-matched only: the tokens per vote call N was computed with. */
  tokensPerCall?: number | undefined;
}

/**
 * Mean tokens per call of the vote judges that ran (every `vote-N` entry), or null when none made a call.
 * A vote judge's call is the unit of a token-matched baseline.
 */
export function voteTokensPerCall(
  entries: readonly GraphEntry[],
  recordsOf: (label: string) => readonly ItemRecord[],
): number | null {
  let calls = 0;
  let tokens = 0;
  for (const entry of entries) {
    if (!isVote(entry)) continue;
    for (const r of recordsOf(entry.label)) {
      calls += r.usage.calls;
      tokens += r.usage.promptTokens + r.usage.completionTokens;
    }
  }
  return calls === 0 ? null : tokens / calls;
}

/**
 * A vote baseline for every entry that made LLM calls, except vote graphs (they are the baselines):
 * call-matched (N = matchedVoteSize(mean calls)), or with `tokensPerCall` token-matched
 * (N = matchedVoteSize(mean tokens ÷ tokens per vote call)).
 */
export function planBaselines(
  entries: readonly GraphEntry[],
  recordsOf: (label: string) => readonly ItemRecord[],
  tokensPerCall?: number,
): PlannedBaseline[] {
  const out: PlannedBaseline[] = [];
  for (const entry of entries) {
    if (isVote(entry)) continue;
    const s = spend(recordsOf(entry.label));
    if (s === null || !(s.calls > 0)) continue;
    out.push(
      tokensPerCall === undefined
        ? { graph: entry.label, matchedOn: 'calls', n: matchedVoteSize(s.calls) }
        : {
            graph: entry.label,
            matchedOn: 'tokens',
            n: matchedVoteSize(s.tokens / tokensPerCall),
            tokensPerCall,
          },
    );
  }
  return out;
}

/** True for an entry that is `vote-N` for its N (asked for or added). */
export function isVote(entry: GraphEntry): boolean {
  const n = entry.graph.spec.nodes.length;
  return voteGraph(n).hash === entry.graph.hash;
}
