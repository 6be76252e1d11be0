/**
 * The canary record: every canary outcome per replica and per committee member, the sequential test that
 * quarantines a replica, and the fleet-level test on the pooled canaries of every replica. A deterministic
 * state machine over the ordered canary events, so every server process that applies the same log
 * (REDIS_URL: one Redis stream, `state/canary-log.ts`) reaches the same states, whichever process ran the
 * canary. Failed canaries (a judge error, a timeout) are counted but are no evidence: errors are the circuit
 * breaker's business.
 *
 * Per replica (backend + replica label): a Bernoulli CUSUM (`judge/sequential-test.ts`) on its canary errors
 * against a reference error q0 = the pooled error rate of the last `window` canaries of the same backend's
 * other replicas that are not quarantined (Laplace-smoothed, floored at `floor`): it finds one replica worse
 * than its peers. A replica without serving peers has no such test (the fleet test covers it). S ≥ h
 * quarantines the replica while more than half of the backend's other replicas are `ok`, fewer than half
 * of its replicas are quarantined and the fleet without it is at its reference (below); otherwise it stays
 * `watching` and the fleet alert is raised. A
 * quarantined replica keeps receiving canaries; the mirror statistic R ≥ h releases it. States: `ok`
 * (S < h/2), `watching` (h/2 ≤ S, or alarmed without room to quarantine), `quarantined`.
 *
 * The fleet: one CUSUM on the pooled canaries of every replica (each canary once, whatever it was pinned
 * to) against a reference that does not move with the fleet — the judge's offline accuracy on the canary
 * set (CANARY_REFERENCE), or else the fleet's first `referenceSize` pooled canaries, frozen. A whole-fleet
 * drop (a chat template or model build rolled out everywhere) moves every replica's peers with it, so only
 * this test sees it. The reference's own uncertainty is accounted for by testing against the upper end of
 * its one-sided 90 % interval (`guardedError`). Canaries aimed at a replica under doubt (`targeted`) and
 * canaries of a quarantined replica are left out of the pool: it measures the fleet as it serves. Per
 * replica the same test runs on every canary of the other serving replicas, aimed ones included
 * (leave-one-out): while it is above a quarter of its threshold the replica is not quarantined — its peers
 * dropped too. The fleet
 * alert is on while this test is alarmed (cleared by its mirror statistic) or while a replica is alarmed
 * without room to quarantine it; a fleet-wide drop is alerted, never routed around.
 */
import type { Verdict } from '../../judge/types.js';
import {
  alarmStep,
  canaryLlr,
  cusumStep,
  guardedError,
  hypotheses,
  newCusum,
  releaseStep,
  type CusumState,
  type SequentialTestOptions,
} from '../../judge/sequential-test.js';

export type CanaryOutcome = 'correct' | 'wrong' | 'failed';
export type ReplicaIntegrityState = 'ok' | 'watching' | 'quarantined';
export type FleetState = 'collecting' | 'ok' | 'watching' | 'alarmed';

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
  /** Aimed at a replica under doubt (beyond its turn): not in the pooled fleet test. Absent = false. */
  targeted?: boolean | undefined;
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
  /** Not quarantined and S ≥ DOUBT_SHARE × h (watching included): more canaries go to it. */
  doubted: boolean;
  /** The reference error q0 the last canary was tested against; null before any (no serving peer). */
  referenceError: number | null;
  /** Epoch ms of the last canary that left S at 0 (no evidence against the replica). */
  lastGoodAt: number | null;
  quarantinedAt: number | null;
  /** Last `window` outcomes (true = wrong), oldest first, and how many of them are wrong. */
  recent: boolean[];
  recentWrong: number;
}

/** The reference of the fleet test: n decided canaries, `wrong` of them wrong. */
export interface FleetReference {
  source: 'file' | 'frozen';
  n: number;
  wrong: number;
}

