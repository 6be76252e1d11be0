/**
 * Why a rollout of a group adapter (/get_reward/rank, /slime/rank) is not an idea: the same decision the
 * comparisons make (src/judge/candidate.ts through `comparing.ts`), read again per rollout so the answer can
 * say it per item. A rejected rollout is compared without calls and loses every comparison; without this the
 * trainer sees only its low reward. Pure: preparing is idempotent, so this decides exactly what the
 * comparisons decided (and counts nothing: `reward_rejected_inputs_total` is counted where they prepare).
 */
import type { Config } from '../../config.js';
import { prepareCandidate } from '../../judge/candidate.js';
import { normalizeShared } from '../../judge/compare.js';
import { REJECTION_REASONS, type RejectionReason } from '../../judge/degenerate.js';
import type { Rollout } from './rank-service.js';

/** Per rollout, in order: why it was rejected, or undefined when it was compared. */
export function rolloutRejections(
  items: readonly Rollout[],
  config: Pick<Config, 'candidateLimits' | 'reasoningFormat'>,
): Array<RejectionReason | undefined> {
  return items.map(
    (item) =>
      prepareCandidate(item.candidate, {
        reasoningFormat: config.reasoningFormat,
        limits: config.candidateLimits,
        question: normalizeShared({ question: item.question, groundTruth: item.groundTruth }).question,
      }).rejection,
  );
}

/**
 * OpenRLHF's `extra_logs` (numbers only; it logs each list's mean): `rejected_input` 1 for a rejected
 * rollout, and `rejected_<reason>` per reason, the same keys `/get_reward` logs.
 */
export function rejectionLogs(
  rejections: ReadonlyArray<RejectionReason | undefined>,
): Record<string, number[]> {
  const logs: Record<string, number[]> = {
    rejected_input: rejections.map((r) => (r === undefined ? 0 : 1)),
  };
  for (const reason of REJECTION_REASONS)
    logs[`rejected_${reason}`] = rejections.map((r) => (r === reason ? 1 : 0));
  return logs;
}
