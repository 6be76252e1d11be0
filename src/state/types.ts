/**
 * State that replicas and workers can share, behind four small interfaces. Each has a local (one process)
 * implementation in `local.ts` and a Redis one in `redis.ts`; without REDIS_URL the server runs on the
 * local ones, which are exactly today's behaviour. Values are opaque strings here: callers serialise and
 * validate them (Redis is a boundary). No method rejects because the store is unreachable: the Redis
 * implementations fall back to local state and report it in `status()`.
 */

/** Completed judgments shared across processes (the in-process LRU stays in front of it). */
export interface JudgmentStore {
  /** One entry per key, `undefined` when absent (or unreadable). */
  getMany(keys: readonly string[]): Promise<Array<string | undefined>>;
  /** Stores `value` under `key` for `ttlMs`. */
  set(key: string, value: string, ttlMs: number): Promise<void>;
}

/**
 * What a caller of `LeaseStore.acquire` gets: the right to compute, or an outcome — already stored when it
 * asked (`waited: false`), or handed over by the holder it waited for (`waited: true`).
 */
export type LeaseOutcome =
  { kind: 'acquired'; lease: Lease } | { kind: 'landed'; value: string; waited: boolean };

export interface Lease {
  /**
   * Hands `value` to every waiter, stores it (judgment store, same key) for `storeTtlMs` when given
   * (failures are published but never stored), and frees the lease.
   */
  complete(value: string, storeTtlMs: number | undefined): Promise<void>;
  /** Frees the lease without an outcome (the computation was aborted): a waiter takes over. */
  abandon(): Promise<void>;
}

export interface LeaseOptions {
  signal: AbortSignal;
  /**
   * Absolute deadline, epoch ms: a waiter stops waiting then (rejects with RW_JUDGE_TIMEOUT). Read again
   * while waiting: a getter may move it later (a request joined the waiting judgment).
   */
  readonly deadline: number;
}

/**
 * Single-flight across processes: one holder per key computes, the others wait and receive its outcome
 * when it lands. A lease expires unless its holder renews it, so a crashed holder's waiters take over.
 */
export interface LeaseStore {
  /**
   * Resolves `acquired` (compute, then `complete` or `abandon`) or `landed` (another holder's outcome, or a
   * value already stored under `key`). Rejects with the signal's reason on abort.
   */
  acquire(key: string, options: LeaseOptions): Promise<LeaseOutcome>;
  /**
   * For each key, whether another process holds its lease now (its judgment is being computed there).
   * Local state knows no other process: all false. Never rejects (false when unknown).
   */
  heldElsewhere(keys: readonly string[]): Promise<boolean[]>;
}

/** One token bucket: a burst of `capacity`, refilled at `perMs` tokens per ms. */
export interface BucketSpec {
  /** Shared by every process using the same name (e.g. backend + `rpm`). */
  name: string;
  capacity: number;
  perMs: number;
  /** Tokens this request takes. */
  cost: number;
}

/** `waitMs` = how long until the reservation may be used; nothing is taken when `taken` is false. */
export interface BucketReservation {
  taken: boolean;
  waitMs: number;
}

/**
 * Token buckets with reservations (RPM / TPM per backend). A request of cost c waits until the level
 * reaches min(c, capacity), then takes c; the level is debited at reservation time, so later callers wait
 * behind earlier ones. Several buckets are reserved together or not at all.
 */
export interface BucketStore {
  /** Reserves every bucket, unless the wait would exceed `maxWaitMs` (then none is touched). */
  take(buckets: readonly BucketSpec[], maxWaitMs: number): Promise<BucketReservation>;
  /** Gives an unused reservation back (the caller was aborted while waiting). */
  refund(buckets: readonly BucketSpec[]): Promise<void>;
}

