/**
 * Audits of real traffic: AUDIT_RATE of the computed `ok` judgments are judged again in the background by
 * AUDIT_GRAPH (a stronger committee), or, without one, by the same graph pinned to other replicas than the
 * ones that answered first. The second verdict never changes the reward already returned; it is counted by
 * outcome (`agree`, `disagree`, `failed`) and by the first verdict, and kept over a window for
 * `GET /v1/integrity`. Rising disagreement on first verdicts `match` is the reward-hacking signal a trainer
 * cannot see: the policy found something the serving committee accepts and a second judge does not.
 * At most `maxInflight` audits run at once; more are skipped (counted in the window's `skipped`).
 *
 * Audits as evidence about a replica: each decided audit counts against the replicas that produced the
 * first judgment (one per backend of its graph). Per replica, a Bernoulli CUSUM on its disagreements
 * against the disagreement rate of the same backend's other replicas over their last `window` audits
 * (guarded like the canaries' reference, floored; H1 = that + margin): a replica whose judgments the audit
 * graph contradicts more often than its peers' is `suspect` while S ≥ h/2 (S is capped at h, so agreeing
 * audits clear it). Not lower, as for canaries: disagreements are common (two judges err independently),
 * and at S ≥ 0.15 h a healthy fleet audited at 2 % ran 60 % more canaries (bench/canary-cusum.ts).
 * Suspicion only brings more canaries on the replica (`canary-schedule.ts`), never quarantine: the canaries
 * decide. Kept per server process (audits are not shared through Redis).
 */
import type { CompiledGraph } from '../../judge/graph.js';
import { runJudgment } from '../../judge/run.js';
import {
  alarmStep,
  canaryLlr,
  guardedError,
  hypotheses,
  type SequentialTestOptions,
} from '../../judge/sequential-test.js';
import type { Judgment, JudgmentInput, Router, Verdict } from '../../judge/types.js';
import { graphBackends, type BackgroundJudging } from './canary.js';
import type { DoubtedReplica } from './canary-schedule.js';

export type AuditOutcome = 'agree' | 'disagree' | 'failed';

/** Disagreeing audits kept with their nodes' traces (the most recent). */
export const AUDIT_TRACES_KEPT = 10;

/** One node of an audited judgment: its stance and its reasoning trace, bounded (judge/reply-trace.ts). */
export interface AuditNode {
  node: string;
  role: string;
  stance: Verdict | null;
  reasoning?: string | undefined;
}

/** A disagreeing audit as kept: both verdicts and each node's trace, where a judge's mistake shows. */
export interface AuditDisagreement {
  first: { verdict: Verdict; nodes: AuditNode[] };
  second: { verdict: Verdict | null; nodes: AuditNode[] };
}

const auditNodes = (j: Judgment): AuditNode[] =>
  j.transcript.map((m) => ({ node: m.nodeId, role: m.role, stance: m.stance, reasoning: m.reasoning }));

export interface AuditEvidenceOptions extends SequentialTestOptions {
  /** Audits per replica behind its peers' disagreement rate. */
  window: number;
}

export interface ReplicaAuditRecord {
  backend: string;
  replica: string;
  /** Decided audits of its judgments, and disagreements among them. */
  audits: number;
  disagreements: number;
  /** The CUSUM on its disagreements (capped at h) and whether it makes the replica suspect. */
  s: number;
  suspect: boolean;
  /** The peers' disagreement rate it was last tested against; null before (no peer audited). */
  peerRate: number | null;
  recent: boolean[];
  recentDisagreements: number;
}

export interface AuditEvidence {
  /** One decided audit of a judgment the given replicas produced. */
  observe(replicas: readonly DoubtedReplica[], disagree: boolean): void;
  /** Replicas the audits make suspect now. */
  suspects(): DoubtedReplica[];
  records(): ReplicaAuditRecord[];
}

