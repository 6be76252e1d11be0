/**
 * What became of each item a reward route answers for — a judged rollout (/v1/reward, /v1/judge, the
 * adapters) or a ranked candidate (/v1/rank, /v1/best-of-n, the group adapters) — and the one rule every
 * route maps it to a reward by (DESIGN §2, §5, §11):
 *
 * - `judged`: a judge decided; the reward is its value (a verdict's 0/1, a graded score, a top-k 0/1);
 * - `rejected`: not an idea (src/judge/candidate.ts): a real **0**, in every reward mode, without a judge;
 * - `failed`: the judge failed, timed out, had no room, or (ranking) the group's comparisons are incomplete:
 *   **null**, never a 0; a trainer adapter answers 503 `RW_JUDGE_FAILED` unless FAILURE_REWARD is set;
 * - `cancelled`: POST /v1/cancel selected the request: **null**, and no adapter retries it (no 503, no
 *   FAILURE_REWARD: the trainer gave the work up).
 * - `/verify` is the exception for both (NeMo-RL needs a number): `maskedReward` and `isMasked`.
 *
 * Routes never read a judgment's `reward` field or a ranking's score as a reward directly: they classify
 * (`judgmentOutcome`, `rank-outcomes.ts`) and map through `rewardOf` / `trainerReward` here.
 */
import { RewardError, type ErrorCode } from '../../errors.js';
import { REJECTION_REASONS } from '../../judge/degenerate.js';
import type { Judgment } from '../../judge/types.js';

export type Outcome =
  | { kind: 'judged'; reward: number; score: number | null }
  | { kind: 'rejected'; reason: string }
  | {
      kind: 'failed';
      /** What the item reports: `judge_error`, `timeout`, `overloaded`. */
      status: 'judge_error' | 'timeout' | 'overloaded';
      code: ErrorCode | undefined;
      message: string | undefined;
    }
  | { kind: 'cancelled' };

/** The reward of an outcome: the judged value, 0 for a rejected input, null for a failure or a cancel. */
export function rewardOf(outcome: Outcome): number | null {
  switch (outcome.kind) {
    case 'judged':
      return outcome.reward;
    case 'rejected':
      return 0;
    case 'failed':
    case 'cancelled':
      return null;
  }
}

/** The score beside the reward: the judge's, 0 for a rejected input (a real 0), null without a judgment. */
export function scoreOf(outcome: Outcome): number | null {
  switch (outcome.kind) {
    case 'judged':
      return outcome.score;
    case 'rejected':
      return 0;
    case 'failed':
    case 'cancelled':
      return null;
  }
}

/** The status an item reports: `ok`, `rejected_input`, the failure's status, or `cancelled`. */
export function statusOf(outcome: Outcome): string {
  switch (outcome.kind) {
    case 'judged':
      return 'ok';
    case 'rejected':
      return 'rejected_input';
    case 'failed':
      return outcome.status;
    case 'cancelled':
      return 'cancelled';
  }
}

/** A judgment's outcome: `ok` with a reward is judged; a cancelled one (RW_CANCELLED) is `cancelled`. */
export function judgmentOutcome(j: Judgment): Outcome {
  if (j.error?.code === 'RW_CANCELLED') return { kind: 'cancelled' };
  if (j.status === 'rejected_input') return { kind: 'rejected', reason: j.reason ?? 'rejected_input' };
  if (j.status === 'ok' && j.reward !== null) return { kind: 'judged', reward: j.reward, score: j.score };
  return {
    kind: 'failed',
    status: j.status === 'timeout' || j.status === 'overloaded' ? j.status : 'judge_error',
    code: j.error?.code,
    message: j.error?.message,
  };
}

/**
 * The reward a trainer adapter answers: `rewardOf`, except that a failure answers FAILURE_REWARD (the
 * adapters refuse the request first when it is unset: `trainerFailure`). A cancel stays null.
 */
export function trainerReward(outcome: Outcome, failureReward: number | undefined): number | null {
  return outcome.kind === 'failed' ? (failureReward ?? null) : rewardOf(outcome);
}

/** The score a trainer adapter answers beside `trainerReward`: a failure's is FAILURE_REWARD too. */
export function trainerScore(outcome: Outcome, failureReward: number | undefined): number | null {
  return outcome.kind === 'failed' ? (failureReward ?? null) : scoreOf(outcome);
}

/** True for an item a trainer adapter cannot answer without FAILURE_REWARD (a failure, not a cancel). */
export const isFailure = (outcome: Outcome): boolean => outcome.kind === 'failed';

