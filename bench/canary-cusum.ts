/**
 * Simulates reward integrity during a run with the real parts — the canary ledger (per-replica CUSUM and the
 * pooled fleet test), the canary schedule (turns, doubt, the boost) and the audits' per-replica evidence —
 * in the time of computed real judgments, and prints the table of docs/integrity.md: false quarantines and
 * fleet alerts of a healthy fleet, and the detection delays of drifting judges (ramps, steps, whole-fleet
 * drops early and late, a replica wrong only on long candidates).
 *
 *   npx tsx bench/canary-cusum.ts [--seeds N] [--q 0.05,0.16] [--only NAME,…] [--boost B]
 *     [--fleet-threshold H] [--doubt-share D] [--floor F] [--json]
 *   npx tsx bench/canary-cusum.ts --oracle [--q 0.05,0.16]   (the bound of any pooled CUSUM: `oracle`)
 *
 * Model: R replicas of one backend; each computed real judgment goes to a serving (not quarantined)
 * replica at random, ticks the canary schedule and, with probability AUDIT_RATE, is audited. A canary's
 * replica is the schedule's; a replica errs on a canary with its error rate at that moment, independently of
 * the label (a long row with its long-candidate rate); an audit disagrees when exactly one of the first
 * judgment and the audit graph (error `auditError`) is wrong. test/server/canary-cusum.test.ts runs the
 * same scenarios on fewer seeds against the documented bounds.
 */
import { createRng } from '../src/math/sampling.js';
import { exactInterval } from '../src/math/binomial.js';
import { createAuditEvidence, type AuditEvidence } from '../src/server/integrity/audit.js';
import {
  createCanaryLedger,
  DOUBT_SHARE,
  type CanaryEvent,
  type CanaryLedger,
  type Transition,
} from '../src/server/integrity/canary-ledger.js';
import { createCanarySchedule, doubtOf, type Doubt } from '../src/server/integrity/canary-schedule.js';
import { alarmStep, canaryLlr } from '../src/judge/sequential-test.js';

/** A replica's error rate at judgment t on an item (long = a long candidate). */
export type ErrorModel = (replica: number, t: number, long: boolean) => number;

export interface SimulationOptions {
  replicas: number;
  /** CANARY_RATE and CANARY_BOOST. */
  rate: number;
  boost: number;
  margin: number;
  threshold: number;
  floor: number;
  window: number;
  fleetThreshold: number;
  /** A replica is in doubt from S ≥ doubtShare × h (the ledger's DOUBT_SHARE). */
  doubtShare: number;
  /** Pooled canaries frozen as the fleet reference (without `referenceRows`). */
  referenceSize: number;
  /** A file reference: this many rows judged offline at the healthy error (drawn per run); 0 = frozen. */
  referenceRows: number;
  /** The healthy error rate (the file reference's offline rate). */
  q: number;
  error: ErrorModel;
  /** Share of long rows in the canary set and of long candidates in real traffic. */
  longCanaries: number;
  longTraffic: number;
  auditRate: number;
  /** The audit graph's own error rate. */
  auditError: number;
  judgments: number;
  seed: number;
  /** Stop at the first quarantine of replica 0 after this judgment (detection runs); undefined = run on. */
  stopOnBadAfter?: number | undefined;
  /** Stop at the first fleet alert after this judgment (and count the pooled canaries from it). */
  stopOnAlertAfter?: number | undefined;
}

export interface SimulationResult {
  /** Judgment at which each replica was quarantined, in order. */
  quarantines: Array<{ replica: number; t: number }>;
  /** Fleet alerts raised by the pooled test: judgment and pooled canaries tested so far. */
  fleetAlerts: Array<{ t: number; pooled: number }>;
  canaries: number;
  targeted: number;
  /** Pooled canaries the fleet test had tested when the run ended, and at `stopOnAlertAfter`. */
  pooled: number;
  pooledAtDrift: number;
  judgments: number;
}

const BACKEND = 'b';

