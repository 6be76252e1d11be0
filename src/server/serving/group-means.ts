/**
 * The judged rewards of each rollout group, across every request and every client (issue 39 item 1).
 *
 * Trainers that stream (verl's agent reward loop, OpenRLHF's `reward_func`) send each finished rollout
 * alone, from whichever worker finished it: no client sees a whole group, the server does. A rollout whose
 * judgment failed must score its own group's value (zero advantage under GRPO), never a constant or another
 * prompt's mean, so the reward routes record every judged reward here and `POST /v1/reward/group-mean`
 * answers a group's mean.
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
}

export interface GroupMeans {
  record(parts: GroupKeyParts, judgmentId: string, reward: number): void;
  mean(parts: GroupKeyParts): GroupMean;
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

  return {
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
      const group = groups.get(keyOf(parts));
      if (group === undefined) return { mean: null, n: 0 };
      const kept = fresh(group, now());
      if (kept.length === 0) return { mean: null, n: 0 };
      return { mean: kept.reduce((s, e) => s + e.reward, 0) / kept.length, n: kept.length };
    },
  };
}
