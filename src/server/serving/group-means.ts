/**
 * The judged rewards of each rollout group, across every request and every client (issue 39 item 1).
 *
 * Trainers that stream (verl's agent reward loop, OpenRLHF's `reward_func`) send each finished rollout
 * alone, from whichever worker finished it: no client sees a whole group, the server does. A rollout whose
 * judgment failed must score its own group's value (zero advantage under GRPO), never a constant or another
 * prompt's mean, so the reward routes record every judged reward here and `POST /v1/reward/group-mean`
 * answers a group's mean.
 *
 * A streamed failure asks for its group's mean while siblings sent beside it may still be in the judge: a
 * mean of the ones that happen to be finished depends on which finished first (a group judged 1, 0, 1 with
 * one failure scored 1.0 when the 0 was slower). So the routes count each group's judgments in flight
 * (`begin`), and the route can wait (`settled`, bounded by the caller's `wait_ms`) until none is: the mean is
 * then that of every sibling the server had received. Siblings not yet sent cannot be waited for.
 *
 * A group is (tenant, graph hash, question, ground truth): one run's rollouts of one prompt under one
 * committee; another tenant (another run) never reads it. Each judgment counts once (by its judgment id:
 * a retry or a cache hit of the same rollout does not weigh it twice). Bounded: `GROUP_WINDOW_MS` (a
 * group's rollouts finish within one step), `MAX_GROUPS` groups (least recently written first out) and
 * `MAX_PER_GROUP` judgments per group. In memory, per process: a restart forgets it (the clients keep
 * their own judged rewards of the same group as the fallback).
 */
import { createHash } from 'node:crypto';

import { evictOldest } from '../../state/bounded.js';
import type { JudgedItem } from './judge-types.js';

/** How long a judged reward counts towards its group's mean, ms (one hour: longer than a step). */
export const GROUP_WINDOW_MS = 3_600_000;
/** Groups kept at most. */
export const MAX_GROUPS = 65_536;
/** Judgments kept per group at most (a GRPO group is 4-64 rollouts; re-sampled prompts add more). */
export const MAX_PER_GROUP = 1_024;

export interface GroupKeyParts {
  tenant: string;
  graphHash: string;
  question: string;
  groundTruth: string;
}

export interface GroupMean {
  /** Mean reward of the group's judged rollouts in the window; null when none was judged. */
  mean: number | null;
  /** How many judged rollouts it averages. */
  n: number;
  /** The group's judgments in flight now (in any request, on this process). */
  pending: number;
}

export interface GroupMeans {
  record(parts: GroupKeyParts, judgmentId: string, reward: number): void;
  mean(parts: GroupKeyParts): GroupMean;
  /** `count` judgments of the group are in flight until the returned release is called (once). */
  begin(parts: GroupKeyParts, count: number): () => void;
  /** Resolves when the group has no judgment in flight, or after `waitMs`, whichever comes first. */
  settled(parts: GroupKeyParts, waitMs: number): Promise<void>;
}

interface InFlight {
  count: number;
  waiters: Set<() => void>;
}

interface Entry {
  at: number;
  reward: number;
}

/** A digest, so that a group's texts are not kept (a ground truth can be a whole abstract). */
function keyOf(parts: GroupKeyParts): string {
  return createHash('sha256')
    .update([parts.tenant, parts.graphHash, parts.question, parts.groundTruth].join('\u0000'))
    .digest('base64url');
}

export function createGroupMeans(now: () => number): GroupMeans {
  // Map order = least recently written first.
  const groups = new Map<string, Map<string, Entry>>();

  const fresh = (group: Map<string, Entry>, at: number): Entry[] =>
    [...group.values()].filter((e) => at - e.at <= GROUP_WINDOW_MS);

  // Groups with judgments in flight only: an entry is removed when its count returns to 0.
  const inFlight = new Map<string, InFlight>();

  return {
    begin(parts, count) {
      const key = keyOf(parts);
      let entry = inFlight.get(key);
      if (entry === undefined) inFlight.set(key, (entry = { count: 0, waiters: new Set() }));
      entry.count += count;
      let released = false;
      return () => {
        if (released) return;
        released = true;
        const current = inFlight.get(key);
        if (current === undefined) return;
        current.count -= count;
        if (current.count > 0) return;
        inFlight.delete(key);
        for (const wake of current.waiters) wake();
      };
    },
    settled(parts, waitMs) {
      const entry = inFlight.get(keyOf(parts));
      if (entry === undefined || waitMs <= 0) return Promise.resolve();
      return new Promise<void>((resolve) => {
        const wake = (): void => {
          clearTimeout(timer);
          entry.waiters.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, waitMs);
        entry.waiters.add(wake);
      });
    },
    record(parts, judgmentId, reward) {
      const key = keyOf(parts);
      const at = now();
      let group = groups.get(key);
      if (group === undefined) {
        group = new Map();
        evictOldest(groups, MAX_GROUPS - 1);
      } else groups.delete(key);
      groups.set(key, group);
      group.delete(judgmentId);
      group.set(judgmentId, { at, reward });
      evictOldest(group, MAX_PER_GROUP);
    },
    mean(parts) {
      const key = keyOf(parts);
      const pending = inFlight.get(key)?.count ?? 0;
      const group = groups.get(key);
      const kept = group === undefined ? [] : fresh(group, now());
      if (kept.length === 0) return { mean: null, n: 0, pending };
      return { mean: kept.reduce((s, e) => s + e.reward, 0) / kept.length, n: kept.length, pending };
    },
  };
}

/**
 * Runs `judge` with each group's `count` judgments in flight until `record` has put their rewards in the
 * ledger (then released, also on a throw): a sibling's failure waiting on `settled` sees them recorded.
 */
export async function judgeInFlight<T>(
  means: GroupMeans,
  groups: ReadonlyArray<{ parts: GroupKeyParts; count: number }>,
  judge: () => Promise<T>,
  record: (judged: T) => void,
): Promise<T> {
  const releases = groups.map((g) => means.begin(g.parts, g.count));
  try {
    const judged = await judge();
    record(judged);
    return judged;
  } finally {
    for (const release of releases) release();
  }
}

/**
 * Every reward of `judged` (one group's items) into its group's ledger: a judged or rejected rollout (a
 * rejected one is a real 0) by its judgment id; a failure or a cancel (reward null, no id) is not a sibling's
 * value. The one rule for every route that feeds the ledger.
 */
export function recordJudged(means: GroupMeans, parts: GroupKeyParts, judged: readonly JudgedItem[]): void {
  for (const item of judged) {
    const reward = item.judgment.reward;
    if (reward !== null && item.judgmentId !== null) means.record(parts, item.judgmentId, reward);
  }
}
