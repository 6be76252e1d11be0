/**
 * Audits of real traffic: AUDIT_RATE of the computed `ok` judgments are judged again in the background by
 * AUDIT_GRAPH (a stronger committee), or, without one, by the same graph pinned to other replicas than the
 * ones that answered first. The second verdict never changes the reward already returned; it is counted by
 * outcome (`agree`, `disagree`, `failed`) and by the first verdict, and kept over a window for
 * `GET /v1/integrity`. Rising disagreement on first verdicts `match` is the reward-hacking signal a trainer
 * cannot see: the policy found something the serving committee accepts and a second judge does not.
 * At most `maxInflight` audits run at once; more are skipped (counted in the window's `skipped`).
 */
import type { CompiledGraph } from '../../judge/graph.js';
import { runJudgment } from '../../judge/run.js';
import type { Judgment, JudgmentInput, Verdict } from '../../judge/types.js';
import { graphBackends, type BackgroundJudging } from './canary.js';

export type AuditOutcome = 'agree' | 'disagree' | 'failed';

export interface AuditorOptions extends BackgroundJudging {
  rate: number;
  /** The auditing graph; undefined = the judged graph, on other replicas. */
  graph: CompiledGraph | undefined;
  /** Audits kept for the window. */
  window: number;
  /** Uniform [0, 1) source (default Math.random). */
  random?: (() => number) | undefined;
  now?: (() => number) | undefined;
}

export interface AuditSummary {
  rate: number;
  graph: string | null;
  window: number;
  skipped: number;
  judgments: number;
  /** Share of agreeing audits among those that did not fail; null when none. */
  agreement: number | null;
  byFirstVerdict: Record<Verdict, { n: number; agree: number; disagree: number; failed: number }>;
}

export interface Auditor {
  /** A computed real judgment: audited with probability `rate`. */
  consider(graph: CompiledGraph, input: JudgmentInput, judgment: Judgment): void;
  summary(): AuditSummary;
  idle(): Promise<void>;
  close(): void;
}

export function createAuditor(options: AuditorOptions): Auditor {
  const random = options.random ?? Math.random;
  const now = options.now ?? Date.now;
  const controller = new AbortController();
  const running = new Set<Promise<void>>();
  const recent: Array<{ first: Verdict; outcome: AuditOutcome }> = [];
  let skipped = 0;

  /** Without an audit graph: each backend with another replica is pinned to one the first run did not use. */
  const otherReplicas = (graph: CompiledGraph, judgment: Judgment): Map<string, string> => {
    const used = new Set(judgment.transcript.flatMap((m) => (m.replica === undefined ? [] : [m.replica])));
    const pins = new Map<string, string>();
    for (const backend of graphBackends(graph, options.router)) {
      const labels = (backend.replicas?.() ?? []).filter((r) => r.quarantined !== true).map((r) => r.replica);
      const others = labels.filter((l) => !used.has(l));
      const pick = others[Math.floor(random() * others.length)];
      if (pick !== undefined) pins.set(backend.name, pick);
    }
    return pins;
  };

  const record = (first: Verdict, outcome: AuditOutcome): void => {
    options.metrics.auditJudgments.labels(outcome, first).inc();
    recent.push({ first, outcome });
    if (recent.length > options.window) recent.shift();
  };

  const audit = async (graph: CompiledGraph, input: JudgmentInput, first: Judgment): Promise<void> => {
    const firstVerdict = first.verdict;
    if (firstVerdict === null) return;
    const auditGraph = options.graph ?? graph;
    const second = await runJudgment(auditGraph, input, {
      router: options.router,
      deadline: now() + options.deadlineMs,
      signal: controller.signal,
      observer: options.observer,
      limits: options.limits,
      reasoningFormat: options.reasoningFormat,
      pin: options.graph === undefined ? otherReplicas(graph, first) : undefined,
    });
    if (controller.signal.aborted) return;
    const outcome: AuditOutcome =
      second.status !== 'ok' || second.verdict === null
        ? 'failed'
        : second.verdict === firstVerdict
          ? 'agree'
          : 'disagree';
    record(firstVerdict, outcome);
  };

  return {
    consider(graph, input, judgment) {
      if (options.rate <= 0 || controller.signal.aborted) return;
      if (judgment.status !== 'ok' || judgment.verdict === null) return;
      if (random() >= options.rate) return;
      if (running.size >= options.maxInflight) {
        skipped += 1;
        return;
      }
      const task: Promise<void> = audit(graph, input, judgment)
        .catch(() => undefined)
        .finally(() => running.delete(task));
      running.add(task);
    },
    summary() {
      const by: AuditSummary['byFirstVerdict'] = {
        match: { n: 0, agree: 0, disagree: 0, failed: 0 },
        no_match: { n: 0, agree: 0, disagree: 0, failed: 0 },
      };
      for (const a of recent) {
        const side = by[a.first];
        side.n += 1;
        side[a.outcome] += 1;
      }
      const agree = by.match.agree + by.no_match.agree;
      const decided = agree + by.match.disagree + by.no_match.disagree;
      return {
        rate: options.rate,
        graph: options.graph?.name ?? null,
        window: options.window,
        skipped,
        judgments: recent.length,
        agreement: decided === 0 ? null : agree / decided,
        byFirstVerdict: by,
      };
    },
    async idle() {
      for (let i = 0; i < 1000 && running.size > 0; i++) await Promise.all(running);
    },
    close() {
      controller.abort(new Error('audits stopped'));
    },
  };
}