function createWorld(o: SimulationOptions) {
  const rng = createRng(o.seed);
  const names = Array.from({ length: o.replicas }, (_, i) => `r${i}`);
  let fileReference: { n: number; wrong: number } | undefined;
  if (o.referenceRows > 0) {
    let wrong = 0;
    for (let i = 0; i < o.referenceRows; i++) if (rng() < o.q) wrong += 1;
    fileReference = { n: o.referenceRows, wrong };
  }
  const ledger: CanaryLedger = createCanaryLedger({
    margin: o.margin,
    threshold: o.threshold,
    floor: o.floor,
    window: o.window,
    fleet: [{ backend: BACKEND, replicas: names }],
    fleetTest: { threshold: o.fleetThreshold, reference: fileReference, referenceSize: o.referenceSize },
    doubtShare: o.doubtShare,
  });
  const audits: AuditEvidence = createAuditEvidence({
    margin: o.margin,
    threshold: o.threshold,
    floor: o.floor,
    window: o.window,
  });
  const schedule = createCanarySchedule({
    rate: o.rate,
    boost: o.boost,
    backends: () => [{ name: BACKEND, replicas: names }],
  });
  return { rng, names, ledger, audits, schedule };
}

/** One simulated run. */
export function simulate(o: SimulationOptions): SimulationResult {
  const { rng, names, ledger, audits, schedule } = createWorld(o);
  const result: SimulationResult = {
    quarantines: [],
    fleetAlerts: [],
    canaries: 0,
    targeted: 0,
    pooled: 0,
    pooledAtDrift: 0,
    judgments: 0,
  };
  const quarantined = new Set<number>();
  let doubt: Doubt = doubtOf(ledger.replicas(), 'collecting', []);
  const refresh = (): void => {
    doubt = doubtOf(ledger.replicas(), ledger.fleet().state, audits.suspects());
  };
  const onTransition = (tr: Transition, t: number): boolean => {
    if (tr.kind === 'quarantined' || tr.kind === 'released') {
      const i = names.indexOf(tr.record.replica);
      if (tr.kind === 'released') quarantined.delete(i);
      else {
        quarantined.add(i);
        result.quarantines.push({ replica: i, t });
        if (i === 0 && o.stopOnBadAfter !== undefined && t >= o.stopOnBadAfter) return true;
      }
    }
    if (tr.kind === 'fleet_test' && tr.alarmed) {
      result.fleetAlerts.push({ t, pooled: tr.fleet.tested });
      if (o.stopOnAlertAfter !== undefined && t >= o.stopOnAlertAfter) return true;
    }
    return false;
  };
  for (let t = 0; t < o.judgments; t++) {
    result.judgments = t + 1;
    if (t === o.stopOnAlertAfter) result.pooledAtDrift = ledger.fleet().tested;
    if (o.auditRate > 0 && rng() < o.auditRate) {
      const serving = names.map((_, i) => i).filter((i) => !quarantined.has(i));
      const j = serving[Math.floor(rng() * serving.length)] ?? 0;
      const long = rng() < o.longTraffic;
      const firstWrong = rng() < o.error(j, t, long);
      const auditWrong = rng() < o.auditError;
      audits.observe([{ backend: BACKEND, replica: `r${j}` }], firstWrong !== auditWrong);
      refresh();
    }
    schedule.tick(doubt);
    for (let planned = schedule.next(doubt); planned !== undefined; planned = schedule.next(doubt)) {
      const replica = names.indexOf(planned.pins.get(BACKEND) ?? '');
      const label = rng() < 0.5 ? 'match' : 'no_match';
      const wrong = rng() < o.error(replica, t, rng() < o.longCanaries);
      const event: CanaryEvent = {
        at: t,
        row: 'r',
        label,
        verdict: wrong ? (label === 'match' ? 'no_match' : 'match') : label,
        outcome: wrong ? 'wrong' : 'correct',
        pins: [{ backend: BACKEND, replica: `r${replica}` }],
        members: [],
        ...(planned.targeted ? { targeted: true } : {}),
      };
      result.canaries += 1;
      if (planned.targeted) result.targeted += 1;
      let stop = false;
      for (const tr of ledger.apply(event)) stop = onTransition(tr, t) || stop;
      refresh();
      if (stop) {
        result.pooled = ledger.fleet().tested;
        return result;
      }
    }
  }
  result.pooled = ledger.fleet().tested;
  return result;
}

/** The defaults of docs/integrity.md's table: 4 replicas at CANARY_RATE 0.05, the server's defaults. */
export const DEFAULTS: Omit<SimulationOptions, 'error' | 'judgments' | 'seed'> = {
  replicas: 4,
  rate: 0.05,
  boost: 3,
  margin: 0.2,
  threshold: 10,
  floor: 0.05,
  window: 200,
  fleetThreshold: 9,
  doubtShare: DOUBT_SHARE,
  referenceSize: 400,
  referenceRows: 0,
  q: 0.16,
  longCanaries: 0,
  longTraffic: 0,
  auditRate: 0,
  auditError: 0.1,
};

/** When the drift starts: after a warm-up past the frozen reference (400 pooled canaries = 8 000 judgments). */
export const DRIFT_AT = 20_000;

