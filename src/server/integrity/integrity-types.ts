/**
 * The integrity wiring's shapes (integrity.ts): its options, what the server is handed (`Integrity`) and the
 * `GET /v1/integrity` body. Types only.
 */
import type { ReasoningFormat } from '../../judge/candidate.js';
import type { CompiledGraph } from '../../judge/graph.js';
import type { JudgeObserver, Judgment, JudgmentInput, Router } from '../../judge/types.js';
import type { CanaryRow } from '../../settings/canary-dataset.js';
import type { CanaryReference } from '../../settings/canary-reference.js';
import type { CanaryLog } from '../../state/canary-log.js';
import type { AuditSummary } from './audit.js';
import type { DriftReading, IntegrityMetrics } from '../observe/metric-types.js';
import type { TranscriptSink } from '../observe/transcripts.js';

export interface IntegrityOptions {
  /** Canary rows; undefined or rate 0 = no canaries. */
  canaries: readonly CanaryRow[] | undefined;
  canaryRate: number;
  /** CANARY_BOOST: the canary rate's ceiling while in doubt, × canaryRate (default 1: none). */
  canaryBoost?: number | undefined;
  /** The configured (default) graph: what canaries judge. */
  graph: CompiledGraph;
  test: { margin: number; threshold: number; floor: number };
  /** The fleet-level test: threshold, CANARY_REFERENCE (or undefined: freeze `referenceSize` canaries). */
  fleet: { threshold: number; reference: CanaryReference | undefined; referenceSize: number };
  window: number;
  canaryMaxInflight: number;
  auditRate: number;
  auditGraph: CompiledGraph | undefined;
  auditMaxInflight: number;
  driftWindow: number;
  deadlineMs: number;
  limits: { minChars: number; maxChars: number };
  /** REASONING_FORMAT, as the judge service has it (default `auto`). */
  reasoningFormat?: ReasoningFormat | undefined;
  router: Router;
  observer: JudgeObserver;
  metrics: IntegrityMetrics;
  log: CanaryLog;
  transcripts?: TranscriptSink | undefined;
  warn(fields: Record<string, unknown>, message: string): void;
  now?: (() => number) | undefined;
}

export interface Integrity {
  /** A judgment the service computed (not a cache hit) under its graph label. */
  onComputed(
    graphLabel: string,
    graph: CompiledGraph,
    input: JudgmentInput,
    id: string,
    judgment: Judgment,
  ): void;
  /** The `GET /v1/integrity` body. */
  report(): IntegrityReport;
  drift(): DriftReading[];
  /** What runs beside real work per computed judgment now: the canary rate and the graph it judges (/v1/plan). */
  background(): { rate: number; graph: CompiledGraph };
  /** Resolves when no canary or audit started here is running. */
  idle(): Promise<void>;
  close(): Promise<void>;
}

export interface IntegrityReport {
  canaries: {
    enabled: boolean;
    rate: number;
    rows: number;
    graph: string;
    shared: boolean;
    /** Canaries per computed judgment now: `rate`, or up to `ceiling` while a replica or the fleet is in doubt. */
    effective_rate: number;
    ceiling: number;
    launched: number;
    /** Canaries aimed at a doubted replica beyond its turn. */
    targeted: number;
    skipped: number;
    owed: number;
    applied: number;
    sequential_test: {
      kind: 'cusum';
      margin: number;
      threshold: number;
      error_floor: number;
      window: number;
    };
    fleet_alert: boolean;
    fleet: Record<string, unknown>;
    replicas: Array<Record<string, unknown>>;
    members: Array<Record<string, unknown>>;
  };
  audit: AuditSummary & { enabled: boolean; replicas: Array<Record<string, unknown>> };
  drift: DriftReading[];
}