/** Records that make a retried request recognisable (`request:<id>`, `rollout:<id>`), with a TTL. */
export interface IdempotencyStore {
  /**
   * Stores `value` under `id` unless a record exists; returns the existing record when one does
   * (`undefined` when this call created it).
   */
  claim(id: string, value: string, ttlMs: number): Promise<string | undefined>;
  get(id: string): Promise<string | undefined>;
  /** Replaces the record (e.g. running → done), keeping the given TTL. */
  put(id: string, value: string, ttlMs: number): Promise<void>;
}

/**
 * Spent-token counters of the token budget (JUDGE_TOKEN_BUDGET), one per budget window, shared by every
 * process with the same store. Counts are whole tokens.
 */
export interface BudgetStore {
  /** Adds `tokens` to `window`'s counter (kept `ttlMs`); resolves the counter's new total. */
  add(window: string, tokens: number, ttlMs: number): Promise<number>;
  /** The counter's total (0 when absent). */
  get(window: string): Promise<number>;
}

/** A cancel as it travels between processes: `POST /v1/cancel`'s selector (ids or a tag, of a tenant). */
export interface CancelMessage {
  requestIds?: readonly string[] | undefined;
  tag?: string | undefined;
  /** Whose requests it selects (REWARD_KEYS); absent = the tenant `default`. */
  tenant?: string | undefined;
}

/** What one process cancelled: judgments aborted, live requests selected. */
export interface CancelCounts {
  judgments: number;
  requests: number;
}

/** The other processes' answer to a published cancel, summed. */
export interface CancelBroadcast extends CancelCounts {
  /** Other processes that answered in time (their counts are the sum). */
  processes: number;
  /** False when the store could not carry the cancel (local state, Redis unreachable): it reached nobody. */
  shared: boolean;
}

/**
 * Cancels shared by every process using the same store (`POST /v1/cancel` across replicas). A published
 * cancel reaches the processes connected now, and for `tombstoneMs` also those that connect (or reconnect)
 * later: each applies it to its own live requests and remembers it for requests still to arrive.
 */
export interface CancelBus {
  /**
   * Sends `cancel` to every other process, waits (at most ~2 s) for their counts and sums them. Never
   * rejects: local state or a Redis outage answers `shared: false` at once.
   */
  publish(cancel: CancelMessage, tombstoneMs: number): Promise<CancelBroadcast>;
  /** Runs `apply` for every cancel another process publishes (`tombstoneMs`: how long it still holds). */
  serve(apply: (cancel: CancelMessage, tombstoneMs: number) => CancelCounts): void;
}

/** For /readyz and the metrics. */
export interface StateStatus {
  kind: 'local' | 'redis';
  /** Redis configured but unreachable: judging continues on local state. */
  degraded: boolean;
  /** Epoch ms of the last change of `degraded`. */
  since: number;
  /** Where Redis is (password removed); absent for local state. */
  url?: string | undefined;
}

export interface SharedState {
  readonly kind: 'local' | 'redis';
  /** Absent for local state: the in-process LRU is the whole cache. */
  readonly judgments: JudgmentStore | undefined;
  readonly leases: LeaseStore;
  readonly buckets: BucketStore;
  readonly idempotency: IdempotencyStore;
  /** Token-budget counters; absent = in-process counters (budget.ts makes them). */
  readonly budget?: BudgetStore | undefined;
  /** Cancels across processes; absent = this process only (also what local state's bus amounts to). */
  readonly cancels?: CancelBus | undefined;
  status(): StateStatus;
  close(): Promise<void>;
}

/** Hooks so the serving layer can count without this layer knowing about metrics. */
export interface StateObserver {
  /** `degraded` changed (also called once at start with the initial value). */
  onDegraded?(degraded: boolean): void;
  /** A Redis operation failed and local state answered instead. */
  onError?(op: StateOp, err: unknown): void;
}

export type StateOp =
  'judgments' | 'leases' | 'buckets' | 'idempotency' | 'flush' | 'decode' | 'budget' | 'cancels';