export interface FleetRecord {
  /** Null while the first `referenceSize` pooled canaries are collected (no file reference). */
  reference: FleetReference | null;
  /** The pooled canaries collected so far towards a frozen reference. */
  collected: { n: number; wrong: number };
  /** The error rates tested (q0: the guarded reference, floored; q1 = q0 + margin); null while collecting. */
  q0: number | null;
  q1: number | null;
  cusum: CusumState;
  /** Pooled canaries tested against the reference, and the wrong ones among them. */
  tested: number;
  wrong: number;
  state: FleetState;
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
  /** The first `referenceSize` pooled canaries became the fleet reference. */
  | { kind: 'reference_frozen'; reference: FleetReference }
  /** The pooled fleet test alarmed (a fleet-wide drop) or cleared. */
  | { kind: 'fleet_test'; alarmed: boolean; fleet: FleetRecord }
  | { kind: 'fleet_alert'; alert: boolean; records: ReplicaRecord[]; fleet: FleetRecord };

export interface FleetTestOptions {
  /** The fleet CUSUM's threshold (its margin and floor are the replicas'). */
  threshold: number;
  /** CANARY_REFERENCE (n and wrong over the canary rows); undefined = freeze the first canaries. */
  reference?: { n: number; wrong: number } | undefined;
  /** Pooled canaries frozen as the reference without a file. */
  referenceSize: number;
}

export interface LedgerOptions extends SequentialTestOptions {
  /** Canaries per replica in the peers' reference window. */
  window: number;
  /** Known replicas per backend (more are added as events name them). */
  fleet: ReadonlyArray<{ backend: string; replicas: readonly string[] }>;
  fleetTest: FleetTestOptions;
  /** S ≥ this × h puts a replica in doubt (default DOUBT_SHARE; the simulation varies it). */
  doubtShare?: number | undefined;
}

export interface CanaryLedger {
  /** Applies one event in log order; returns the state changes it caused. */
  apply(event: CanaryEvent): Transition[];
  /**
   * Takes a frozen reference another process stored first (REDIS_URL), so every process tests against
   * the same one. Ignored with a file reference.
   */
  adoptReference(reference: FleetReference): void;
  replicas(): ReplicaRecord[];
  members(): MemberRecord[];
  fleet(): FleetRecord;
  readonly fleetAlert: boolean;
  readonly events: number;
}

const replicaKey = (backend: string, replica: string): string => `${backend}\u0000${replica}`;

/**
 * A replica is in doubt (more canaries: `canary-schedule.ts`) from S ≥ DOUBT_SHARE × h, long before it is
 * `watching` (h/2): about two wrong canaries more than its peers' rate predicts. Chosen by simulation
 * (`bench/canary-cusum.ts`): at 0.15 a slow ramp is caught in time in ≥ 95 % of runs while a healthy fleet
 * runs about 17 % more canaries than CANARY_RATE; at 0.5 (watching) the ramp is missed in 1 run of 10.
 */
export const DOUBT_SHARE = 0.15;

/** The leave-one-out statistic above which a replica's peers are taken to have dropped too (÷ its h). */
const PEERS_DROPPED_SHARE = 1 / 8;

/**
 * The pooled fleet test: collects its reference (unless given), then a CUSUM against it. Beside it, per
 * replica, the same CUSUM on the pooled canaries of every other replica (leave-one-out): a replica is
 * quarantined only while the rest of the fleet, without it, is at its reference (so a whole-fleet drop,
 * which moves every replica's peers too, is alerted and not routed around).
 */
function createFleetTest(options: LedgerOptions): {
  record: FleetRecord;
  /** A decided canary not run on a quarantined replica; `pooled` = not aimed at a doubted one either. */
  observe(wrong: boolean, pinned: readonly string[], pooled: boolean): Transition[];
  /** The others of `replica` (key), pooled, are watching or alarmed. */
  othersInDoubt(replica: string): boolean;
  adopt(reference: FleetReference): void;
} {
  const { fleetTest } = options;
  const h = fleetTest.threshold;
  const test = { margin: options.margin, threshold: h, floor: options.floor };
  const record: FleetRecord = {
    reference: fleetTest.reference === undefined ? null : { source: 'file', ...fleetTest.reference },
    collected: { n: 0, wrong: 0 },
    q0: null,
    q1: null,
    cusum: newCusum(),
    tested: 0,
    wrong: 0,
    state: 'collecting',
  };
  const leaveOneOut = new Map<string, CusumState>();
  const setReference = (reference: FleetReference): void => {
    record.reference = reference;
    const { q0, q1 } = hypotheses(guardedError(reference.wrong, reference.n), test);
    record.q0 = q0;
    record.q1 = q1;
    if (record.state === 'collecting') record.state = 'ok';
  };
  if (record.reference !== null) setReference(record.reference);
  return {
    record,
    observe(wrong, pinned, pooled) {
      const { reference, q0, q1 } = record;
      if (reference !== null && q0 !== null && q1 !== null) {
        // Leave-one-out: every canary counts against the replicas it was not run on, aimed ones included
        // (a doubted replica's canaries say how the others are doing).
        const llr = canaryLlr(wrong, q0, q1);
        for (const k of pinned) if (!leaveOneOut.has(k)) leaveOneOut.set(k, newCusum());
        for (const [k, state] of leaveOneOut) if (!pinned.includes(k)) cusumStep(state, llr, h);
      }
      if (!pooled) return [];
      if (reference === null || q0 === null || q1 === null) {
        record.collected.n += 1;
        if (wrong) record.collected.wrong += 1;
        if (record.collected.n < fleetTest.referenceSize) return [];
        const frozen: FleetReference = { source: 'frozen', ...record.collected };
        setReference(frozen);
        return [{ kind: 'reference_frozen', reference: frozen }];
      }
      record.tested += 1;
      if (wrong) record.wrong += 1;
      const changed = cusumStep(record.cusum, canaryLlr(wrong, q0, q1), h);
      record.state = record.cusum.alarmed ? 'alarmed' : record.cusum.s >= h / 2 ? 'watching' : 'ok';
      return changed === null ? [] : [{ kind: 'fleet_test', alarmed: changed === 'alarm', fleet: record }];
    },
    othersInDoubt(replica) {
      const state = leaveOneOut.get(replica);
      return state !== undefined && (state.alarmed || state.s >= h * PEERS_DROPPED_SHARE);
    },
    adopt(reference) {
      if (record.reference?.source === 'file') return;
      if (record.reference?.n === reference.n && record.reference.wrong === reference.wrong) return;
      setReference({ source: 'frozen', n: reference.n, wrong: reference.wrong });
    },
  };
}

/** Every replica's record by key and by backend; unknown replicas are added as events name them. */
function createReplicaBook(fleet: LedgerOptions['fleet']) {
  const byKey = new Map<string, ReplicaRecord>();
  const byBackend = new Map<string, ReplicaRecord[]>();
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
        doubted: false,
        referenceError: null,
        lastGoodAt: null,
        quarantinedAt: null,
        recent: [],
        recentWrong: 0,
      };
      byKey.set(key, rec);
      const list = byBackend.get(backend) ?? [];
      list.push(rec);
      byBackend.set(backend, list);
    }
    return rec;
  };
  for (const { backend, replicas } of fleet) for (const r of replicas) record(backend, r);
  return {
    record,
    /** The same backend's other replicas. */
    peers: (rec: ReplicaRecord): ReplicaRecord[] =>
      (byBackend.get(rec.backend) ?? []).filter((p) => p !== rec),
    all: (): ReplicaRecord[] => [...byKey.values()],
  };
}

