/**
 * The token budget (JUDGE_TOKEN_BUDGET per JUDGE_BUDGET_WINDOW_S): the judge tokens the backends report
 * (prompt + completion per call; the prompt's cached part weighted by CACHED_TOKEN_WEIGHT, default
 * 1 = counted in full) are added to the counter of the current window. Windows are fixed and aligned to the
 * epoch (a 86 400 s window runs from 00:00 UTC), so every process agrees on them without coordination.
 *
 * Once the window's counter reaches the budget, new work is refused (`429 RW_BUDGET_EXHAUSTED`,
 * Retry-After = seconds to the window's end); admitted work runs on and its tokens still count. So the
 * overshoot is bounded by the work in flight when the budget was reached: at most the tokens of the
 * judgments admitted then and not yet finished (each at most its calls × (prompt + max_tokens)). With a
 * shared store (REDIS_URL) every process adds to one counter and learns the shared total on each of its own
 * calls and every REFRESH_MS: add what other processes admit within one refresh.
 *
 * A warning is logged once per window when 80 % is spent, and once when it is exhausted.
 */
import { RewardError } from '../../errors.js';
import type { CallEvent } from '../../judge/types.js';
import type { BudgetStore } from '../../state/types.js';

export interface TokenBudgetOptions {
  tokens: number;
  windowS: number;
  /** Weight of cached prompt tokens (0 = free, 1 = like any prompt token). */
  cachedWeight: number;
  store: BudgetStore;
  /** True when the store is shared with other processes: the total is then polled. */
  shared: boolean;
  now?: (() => number) | undefined;
  warn?: ((fields: Record<string, unknown>, message: string) => void) | undefined;
  /** Called whenever the known remaining tokens change (feeds `reward_budget_remaining_tokens`). */
  onRemaining?: ((remaining: number) => void) | undefined;
  /** Names its counters in the store (a tenant's budget: `tenant:<name>:`); default none (the server's). */
  key?: string | undefined;
  /** What the budget is called in messages; default `JUDGE_TOKEN_BUDGET`. */
  label?: string | undefined;
}

/** What /readyz shows. */
export interface BudgetStatus {
  budget_tokens: number;
  spent_tokens: number;
  remaining_tokens: number;
  window_s: number;
  window_ends_at: string;
  exhausted: boolean;
}

export interface TokenBudget {
  /** One finished backend call (any outcome): its reported tokens count. */
  record(event: Pick<CallEvent, 'promptTokens' | 'completionTokens' | 'cachedPromptTokens'>): void;
  /** The refusal for new work when the budget is spent, else undefined. */
  gate(): RewardError | undefined;
  status(): BudgetStatus;
  /** Tokens left in the current window (≥ 0). */
  remaining(): number;
  /** Reads the shared total now (also done every REFRESH_MS while shared). */
  refresh(): Promise<void>;
  close(): void;
}

export const WARN_AT = 0.8;
const REFRESH_MS = 1000;

/** Tokens a call costs against the budget. */
export function callTokens(
  event: Pick<CallEvent, 'promptTokens' | 'completionTokens' | 'cachedPromptTokens'>,
  cachedWeight: number,
): number {
  const cached = Math.min(event.promptTokens, Math.max(0, event.cachedPromptTokens ?? 0));
  return Math.ceil(event.promptTokens - cached + cached * cachedWeight + event.completionTokens);
}

export function createTokenBudget(options: TokenBudgetOptions): TokenBudget {
  const now = options.now ?? Date.now;
  const windowMs = options.windowS * 1000;
  // A window's counter outlives it a little (a late add from a slow call still lands on its own window).
  const ttlMs = 2 * windowMs;
  let index = Math.floor(now() / windowMs);
  let spent = 0;
  let warned80 = false;
  let warnedOut = false;

  const key = (i: number): string => `${options.key ?? ''}${options.windowS}:${i}`;
  const label = options.label ?? 'JUDGE_TOKEN_BUDGET';
  const endsAt = (): number => (index + 1) * windowMs;
  const remaining = (): number => Math.max(0, options.tokens - spent);

  const roll = (): void => {
    const i = Math.floor(now() / windowMs);
    if (i === index) return;
    index = i;
    spent = 0;
    warned80 = false;
    warnedOut = false;
    options.onRemaining?.(remaining());
  };

  const learn = (i: number, total: number): void => {
    if (i !== index || !Number.isFinite(total) || total <= spent) return;
    spent = total;
    changed();
  };

  const changed = (): void => {
    options.onRemaining?.(remaining());
    const fields = {
      budget_tokens: options.tokens,
      spent_tokens: spent,
      window_s: options.windowS,
      window_ends_at: new Date(endsAt()).toISOString(),
    };
    if (!warned80 && spent >= WARN_AT * options.tokens) {
      warned80 = true;
      options.warn?.(
        fields,
        `token budget: ${Math.round((100 * spent) / options.tokens)} % of ${label} spent in this window`,
      );
    }
    if (!warnedOut && spent >= options.tokens) {
      warnedOut = true;
      options.warn?.(fields, 'token budget exhausted: new judgments are refused until the window ends');
    }
  };

  let timer: NodeJS.Timeout | undefined;
  const refresh = async (): Promise<void> => {
    roll();
    const i = index;
    learn(i, await options.store.get(key(i)));
  };
  if (options.shared) {
    // A store that fails keeps the last known total (as `record` does): never an unhandled rejection.
    timer = setInterval(() => void refresh().catch(() => undefined), REFRESH_MS);
    timer.unref();
  }
  options.onRemaining?.(remaining());

  return {
    record(event) {
      const tokens = callTokens(event, options.cachedWeight);
      if (tokens <= 0) return;
      roll();
      const i = index;
      spent += tokens;
      changed();
      // The store's total includes every process's spend (and this call's): it only ever raises ours.
      options.store.add(key(i), tokens, ttlMs).then(
        (total) => learn(i, total),
        () => undefined,
      );
    },
    gate() {
      roll();
      if (spent < options.tokens) return undefined;
      const retryAfterS = Math.max(1, Math.ceil((endsAt() - now()) / 1000));
      return new RewardError(
        'RW_BUDGET_EXHAUSTED',
        `token budget exhausted: ${spent} of ${options.tokens} tokens (${label}) spent in this ` +
          `${options.windowS} s window; new judgments are refused until it ends`,
        {
          details: {
            retry_after_s: retryAfterS,
            budget_tokens: options.tokens,
            spent_tokens: spent,
            window_s: options.windowS,
            window_ends_at: new Date(endsAt()).toISOString(),
          },
        },
      );
    },
    status() {
      roll();
      return {
        budget_tokens: options.tokens,
        spent_tokens: spent,
        remaining_tokens: remaining(),
        window_s: options.windowS,
        window_ends_at: new Date(endsAt()).toISOString(),
        exhausted: spent >= options.tokens,
      };
    },
    remaining: () => {
      roll();
      return remaining();
    },
    refresh,
    close: () => clearInterval(timer),
  };
}
