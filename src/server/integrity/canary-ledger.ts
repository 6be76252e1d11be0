/**
 * The canary record: every canary outcome per replica and per committee member, and the sequential test
 * that quarantines a replica. A deterministic state machine over the ordered canary events, so every server
 * process that applies the same log (REDIS_URL: one Redis stream, `state/canary-log.ts`) reaches the same
 * states, whichever process ran the canary.
 *
 * Per replica (backend + replica label): a Bernoulli CUSUM (`judge/sequential-test.ts`) on its canary errors
 * against a reference error q0 = the pooled error rate of the last `window` canaries of the same backend's
 * other replicas that are not quarantined (Laplace-smoothed, floored at `floor`); a backend with no such
 * replica uses the replica's own first `window` canaries (its baseline). Failed canaries (a judge error, a
 * timeout) are counted but are no evidence: errors are the circuit breaker's business.
 *
 * S ≥ h quarantines the replica, unless that looks like a fleet-wide drop: it is quarantined only while
 * more than half of the backend's other replicas are `ok`, fewer than half of its replicas are quarantined
 * (a lone replica is never quarantined) and fewer than half of the others are below their own baseline.
 * Otherwise it stays `watching` and the fleet alert is raised: a fleet-wide drop is alerted, never routed
 * around. "Below its own baseline" is a second CUSUM per replica, B, with the same h against the replica's
 * own first `window` canaries (a drop of every replica at once moves the fleet reference too, so only the
 * baselines see it); it alarms at B ≥ h and clears when B is back at 0. The fleet alert is on while a
 * majority of a backend's serving replicas (or its lone replica) are below their baselines, or while a
 * replica is alarmed without room to quarantine it. A quarantined replica keeps receiving
 * canaries; the mirror statistic R ≥ h releases it. States: `ok` (S < h/2), `watching` (h/2 ≤ S, or alarmed
 * without room to quarantine), `quarantined`.
 */
import type { Verdict } from '../../judge/types.js';
import {
  alarmStep,
  canaryLlr,
  hypotheses,
  releaseStep,
  type SequentialTestOptions,
} from '../../judge/sequential-test.js';

export type CanaryOutcome = 'correct' | 'wrong' | 'failed';
export type ReplicaIntegrityState = 'ok' | 'watching' | 'quarantined';

/** One canary as every process sees it (the JSON of a log entry). */
export interface CanaryEvent {
  /** Epoch ms when it finished. */
  at: number;
  /** Canary row id. */
  row: string;
  label: Verdict;
  verdict: Verdict | null;
  outcome: CanaryOutcome;
  /** The replica each backend of the graph was pinned to. */
  pins: Array<{ backend: string; replica: string }>;
  /** Each committee member's stance (LLM members that answered). */
  members: Array<{ node: string; role: string; backend: string; replica: string; stance: Verdict }>;
}

export interface ReplicaRecord {
  backend: string;
  replica: string;
  correct: number;
  wrong: number;
  failed: number;
  state: ReplicaIntegrityState;
  /** CUSUM towards the alarm (S) and, while quarantined, towards release (R). */
  s: number;
  r: number;
  /** S ≥ h (quarantined, or watching for want of room: the fleet alert). */
  alarmed: boolean;
  /** CUSUM against the replica's own baseline, and whether it is alarmed (B ≥ h, until B is 0 again). */
  b: number;
  belowBaseline: boolean;
  /** The reference error q0 the last canary was tested against. */
  referenceError: number | null;
  /** Epoch ms of the last canary that left S at 0 (no evidence against the replica). */
  lastGoodAt: number | null;
  quarantinedAt: number | null;
  /** Last `window` outcomes (true = wrong), oldest first. */
  recent: boolean[];
  /** The first `window` outcomes: a lone replica's own reference. */
  baseline: { n: number; wrong: number };
}

export interface MemberRecord {
  node: string;
  role: string;
  backend: string;
  replica: string;
  /** Canaries labelled `match`: n and how many the member called `match` (TPR = correct / n). */
  positives: { n: number; correct: number };
  /** Canaries labelled `no_match`: n and how many the member called `no_match` (TNR). */
  negatives: { n: number; correct: number };
}

export type Transition =
  | { kind: 'quarantined'; record: ReplicaRecord }
  | { kind: 'released'; record: ReplicaRecord }
  /** A canary left S at 0: judgments before it are no longer suspect. */
  | { kind: 'good'; record: ReplicaRecord }
  | { kind: 'fleet_alert'; alert: boolean; records: ReplicaRecord[] };

export interface LedgerOptions extends SequentialTestOptions {
  /** Canaries per replica in the reference window (and the baseline). */
  window: number;
  /** Known replicas per backend (more are added as events name them). */
  fleet: ReadonlyArray<{ backend: string; replicas: readonly string[] }>;
}

export interface CanaryLedger {
  /** Applies one event in log order; returns the state changes it caused. */
  apply(event: CanaryEvent): Transition[];
  replicas(): ReplicaRecord[];
  members(): MemberRecord[];
  readonly fleetAlert: boolean;
  readonly events: number;
}

const replicaKey = (backend: string, replica: string): string => `${backend}\u0000${replica}`;