/** Replica 0's error: q + `step` at DRIFT_AT, another `step` every `every` judgments, up to q + `max`. */
export const ramp =
  (q: number, step: number, every: number, max: number): ErrorModel =>
  (replica, t) =>
    replica !== 0 || t < DRIFT_AT
      ? q
      : Math.min(q + max, q + step * (1 + Math.floor((t - DRIFT_AT) / every)));

/** The judgment at which a ramp first puts replica 0 at least `gap` below the fleet. */
export const crossing = (step: number, every: number, gap: number): number =>
  DRIFT_AT + (Math.ceil(gap / step - 1e-9) - 1) * every;

export interface Scenario {
  name: string;
  /** What the row measures. */
  kind: 'healthy' | 'replica' | 'fleet';
  options: Partial<SimulationOptions> & { error: ErrorModel; judgments: number };
  /** Replica scenarios: the judgment from which the delay counts (the gap reaches 0.2); fleet: the drop. */
  from?: number;
}

/** The scenarios of the table at healthy error q. */
export function scenarios(q: number): Scenario[] {
  const healthy: ErrorModel = () => q;
  const slow = crossing(0.05, 256, 0.2);
  const fast = crossing(0.05, 32, 0.2);
  const step = (size: number): Scenario => ({
    name: `step −${size}`,
    kind: 'replica',
    options: { error: ramp(q, size, 1, size), judgments: DRIFT_AT + 40_000 },
    from: DRIFT_AT,
  });
  const fleetDrop = (at: number, file: boolean, size = 0.2): Scenario => ({
    name: `fleet −${size} at ${at}${file ? ', file reference' : ''}`,
    kind: 'fleet',
    options: {
      error: (_r, t) => (t >= at ? q + size : q),
      judgments: at + 40_000,
      referenceRows: file ? 400 : 0,
    },
    from: at,
  });
  const longOnly = (longCanaries: number, auditRate: number): Scenario => ({
    name: `long candidates only (${longCanaries * 100} % of canaries)${auditRate > 0 ? `, audits ${auditRate}` : ''}`,
    kind: 'replica',
    options: {
      error: (r, t, long) => (r === 0 && t >= DRIFT_AT && long ? 0.9 : q),
      judgments: DRIFT_AT + 60_000,
      longCanaries,
      longTraffic: 0.3,
      auditRate,
    },
    from: DRIFT_AT,
  });
  return [
    { name: 'healthy', kind: 'healthy', options: { error: healthy, judgments: 400_000 } },
    {
      name: 'healthy, file reference',
      kind: 'healthy',
      options: { error: healthy, judgments: 400_000, referenceRows: 400 },
    },
    {
      name: 'healthy, audits 0.02',
      kind: 'healthy',
      options: { error: healthy, judgments: 400_000, auditRate: 0.02, longTraffic: 0.3 },
    },
    {
      name: 'slow ramp to −0.25',
      kind: 'replica',
      options: { error: ramp(q, 0.05, 256, 0.25), judgments: slow + 40_000 },
      from: slow,
    },
    {
      name: 'slow ramp to error 0.5',
      kind: 'replica',
      options: { error: ramp(q, 0.05, 256, 0.5 - q), judgments: slow + 40_000 },
      from: slow,
    },
    {
      name: 'fast ramp to −0.25',
      kind: 'replica',
      options: { error: ramp(q, 0.05, 32, 0.25), judgments: fast + 40_000 },
      from: fast,
    },
    step(0.2),
    step(0.3),
    step(0.5),
    fleetDrop(2_000, true),
    fleetDrop(2_000, false),
    fleetDrop(100_000, false),
    fleetDrop(100_000, true),
    // The issue's rollout: accuracy 0.84 → ~0.57 everywhere at once.
    fleetDrop(100_000, false, 0.27),
    longOnly(0.25, 0),
    longOnly(0.25, 0.02),
    longOnly(0.1, 0),
    longOnly(0.1, 0.02),
  ];
}

export interface Row {
  scenario: string;
  q: number;
  runs: number;
  /** Healthy: quarantines and pooled-test fleet alerts, per 10⁶ judgments and per 10⁵ pooled canaries. */
  falseQuarantines?: number;
  falseAlerts?: number;
  judgments?: number;
  pooled?: number;
  canaries?: number;
  /** Detection: runs detected within the target (4 096 judgments; fleet: 60 pooled canaries), and delays. */
  withinTarget?: number;
  delays?: number[];
  pooledDelays?: number[];
  /** Detection runs with a false quarantine of a healthy replica (or, fleet, any quarantine). */
  otherQuarantines?: number;
}