type ReplicaBook = ReturnType<typeof createReplicaBook>;

/** Per committee member (node, role, replica): its stances on canaries against their labels (TPR, TNR). */
function createMemberBook() {
  const members = new Map<string, MemberRecord>();
  return {
    observe(m: CanaryEvent['members'][number], label: Verdict): void {
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
    },
    all: (): MemberRecord[] => [...members.values()],
  };
}

/**
 * The per-replica sequential test against its serving peers: S towards quarantine (when there is room for
 * it), R towards release while quarantined, and the doubt that steers canaries to it.
 */
function createReplicaTest(
  options: LedgerOptions,
  book: ReplicaBook,
  fleet: ReturnType<typeof createFleetTest>,
): (rec: ReplicaRecord, wrong: boolean, at: number, out: Transition[]) => void {
  const h = options.threshold;
  const doubtShare = options.doubtShare ?? DOUBT_SHARE;

  /**
   * The serving peers' recent error rate, guarded like the fleet's (the upper end of its one-sided 90 %
   * interval: a few peer canaries are an uncertain reference); undefined without a serving peer's canary.
   */
  const referenceError = (rec: ReplicaRecord): number | undefined => {
    let n = 0;
    let wrong = 0;
    for (const p of book.peers(rec)) {
      if (p.state === 'quarantined') continue;
      n += p.recent.length;
      wrong += p.recentWrong;
    }
    return n === 0 ? undefined : guardedError(wrong, n);
  };

  /**
   * Room to quarantine `rec` without it looking like a fleet-wide drop: more than half of its peers `ok`,
   * fewer than half of the backend quarantined, and the rest of the fleet without it at its reference.
   */
  const mayQuarantine = (rec: ReplicaRecord): boolean => {
    const others = book.peers(rec);
    const all = others.length + 1;
    if (all < 2) return false;
    const quarantined = others.filter((p) => p.state === 'quarantined').length;
    const healthy = others.filter((p) => p.state === 'ok').length;
    return (
      quarantined + 1 <= Math.floor(all / 2) &&
      healthy * 2 > others.length &&
      !fleet.othersInDoubt(replicaKey(rec.backend, rec.replica))
    );
  };

  const remember = (rec: ReplicaRecord, wrong: boolean): void => {
    if (wrong) rec.wrong += 1;
    else rec.correct += 1;
    rec.recent.push(wrong);
    if (wrong) rec.recentWrong += 1;
    if (rec.recent.length > options.window && rec.recent.shift() === true) rec.recentWrong -= 1;
  };

  const release = (rec: ReplicaRecord, llr: number, at: number, out: Transition[]): void => {
    rec.r = releaseStep(rec.r, llr);
    if (rec.r < h) return;
    rec.state = 'ok';
    rec.s = 0;
    rec.r = 0;
    rec.alarmed = false;
    rec.doubted = false;
    rec.quarantinedAt = null;
    rec.lastGoodAt = at;
    out.push({ kind: 'released', record: rec });
  };

  return (rec, wrong, at, out) => {
    const ref = referenceError(rec);
    remember(rec, wrong);
    if (ref === undefined) return;
    const { q0, q1 } = hypotheses(ref, options);
    const llr = canaryLlr(wrong, q0, q1);
    rec.referenceError = ref;
    if (rec.state === 'quarantined') {
      release(rec, llr, at, out);
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
      rec.doubted = false;
      out.push({ kind: 'quarantined', record: rec });
    } else {
      rec.state = rec.alarmed || rec.s >= h / 2 ? 'watching' : 'ok';
      rec.doubted = rec.s >= h * doubtShare;
    }
  };
}

