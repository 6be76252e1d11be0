/**
 * Cheap policy-drift gauges over the last `window` computed real judgments with a reward (status `ok` or
 * `rejected_input`), per graph label: the accept rate, the mean candidate length, the Pearson correlation of
 * length and reward (a policy that learns to babble for reward), and the rejected-input rate (degenerate
 * candidates). Read at scrape time and by `GET /v1/integrity`; O(window) per read.
 */
import type { Judgment } from '../../judge/types.js';
import type { DriftReading } from '../observe/metric-types.js';

export interface DriftTracker {
  record(graph: string, candidateChars: number, judgment: Judgment): void;
  readings(): DriftReading[];
}

interface Entry {
  chars: number;
  reward: number;
  rejected: boolean;
}

/** Pearson correlation; null with fewer than 3 points or no variance on either side. */
function correlation(entries: readonly Entry[]): number | null {
  const n = entries.length;
  if (n < 3) return null;
  let sx = 0;
  let sy = 0;
  for (const e of entries) {
    sx += e.chars;
    sy += e.reward;
  }
  const mx = sx / n;
  const my = sy / n;
  let cov = 0;
  let vx = 0;
  let vy = 0;
  for (const e of entries) {
    const dx = e.chars - mx;
    const dy = e.reward - my;
    cov += dx * dy;
    vx += dx * dx;
    vy += dy * dy;
  }
  if (vx === 0 || vy === 0) return null;
  return cov / Math.sqrt(vx * vy);
}

/** Graph labels tracked at most (labels are preset names or `custom`: bounded anyway). */
const MAX_GRAPHS = 64;

/** The last `window` entries of one graph: a ring (record is on the hot path, reads are per scrape). */
interface Ring {
  entries: Entry[];
  next: number;
}

export function createDriftTracker(window: number): DriftTracker {
  const byGraph = new Map<string, Ring>();
  return {
    record(graph, candidateChars, judgment) {
      if (judgment.reward === null) return;
      let ring = byGraph.get(graph);
      if (ring === undefined) {
        if (byGraph.size >= MAX_GRAPHS) return;
        ring = { entries: [], next: 0 };
        byGraph.set(graph, ring);
      }
      const entry = {
        chars: candidateChars,
        reward: judgment.reward,
        rejected: judgment.status === 'rejected_input',
      };
      if (ring.entries.length < window) ring.entries.push(entry);
      else ring.entries[ring.next] = entry;
      ring.next = (ring.next + 1) % window;
    },
    readings() {
      return [...byGraph].map(([graph, { entries }]) => {
        const n = entries.length;
        let accepted = 0;
        let chars = 0;
        let rejected = 0;
        for (const e of entries) {
          accepted += e.reward;
          chars += e.chars;
          if (e.rejected) rejected += 1;
        }
        return {
          graph,
          acceptRate: n === 0 ? null : accepted / n,
          candidateChars: n === 0 ? null : chars / n,
          lengthRewardCorrelation: correlation(entries),
          rejectedInputRate: n === 0 ? null : rejected / n,
        };
      });
    },
  };
}
