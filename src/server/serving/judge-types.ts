/**
 * The judging service's shapes (judge-service.ts): what routes hand it (`JudgeItem`, `JudgeRequest`) and get
 * back (`JudgedItem`), its options (`ServingOptions` shared with the comparison service), and the state its
 * parts share (`Service`: the judge-*.ts files). Types only.
 */
import type { RewardError } from '../../errors.js';
import type { JudgmentCache } from '../../judge/cache.js';
import type { ReasoningFormat } from '../../judge/candidate.js';
import type { CompiledGraph } from '../../judge/graph.js';
import type { keySettingsOf } from '../../judge/key.js';
import type { RunOptions } from '../../judge/run.js';
import type { Judgment, JudgmentInput, Router } from '../../judge/types.js';
import type { Admission, callObserver, Refusal } from '../admission/admission.js';
import type { IdempotencyOptions, IdempotencyRecords } from './idempotency.js';
import type { Metrics } from '../observe/metric-types.js';
import type { Lane } from '../admission/priority.js';
import type { TenantWork } from '../admission/fair-shares.js';
import type { FlightPayers } from './flight-payers.js';
import type { FlightDeadlines } from './flight-deadlines.js';
import type { SharedFlights } from './shared-flights.js';
import type { SharedJudgments } from './shared-judgments.js';
import type { IdempotencyStore } from '../../state/types.js';
import type { TranscriptSink } from '../observe/transcripts.js';

/** A graph as a request chose it: the compiled graph and its metrics label (preset name or `custom`). */
export interface GraphChoice {
  graph: CompiledGraph;
  label: string;
}

export interface JudgeItem {
  graph: GraphChoice;
  input: JudgmentInput;
  /** Set by `judge` once the input is prepared (src/judge/candidate.ts): the engine does not prepare it again. */
  prepared?: RunOptions['prepared'];
}

/** One item's answer. `judgmentId` is null when no judgment ran for it (deadline reached while waiting). */
export interface JudgedItem {
  judgmentId: string | null;
  judgment: Judgment;
  /** True when this request did not compute it: an LRU hit or a flight shared with another item/request. */
  cached: boolean;
  /** Code points of the item's reasoning trace before its answer (src/judge/candidate.ts); 0 without one. */
  reasoningChars?: number | undefined;
}

export interface JudgeRequest {
  items: readonly JudgeItem[];
  /** Absolute deadline, epoch ms; unfinished items come back `timeout`. */
  deadline: number;
  /** Aborts when the client goes away: the request lets go of its flights. */
  signal?: AbortSignal | undefined;
  requestId?: string | undefined;
  /**
   * Idempotency id, scoped by the caller (e.g. `reward:<request_id>`): a retry with the same id and the
   * same items joins or replays this request's judgments.
   */
  idempotencyKey?: string | undefined;
  /** Aborts when POST /v1/cancel selects the request (`cancel.ts`): its flights are let go at once. */
  cancel?: AbortSignal | undefined;
  /** The priority lane of the request's new judgments (priority.ts); default normal. */
  priority?: Lane | undefined;
  /**
   * Its tenant (REWARD_KEYS): the fair-queue flow and lane cap its new judgments are admitted and run in,
   * the budget they are gated by and charged to, and its cache scope (CACHE_SCOPE=tenant).
   */
  tenant?: TenantWork | undefined;
  /**
   * Absolute time (epoch ms) until which the client waits for its answer (`/get_reward`: OpenRLHF's
   * timeout, GET_REWARD_HOLD_MS): work that would not fit `deadline` but fits by then is admitted with its
   * deadline moved there, instead of refused (admission.ts `DecideOptions.holdUntil`).
   */
  holdUntil?: number | undefined;
}

export interface JudgeService {
  judge(request: JudgeRequest): Promise<JudgedItem[]>;
  /** `judge` for a single item. */
  judgeOne(item: JudgeItem, scope: Omit<JudgeRequest, 'items'>): Promise<JudgedItem>;
  /** Aborts every judgment in flight (shutdown after the grace period). */
  abortAll(): void;
  readonly cache: JudgmentCache<StoredJudgment>;
}

export interface StoredJudgment {
  id: string;
  judgment: Judgment;
}

/** What the judgment and the comparison services both take (comparison-units.ts extends it too). */
export interface ServingOptions {
  router: Router;
  metrics: Metrics;
  admission: Admission;
  cacheSize: number;
  candidateLimits: { minChars: number; maxChars: number };
  /** REASONING_FORMAT: where a candidate's reasoning trace ends (default `auto`). */
  reasoningFormat?: ReasoningFormat | undefined;
  transcripts?: TranscriptSink | undefined;
  onInternalError?: ((err: unknown) => void) | undefined;
  /** Called on every refusal (the app rate-limits the log line, one for judgments and comparisons). */
  onRefusal?: ((refusal: Refusal) => void) | undefined;
}

export interface JudgeServiceOptions extends ServingOptions {
  /** Epoch-ms clock (default Date.now); the same one as the request deadlines. */
  now?: (() => number) | undefined;
  idempotency?: IdempotencyOptions | undefined;
  /** REDIS_URL: the cache and single-flight shared with other workers and replicas. */
  shared?: SharedJudgments | undefined;
  /** REDIS_URL: idempotency records shared with other workers and replicas. */
  sharedRecords?: IdempotencyStore | undefined;
  /** A flight lost its last waiter and was aborted (the cancel registry counts the ones a cancel caused). */
  onAbandoned?: (() => void) | undefined;
  /** Told about every judgment computed here (not cache hits): canaries, audits, drift (`integrity.ts`). */
  onComputed?: ((item: JudgeItem, stored: StoredJudgment) => void) | undefined;
}

/** A cache-lookup counter (`reward_cache_lookups_total{result}`). */
export type LookupCounter = ReturnType<Metrics['cacheLookups']['labels']>;

/** The service's state, built once by `createJudgeService` and shared by its parts (judge-*.ts). */
export interface Service {
  options: JudgeServiceOptions;
  cache: JudgmentCache<StoredJudgment>;
  observer: ReturnType<typeof callObserver>;
  lookups: Record<'hit' | 'coalesced' | 'miss' | 'sharedHit' | 'sharedCoalesced', LookupCounter>;
  /** Judgments another process computed: the items that receive them are `cached` here. */
  fromElsewhere: WeakSet<StoredJudgment>;
  /** Latest deadline of the requests waiting for each flight in progress (extended by joiners). */
  deadlines: FlightDeadlines;
  /** Who pays for each flight in progress, and whose flow its calls wait in (flight-payers.ts). */
  payers: FlightPayers;
  settings: ReturnType<typeof keySettingsOf>;
  idem: IdempotencyOptions;
  now: () => number;
  records: IdempotencyRecords;
  refuse: (refusal: Refusal, n: number) => RewardError;
  sharedFlights: SharedFlights | undefined;
}