export function createCanaryLedger(options: LedgerOptions): CanaryLedger {
  const book = createReplicaBook(options.fleet);
  const members = createMemberBook();
  const fleet = createFleetTest(options);
  const observe = createReplicaTest(options, book, fleet);
  let fleetAlert = false;
  let events = 0;

  return {
    apply(event) {
      events += 1;
      const out: Transition[] = [];
      const recs = event.pins.map((pin) => book.record(pin.backend, pin.replica));
      if (event.outcome === 'failed') {
        for (const rec of recs) rec.failed += 1;
      } else {
        const wrong = event.outcome === 'wrong';
        // Pooled as the fleet serves: not aimed at a doubted replica, not run on a quarantined one.
        const serving = recs.every((r) => r.state !== 'quarantined');
        for (const rec of recs) observe(rec, wrong, event.at, out);
        const keys = event.pins.map((p) => replicaKey(p.backend, p.replica));
        if (serving) out.push(...fleet.observe(wrong, keys, event.targeted !== true));
        for (const m of event.members) members.observe(m, event.label);
      }
      const all = book.all();
      const alert = fleet.record.cusum.alarmed || all.some((r) => r.alarmed && r.state !== 'quarantined');
      if (alert !== fleetAlert) {
        fleetAlert = alert;
        out.push({ kind: 'fleet_alert', alert, records: all.filter((r) => r.alarmed), fleet: fleet.record });
      }
      return out;
    },
    adoptReference: (reference) => fleet.adopt(reference),
    replicas: () => book.all(),
    members: () => members.all(),
    fleet: () => fleet.record,
    get fleetAlert() {
      return fleetAlert;
    },
    get events() {
      return events;
    },
  };
}
