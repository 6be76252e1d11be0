/**
 * The options of one judgment (`runJudgment`, run.ts), which its nodes (node.ts) read too: the router, the
 * deadline, the caller's signal and observer, the candidate's preparation, and the slot-priority fields.
 */
import type { ReasoningFormat } from './candidate.js';
import type { RejectionReason } from './degenerate.js';
import type { Flow } from './fair-queue.js';
import type { JudgeObserver, Router } from './types.js';

export interface RunOptions {
  router: Router;
  /**
   * Absolute deadline, epoch ms. Unfinished judgments end with status `timeout`. Read again whenever it
   * matters (a getter may move it later while the judgment runs: serving extends a flight joined by a
   * later request); it never moves earlier.
   */
  deadline: number;
  signal?: AbortSignal | undefined;
  observer?: JudgeObserver | undefined;
  limits?: { minChars: number; maxChars: number } | undefined;
  /** How the candidate's reasoning trace is found (REASONING_FORMAT; default `auto`). */
  reasoningFormat?: ReasoningFormat | undefined;
  /** Fence nonce; random per judgment unless a test pins it. */
  nonce?: string | undefined;
  /** Replies an earlier stage of the same judgment received (a cascade's escalation): slot priority. */
  progress?: number | undefined;
  /** Canaries and audits: every call of a backend named here goes to that replica (`CallOptions.pin`). */
  pin?: ReadonlyMap<string, string> | undefined;
  /**
   * A high-priority judgment (the serving priority lane): its calls take a free backend slot before every
   * other queued call. Calls in flight are never preempted. Default false.
   */
  urgent?: boolean | undefined;
  /** The tenant's fair-queue flow its calls wait in for a backend slot (fair-queue.ts). Default shared. */
  flow?: Flow | undefined;
  /**
   * Set when the caller already put the input through `prepareInput` with these `limits` and
   * `reasoningFormat` (serving does, to key and cache it): the engine judges the input as given, or rejects
   * it with this reason, instead of preparing it again (the preparation is idempotent, so the outcome is
   * the same; it costs about a millisecond per long candidate).
   */
  prepared?: { rejection?: RejectionReason | undefined } | undefined;
}
