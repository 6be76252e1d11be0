/**
 * Staggering of calls that share a prompt prefix. A prefix cache (vLLM automatic prefix caching, SGLang
 * radix cache) reuses only blocks that are already computed: two calls with the same prefix sent in the
 * same instant both prefill it. So the first call of a key (role, model and ground truth: the parallel
 * members of a group share their prompt up to the candidate) is the leader and goes at once; a follower
 * arriving while the leader's prefill is still plausibly running waits until the leader has been on the
 * wire for `staggerMs`, or until the leader's attempt is over, whichever comes first. A follower never
 * waits more than 2 × `staggerMs`, nor past its deadline, nor after its abort.
 */
import { evictOldest } from '../state/bounded.js';

const MAX_KEYS = 10_000;

/** The caller's part in a key's stagger. The leader reports when it was sent and when it finished. */
export interface StaggerTurn {
  readonly leader: boolean;
  /** Milliseconds this call waited for its leader. */
  readonly waitedMs: number;
  sent(at: number): void;
  done(): void;
}

export interface PrefixStagger {
  enter(key: string, options: { signal: AbortSignal; deadline: number }): Promise<StaggerTurn>;
}

interface Entry {
  sentAt: number | undefined;
  done: boolean;
  wake: Set<() => void>;
}

const follower = (waitedMs: number): StaggerTurn => ({
  leader: false,
  waitedMs,
  sent: () => undefined,
  done: () => undefined,
});

export function createPrefixStagger(staggerMs: number, now: () => number = Date.now): PrefixStagger {
  const entries = new Map<string, Entry>();

  const leaderTurn = (entry: Entry): StaggerTurn => ({
    leader: true,
    waitedMs: 0,
    sent(at) {
      entry.sentAt ??= at;
    },
    done() {
      if (entry.done) return;
      entry.done = true;
      for (const wake of entry.wake) wake();
      entry.wake.clear();
    },
  });

  return {
    async enter(key, { signal, deadline }) {
      if (staggerMs <= 0 || signal.aborted) return follower(0);
      const entry = entries.get(key);
      const t = now();
      if (entry === undefined) {
        const created: Entry = { sentAt: undefined, done: false, wake: new Set() };
        entries.set(key, created);
        evictOldest(entries, MAX_KEYS);
        return leaderTurn(created);
      }
      if (entry.done) return follower(0);
      const until = entry.sentAt === undefined ? t + 2 * staggerMs : entry.sentAt + staggerMs;
      const waitMs = Math.min(until, deadline) - t;
      if (waitMs <= 0) return follower(0);
      // Ends at the timer, when the leader is done, or on the caller's abort (the caller checks its signal).
      await new Promise<void>((resolve) => {
        const finish = (): void => {
          clearTimeout(timer);
          entry.wake.delete(finish);
          signal.removeEventListener('abort', finish);
          resolve();
        };
        const timer = setTimeout(finish, waitMs);
        entry.wake.add(finish);
        signal.addEventListener('abort', finish, { once: true });
      });
      return follower(now() - t);
    },
  };
}