/** Runs one scenario `runs` times (seeds 1..runs, offset by the scenario). */
export function measure(s: Scenario, q: number, runs: number, base = DEFAULTS): Row {
  const row: Row = { scenario: s.name, q, runs };
  const delays: number[] = [];
  const pooledDelays: number[] = [];
  let falseQ = 0;
  let falseA = 0;
  let judgments = 0;
  let pooled = 0;
  let canaries = 0;
  let other = 0;
  for (let seed = 1; seed <= runs; seed++) {
    const from = s.from ?? 0;
    const r = simulate({
      ...base,
      q,
      ...s.options,
      seed: seed * 7919 + s.name.length * 104_729,
      stopOnBadAfter: s.kind === 'replica' ? from : undefined,
      stopOnAlertAfter: s.kind === 'fleet' ? from : undefined,
    });
    judgments += r.judgments;
    pooled += r.pooled;
    canaries += r.canaries;
    if (s.kind === 'healthy') {
      falseQ += r.quarantines.length;
      falseA += r.fleetAlerts.length;
      continue;
    }
    if (s.kind === 'replica') {
      const bad = r.quarantines.find((x) => x.replica === 0 && x.t >= from - 4096);
      delays.push(bad === undefined ? Infinity : Math.max(0, bad.t - from));
      if (r.quarantines.some((x) => x.replica !== 0)) other += 1;
      continue;
    }
    const alert = r.fleetAlerts.find((a) => a.t >= from);
    delays.push(alert === undefined ? Infinity : alert.t - from);
    const before = r.fleetAlerts.filter((a) => a.t < from).length;
    falseA += before;
    // Pooled canaries after the drop: the fleet test's count at the alert minus its count at the drop.
    pooledDelays.push(alert === undefined ? Infinity : alert.pooled - r.pooledAtDrift);
    if (r.quarantines.length > 0) other += 1;
  }
  if (s.kind === 'healthy') {
    Object.assign(row, { falseQuarantines: falseQ, falseAlerts: falseA, judgments, pooled, canaries });
    return row;
  }
  const sorted = delays.sort((a, b) => a - b);
  const sortedPooled = pooledDelays.sort((a, b) => a - b);
  row.delays = sorted;
  row.otherQuarantines = other;
  if (s.kind === 'replica') row.withinTarget = sorted.filter((d) => d <= 4096).length;
  else {
    row.pooledDelays = sortedPooled;
    row.withinTarget = sortedPooled.filter((d) => d <= 60).length;
    row.falseAlerts = falseA;
  }
  return row;
}

const pct = (sorted: readonly number[], p: number): number =>
  sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? NaN;

export interface OracleRow {
  q: number;
  threshold: number;
  /** False alarms per 10⁵ healthy canaries (restarted after each). */
  falseAlarms: number;
  /** Share of drops of `drop` alerted within 60 canaries, and the p95 delay in canaries. */
  within60: number;
  p95: number;
}

/**
 * The best a CUSUM on the pooled canaries can do: the reference known exactly (no estimate, no guard), H1
 * tuned to the drop, outcomes independent. Its false alarms per 10⁵ canaries and its delays for a drop of
 * `drop` bound what any threshold of the fleet test can reach (docs/integrity.md, "the fleet test").
 */
export function oracle(
  q: number,
  threshold: number,
  drop: number,
  canaries: number,
  runs: number,
  seed = 1,
): OracleRow {
  const rng = createRng(seed);
  const q1 = q + drop;
  let s = 0;
  let alarms = 0;
  for (let i = 0; i < canaries; i++) {
    s = alarmStep(s, canaryLlr(rng() < q, q, q1));
    if (s >= threshold) {
      alarms += 1;
      s = 0;
    }
  }
  const delays: number[] = [];
  for (let r = 0; r < runs; r++) {
    // From the healthy statistic's stationary state: 500 healthy canaries first (restarted at an alarm).
    s = 0;
    for (let i = 0; i < 500; i++) {
      s = alarmStep(s, canaryLlr(rng() < q, q, q1));
      if (s >= threshold) s = 0;
    }
    let d = 0;
    while (s < threshold && d < 10_000) {
      d += 1;
      s = alarmStep(s, canaryLlr(rng() < q1, q, q1));
    }
    delays.push(d);
  }
  delays.sort((a, b) => a - b);
  return {
    q,
    threshold,
    falseAlarms: (alarms / canaries) * 1e5,
    within60: delays.filter((d) => d <= 60).length / runs,
    p95: pct(delays, 0.95),
  };
}