/**
 * `/get_reward` (issue 33 item 6): OpenRLHF turns the rewards into a tensor — a null breaks it, and it has no
 * skip value — so there a cancelled item has no reward to give either: it is answered like a failure
 * (FAILURE_REWARD when set, else the request's 503), and `openRlhfReward` never answers null.
 */
export const isUnrewarded = (outcome: Outcome): boolean =>
  outcome.kind === 'failed' || outcome.kind === 'cancelled';

/** `/get_reward`'s reward: `trainerReward`, a cancel's FAILURE_REWARD (the request is refused when unset). */
export function openRlhfReward(outcome: Outcome, failureReward: number | undefined): number | null {
  return outcome.kind === 'cancelled' ? (failureReward ?? null) : trainerReward(outcome, failureReward);
}

/**
 * `/verify` (NeMo-Gym, read by NeMo-RL): every reward must be a number — NeMo-RL calls `float()` on it and
 * builds a tensor (`rollout_manager.py` `_result_to_completion`, `rollouts.py`), and NeMo-Gym's
 * `BaseVerifyResponse.reward` is a `float` — and a rollout without a judgment must not be trained: the
 * route masks it (`instance_config.mask_sample`, which NeMo-RL turns into a zero loss multiplier). NeMo-RL
 * still puts the masked reward into its siblings' baseline (`calculate_baseline_and_std_per_prompt` with an
 * all-ones valid mask), so a failure or a cancel answers the mean of its group's judged rewards (neutral
 * there), else FAILURE_REWARD, else 0 (the group has nothing judged yet: whatever is answered is masked).
 */
export function maskedReward(
  outcome: Outcome,
  groupMean: number | undefined,
  failureReward: number | undefined,
): number {
  const reward = rewardOf(outcome);
  if (reward !== null) return reward;
  return groupMean ?? failureReward ?? 0;
}

/** True for an item `/verify` answers masked: a failure or a cancel (no judgment to train on). */
export const isMasked = (outcome: Outcome): boolean =>
  outcome.kind === 'failed' || outcome.kind === 'cancelled';

/**
 * The adapters' refusal when some items failed and FAILURE_REWARD is unset: 503 `RW_JUDGE_FAILED` with
 * `retry_after_s` (OpenRLHF has no skip value; it retries, then fails loudly); undefined when every item
 * has a reward (or is cancelled) or FAILURE_REWARD is set. `what` names the items (`judgments`, `rollouts`).
 */
export function trainerFailure(
  outcomes: readonly Outcome[],
  failureReward: number | undefined,
  what: string,
  /** Which outcomes have no reward to give: failures; on `/get_reward` cancels too (`isUnrewarded`). */
  failing: (outcome: Outcome) => boolean = isFailure,
): RewardError | undefined {
  if (failureReward !== undefined) return undefined;
  const failed: Array<{ index: number; status: string; error: string | undefined }> = [];
  for (const [index, o] of outcomes.entries()) {
    if (failing(o))
      failed.push({ index, status: statusOf(o), error: o.kind === 'failed' ? o.code : 'RW_CANCELLED' });
  }
  if (failed.length === 0) return undefined;
  return new RewardError(
    'RW_JUDGE_FAILED',
    `${failed.length} of ${outcomes.length} ${what} failed (no reward to give; set FAILURE_REWARD to ` +
      'answer a fixed reward instead)',
    { details: { failed: failed.slice(0, 50), retry_after_s: 1 } },
  );
}

/**
 * OpenRLHF's `extra_logs` about rejections (numbers only; it logs each list's mean): `rejected_input` 1 for a
 * rejected item, `rejected_<reason>` 1 for the items rejected for that reason. The same keys on every route.
 */
export function rejectionLogs(outcomes: readonly Outcome[]): Record<string, number[]> {
  const logs: Record<string, number[]> = {
    rejected_input: outcomes.map((o) => (o.kind === 'rejected' ? 1 : 0)),
  };
  for (const reason of REJECTION_REASONS) {
    logs[`rejected_${reason}`] = outcomes.map((o) => (o.kind === 'rejected' && o.reason === reason ? 1 : 0));
  }
  return logs;
}

/** `judge_failed` and `cancelled` for OpenRLHF's `extra_logs`. */
export function failureLogs(outcomes: readonly Outcome[]): { judge_failed: number[]; cancelled: number[] } {
  return {
    judge_failed: outcomes.map((o) => (o.kind === 'failed' ? 1 : 0)),
    cancelled: outcomes.map((o) => (o.kind === 'cancelled' ? 1 : 0)),
  };
}