export function createCanaryLedger(options: LedgerOptions): CanaryLedger {
  const h = options.threshold;
  const byKey = new Map<string, ReplicaRecord>();
  const byBackend = new Map<string, ReplicaRecord[]>();
  const members = new Map<string, MemberRecord>();
  let fleetAlert = false;
  let events = 0;

  const record = (backend: string, replica: string): ReplicaRecord => {
    const key = replicaKey(backend, replica);
    let rec = byKey.get(key);
    if (rec === undefined) {
      rec = {
        backend,
        replica,
        correct: 0,
        wrong: 0,
        failed: 0,
        state: 'ok',
        s: 0,
        r: 0,
        alarmed: false,
        b: 0,
        belowBaseline: false,
        referenceError: null,
        lastGoodAt: null,
        quarantinedAt: null,
        recent: [],
        baseline: { n: 0, wrong: 0 },
      };
      byKey.set(key, rec);
      const list = byBackend.get(backend) ?? [];
      list.push(rec);
      byBackend.set(backend, list);
    }
    return rec;
  };
  for (const { backend, replicas } of options.fleet) for (const r of replicas) record(backend, r);

  const peers = (rec: ReplicaRecord): ReplicaRecord[] =>
    (byBackend.get(rec.backend) ?? []).filter((p) => p !== rec);

  const referenceError = (rec: ReplicaRecord): number => {
    let n = 0;
    let wrong = 0;
    for (const p of peers(rec)) {
      if (p.state === 'quarantined') continue;
      n += p.recent.length;
      for (const w of p.recent) if (w) wrong += 1;
    }
    if (n === 0) {
      n = rec.baseline.n;
      wrong = rec.baseline.wrong;
    }
    return (wrong + 1) / (n + 2);
  };

  /** Room to quarantine `rec` without it looking like a fleet-wide drop. */
  const mayQuarantine = (rec: ReplicaRecord): boolean => {
    const others = peers(rec);
    const all = others.length + 1;
    if (all < 2) return false;
    const quarantined = others.filter((p) => p.state === 'quarantined').length;
    const healthy = others.filter((p) => p.state === 'ok').length;
    const serving = others.filter((p) => p.state !== 'quarantined');
    const below = serving.filter((p) => p.belowBaseline).length;
    return (
      quarantined + 1 <= Math.floor(all / 2) && healthy * 2 > others.length && below * 2 < serving.length
    );
  };

  /** The replica against its own baseline (tested before this canary joins the baseline). */
  const observeBaseline = (rec: ReplicaRecord, wrong: boolean): void => {
    const { q0, q1 } = hypotheses((rec.baseline.wrong + 1) / (rec.baseline.n + 2), options);
    rec.b = alarmStep(rec.b, canaryLlr(wrong, q0, q1));
    if (rec.b >= h) rec.belowBaseline = true;
    else if (rec.b === 0) rec.belowBaseline = false;
  };

  /** A majority of a backend's serving replicas (or its lone one) below their own baselines. */
  const fleetDrop = (): boolean => {
    for (const list of byBackend.values()) {
      const serving = list.filter((r) => r.state !== 'quarantined');
      const below = serving.filter((r) => r.belowBaseline).length;
      if (below > 0 && below * 2 > serving.length) return true;
    }
    return false;
  };

  const observe = (rec: ReplicaRecord, wrong: boolean, at: number, out: Transition[]): void => {
    observeBaseline(rec, wrong);
    const ref = referenceError(rec);
    const { q0, q1 } = hypotheses(ref, options);
    const llr = canaryLlr(wrong, q0, q1);
    rec.referenceError = ref;
    if (wrong) rec.wrong += 1;
    else rec.correct += 1;
    rec.recent.push(wrong);
    if (rec.recent.length > options.window) rec.recent.shift();
    if (rec.baseline.n < options.window) {
      rec.baseline.n += 1;
      if (wrong) rec.baseline.wrong += 1;
    }
    if (rec.state === 'quarantined') {
      rec.r = releaseStep(rec.r, llr);
      if (rec.r >= h) {
        rec.state = 'ok';
        rec.s = 0;
        rec.r = 0;
        rec.alarmed = false;
        rec.quarantinedAt = null;
        rec.lastGoodAt = at;
        out.push({ kind: 'released', record: rec });
      }
      return;
    }
    rec.s = alarmStep(rec.s, llr);
    if (rec.s === 0) {
      rec.lastGoodAt = at;
      out.push({ kind: 'good', record: rec });
    }
    rec.alarmed = rec.s >= h;
    if (rec.alarmed && mayQuarantine(rec)) {
      rec.state = 'quarantined';
      rec.quarantinedAt = at;
      rec.r = 0;
      out.push({ kind: 'quarantined', record: rec });
    } else {
      rec.state = rec.s >= h / 2 ? 'watching' : 'ok';
    }
  };

  const member = (m: CanaryEvent['members'][number], label: Verdict): void => {
    const key = `${replicaKey(m.backend, m.replica)}\u0000${m.node}\u0000${m.role}`;
    let rec = members.get(key);
    if (rec === undefined) {
      rec = {
        node: m.node,
        role: m.role,
        backend: m.backend,
        replica: m.replica,
        positives: { n: 0, correct: 0 },
        negatives: { n: 0, correct: 0 },
      };
      members.set(key, rec);
    }
    const side = label === 'match' ? rec.positives : rec.negatives;
    side.n += 1;
    if (m.stance === label) side.correct += 1;
  };

  return {
    apply(event) {
      events += 1;
      const out: Transition[] = [];
      for (const pin of event.pins) {
        const rec = record(pin.backend, pin.replica);
        if (event.outcome === 'failed') rec.failed += 1;
        else observe(rec, event.outcome === 'wrong', event.at, out);
      }
      if (event.outcome !== 'failed') for (const m of event.members) member(m, event.label);
      const alert = fleetDrop() || [...byKey.values()].some((r) => r.alarmed && r.state !== 'quarantined');
      if (alert !== fleetAlert) {
        fleetAlert = alert;
        out.push({ kind: 'fleet_alert', alert, records: [...byKey.values()].filter((r) => r.alarmed) });
      }
      return out;
    },
    replicas: () => [...byKey.values()],
    members: () => [...members.values()],
    get fleetAlert() {
      return fleetAlert;
    },
    get events() {
      return events;
    },
  };
}