const fmt = (x: number): string => (Number.isFinite(x) ? String(Math.round(x)) : 'never');

const ci = (x: number, n: number): string => {
  const i = exactInterval(x, n);
  return `[${((i.lo ?? 0) * 100).toFixed(0)}, ${((i.hi ?? 0) * 100).toFixed(0)}] %`;
};

/** A rate per `per` with its exact 95 % interval (the count is Poisson; Clopper–Pearson on n trials). */
const perUnit = (count: number, trials: number, per: number): string => {
  const i = exactInterval(count, Math.max(1, Math.round(trials)));
  return `${count} (${((count / trials) * per).toFixed(2)}; ≤ ${((i.hi ?? 0) * per).toFixed(2)})`;
};

/** A markdown row of the table. */
export function render(row: Row): string {
  if (row.falseQuarantines !== undefined) {
    // Per replica and 10⁴ of its canaries (the unit of the table before the fleet test): each canary is one
    // replica's, so that is quarantines over all canaries.
    const perReplica = (row.falseQuarantines / Math.max(1, row.canaries ?? 0)) * 1e4;
    return `| ${row.scenario} | ${row.q} | ${row.runs} × ${fmt((row.judgments ?? 0) / row.runs)} | false quarantines ${perUnit(row.falseQuarantines, row.judgments ?? 0, 1e6)} per 10⁶ judgments = ${perReplica.toFixed(3)} per 10⁴ canaries per replica | false fleet alerts ${perUnit(row.falseAlerts ?? 0, row.pooled ?? 0, 1e5)} per 10⁵ pooled canaries | canaries per judgment ${((row.canaries ?? 0) / (row.judgments ?? 1)).toFixed(4)} |`;
  }
  const d = row.delays ?? [];
  const within = row.withinTarget ?? 0;
  const target = row.pooledDelays === undefined ? '≤ 4 096 judgments' : '≤ 60 pooled canaries';
  const pooled =
    row.pooledDelays === undefined
      ? ''
      : `; pooled canaries p50 ${fmt(pct(row.pooledDelays, 0.5))}, p95 ${fmt(pct(row.pooledDelays, 0.95))}`;
  return `| ${row.scenario} | ${row.q} | ${row.runs} | ${target}: ${within}/${row.runs} ${ci(within, row.runs)} | judgments p50 ${fmt(pct(d, 0.5))}, p95 ${fmt(pct(d, 0.95))}, max ${fmt(d[d.length - 1] ?? NaN)}${pooled} | ${row.otherQuarantines ?? 0} |`;
}

function main(): void {
  const arg = (name: string): string | undefined => {
    const i = process.argv.indexOf(`--${name}`);
    return i > 0 ? process.argv[i + 1] : undefined;
  };
  const seeds = Number(arg('seeds') ?? 100);
  const only = arg('only')?.split(',');
  const qs = (arg('q') ?? '0.05,0.16').split(',').map(Number);
  const base = {
    ...DEFAULTS,
    boost: Number(arg('boost') ?? DEFAULTS.boost),
    fleetThreshold: Number(arg('fleet-threshold') ?? DEFAULTS.fleetThreshold),
    doubtShare: Number(arg('doubt-share') ?? DEFAULTS.doubtShare),
    floor: Number(arg('floor') ?? DEFAULTS.floor),
  };
  const json = process.argv.includes('--json');
  if (process.argv.includes('--oracle')) {
    for (const q of qs) {
      for (const h of [5, 7, 9, 11]) {
        const o = oracle(q, h, 0.2, 20_000_000, 4000);
        process.stdout.write(
          json
            ? `${JSON.stringify(o)}\n`
            : `| ${q} | ${h} | ${o.falseAlarms.toFixed(2)} | ${(o.within60 * 100).toFixed(1)} % | ${o.p95} |\n`,
        );
      }
    }
    return;
  }
  const lines: string[] = [];
  for (const q of qs) {
    for (const s of scenarios(q)) {
      if (only !== undefined && !only.some((o) => s.name.startsWith(o))) continue;
      // Healthy runs are 400 000 judgments each: a quarter of the seeds gives 10⁸ judgments at 100.
      const row = measure(s, q, s.kind === 'healthy' ? Math.max(1, seeds) : seeds, base);
      lines.push(json ? JSON.stringify(row) : render(row));
      process.stdout.write(`${lines[lines.length - 1] ?? ''}\n`);
    }
  }
}

if (process.argv[1]?.endsWith('canary-cusum.ts') === true) main();
