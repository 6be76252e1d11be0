/**
 * The rewards a route judged recently, per group (graph, question, ground truth): what a failed or
 * cancelled rollout of that group can answer when its trainer needs a number anyway and puts it in its
 * siblings' baseline (NeMo-RL's `/verify` path: `outcomes.ts`, `maskedReward`). The mean of the group's
 * own judged rewards leaves their baseline as it is; a 0 or a constant would move it.
 *
 * Bounded: at most `maxGroups` groups (least recently used dropped), `perGroup` rewards each, and a reward
 * counts for `windowMs`. Per process: with WORKERS=N each worker knows the rollouts it judged.
 */
import { createHash } from 'node:crypto';

export interface GroupKey {
  graphHash: string;
  question: string;
  groundTruth: string;
}

export class RecentGroupRewards {
  private readonly groups = new Map<string, Array<{ at: number; reward: number }>>();

  constructor(
    private readonly windowMs = 600_000,
    private readonly maxGroups = 4096,
    private readonly perGroup = 256,
  ) {}

  /** Records a judged (or rejected: a real 0) rollout's reward at time `at` (ms). */
  record(key: GroupKey, reward: number, at: number): void {
    const id = groupId(key);
    const rewards = this.groups.get(id) ?? [];
    this.groups.delete(id); // re-inserted last: the Map's order is the LRU order
    rewards.push({ at, reward });
    if (rewards.length > this.perGroup) rewards.shift();
    this.groups.set(id, rewards);
    while (this.groups.size > this.maxGroups) {
      const oldest = this.groups.keys().next().value;
      if (oldest === undefined) break;
      this.groups.delete(oldest);
    }
  }

  /** The mean of the group's rewards recorded in the last `windowMs`, or undefined when there are none. */
  mean(key: GroupKey, at: number): number | undefined {
    const recent = (this.groups.get(groupId(key)) ?? []).filter((r) => at - r.at <= this.windowMs);
    if (recent.length === 0) return undefined;
    return recent.reduce((sum, r) => sum + r.reward, 0) / recent.length;
  }
}

function groupId(key: GroupKey): string {
  return createHash('sha256')
    .update(key.graphHash)
    .update('\u0000')
    .update(key.question)
    .update('\u0000')
    .update(key.groundTruth)
    .digest('base64');
}