/** Per replica: its audit disagreements against its peers' (pure; the simulation uses it too). */
export function createAuditEvidence(options: AuditEvidenceOptions): AuditEvidence {
  const h = options.threshold;
  const byKey = new Map<string, ReplicaAuditRecord>();
  const recordOf = (backend: string, replica: string): ReplicaAuditRecord => {
    const key = `${backend}\u0000${replica}`;
    let rec = byKey.get(key);
    if (rec === undefined) {
      rec = {
        backend,
        replica,
        audits: 0,
        disagreements: 0,
        s: 0,
        suspect: false,
        peerRate: null,
        recent: [],
        recentDisagreements: 0,
      };
      byKey.set(key, rec);
    }
    return rec;
  };
  const peerRate = (rec: ReplicaAuditRecord): number | null => {
    let n = 0;
    let d = 0;
    for (const p of byKey.values()) {
      if (p === rec || p.backend !== rec.backend) continue;
      n += p.recent.length;
      d += p.recentDisagreements;
    }
    return n === 0 ? null : guardedError(d, n);
  };
  return {
    observe(replicas, disagree) {
      for (const { backend, replica } of replicas) {
        const rec = recordOf(backend, replica);
        const rate = peerRate(rec);
        rec.audits += 1;
        if (disagree) rec.disagreements += 1;
        rec.recent.push(disagree);
        if (disagree) rec.recentDisagreements += 1;
        if (rec.recent.length > options.window && rec.recent.shift() === true) rec.recentDisagreements -= 1;
        rec.peerRate = rate;
        if (rate === null) continue;
        const { q0, q1 } = hypotheses(rate, options);
        rec.s = Math.min(h, alarmStep(rec.s, canaryLlr(disagree, q0, q1)));
        rec.suspect = rec.s >= h / 2;
      }
    },
    suspects: () =>
      [...byKey.values()].filter((r) => r.suspect).map((r) => ({ backend: r.backend, replica: r.replica })),
    records: () => [...byKey.values()],
  };
}

/** The (backend, replica) pairs that produced a judgment, once each. */
export function producers(judgment: Judgment, router: Router): DoubtedReplica[] {
  const out = new Map<string, DoubtedReplica>();
  for (const m of judgment.transcript) {
    if (m.replica === undefined) continue;
    const backend = router.route({ id: m.nodeId, role: m.role }).backend.name;
    out.set(`${backend}\u0000${m.replica}`, { backend, replica: m.replica });
  }
  return [...out.values()];
}

export interface AuditorOptions extends BackgroundJudging {
  rate: number;
  /** The auditing graph; undefined = the judged graph, on other replicas. */
  graph: CompiledGraph | undefined;
  /** Audits kept for the window. */
  window: number;
  /** Uniform [0, 1) source (default Math.random). */
  random?: (() => number) | undefined;
  now?: (() => number) | undefined;
  /** The per-replica disagreement test (default: margin 0.2, h 10, floor 0.05, window 200). */
  evidence?: AuditEvidenceOptions | undefined;
}

export interface AuditSummary {
  rate: number;
  graph: string | null;
  window: number;
  skipped: number;
  judgments: number;
  /** Share of agreeing audits among those that did not fail; null when none. */
  agreement: number | null;
  /**
   * The last AUDIT_TRACES_KEPT disagreements whose judges left reasoning traces, newest last, with each
   * node's stance and trace; absent while there are none.
   */
  disagreements?: AuditDisagreement[] | undefined;
  byFirstVerdict: Record<Verdict, { n: number; agree: number; disagree: number; failed: number }>;
}

export interface Auditor {
  /** A computed real judgment: audited with probability `rate`. */
  consider(graph: CompiledGraph, input: JudgmentInput, judgment: Judgment): void;
  summary(): AuditSummary;
  /** Per replica: its audits, disagreements and suspicion. */
  evidence: AuditEvidence;
  idle(): Promise<void>;
  close(): void;
}

export function createAuditor(options: AuditorOptions): Auditor {
  const random = options.random ?? Math.random;
  const now = options.now ?? Date.now;
  const controller = new AbortController();
  const running = new Set<Promise<void>>();
  const recent: Array<{ first: Verdict; outcome: AuditOutcome }> = [];
  const traced: AuditDisagreement[] = [];
  const evidence = createAuditEvidence(
    options.evidence ?? { margin: 0.2, threshold: 10, floor: 0.05, window: 200 },
  );
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
    const withTraces = [first, second].some((j) => j.transcript.some((m) => m.reasoning !== undefined));
    if (outcome === 'disagree' && withTraces) {
      traced.push({
        first: { verdict: firstVerdict, nodes: auditNodes(first) },
        second: { verdict: second.verdict, nodes: auditNodes(second) },
      });
      if (traced.length > AUDIT_TRACES_KEPT) traced.shift();
    }
    if (outcome !== 'failed') evidence.observe(producers(first, options.router), outcome === 'disagree');
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
        ...(traced.length === 0 ? {} : { disagreements: [...traced] }),
      };
    },
    evidence,
    async idle() {
      for (let i = 0; i < 1000 && running.size > 0; i++) await Promise.all(running);
    },
    close() {
      controller.abort(new Error('audits stopped'));
    },
  };
}
