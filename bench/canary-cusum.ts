/**
 * Simulates the canary quarantine test (src/server/integrity/canary-ledger.ts, the real state machine) and prints the
 * numbers of docs/integrity.md: false alarms per 10 000 canaries per healthy replica, and the detection
 * delay of a replica switched to always `match`. `npx tsx bench/canary-cusum.ts [--seeds N] [--h H]`.
 *
 * Model: R replicas of one backend take canaries in turn; a healthy replica errs with probability q
 * independently of the label; an always-`match` replica errs exactly on the `no_match` canaries (share 1 − π
 * of the set). Test test/server/canary-cusum.test.ts runs `simulate` with fewer seeds against the same bounds.
 */
import { createRng } from '../src/math/sampling.js';
import { createCanaryLedger, type CanaryEvent } from '../src/server/integrity/canary-ledger.js';

export interface SimulationOptions {
  replicas: number;
  /** Healthy error rate. */
  q: number;
  /** Share of `match` labels in the canary set. */
  positives: number;
  margin: number;
  threshold: number;
  floor: number;
  window: number;
  seed: number;
}

function event(replica: number, label: 'match' | 'no_match', wrong: boolean): CanaryEvent {
  const other = label === 'match' ? 'no_match' : 'match';
  return {
    at: 0,
    row: 'r',
    label,
    verdict: wrong ? other : label,
    outcome: wrong ? 'wrong' : 'correct',
    pins: [{ backend: 'b', replica: `r${replica}` }],
    members: [],
  };
}

const ledgerFor = (o: SimulationOptions) =>
  createCanaryLedger({
    margin: o.margin,
    threshold: o.threshold,
    floor: o.floor,
    window: o.window,
    fleet: [{ backend: 'b', replicas: Array.from({ length: o.replicas }, (_, i) => `r${i}`) }],
  });

/** Quarantines and fleet alerts raised over `perReplica` canaries on each of `replicas` healthy replicas. */
export function falseAlarms(
  o: SimulationOptions,
  perReplica: number,
): { quarantines: number; alerts: number } {
  const rng = createRng(o.seed);
  const ledger = ledgerFor(o);
  let quarantines = 0;
  let alerts = 0;
  for (let i = 0; i < perReplica * o.replicas; i++) {
    const label = rng() < o.positives ? 'match' : 'no_match';
    for (const t of ledger.apply(event(i % o.replicas, label, rng() < o.q))) {
      if (t.kind === 'quarantined') quarantines += 1;
      if (t.kind === 'fleet_alert' && t.alert) alerts += 1;
    }
  }
  return { quarantines, alerts };
}

/**
 * Canaries on replica 0 from its switch to always `match` (after `warmup` healthy canaries per replica)
 * until it is quarantined (counting the canary that did it); Infinity when not within `limit`.
 */
export function detectionDelay(o: SimulationOptions, warmup: number, limit = 10_000): number {
  const rng = createRng(o.seed);
  const ledger = ledgerFor(o);
  let onBad = 0;
  for (let i = 0; i < (warmup + limit) * o.replicas; i++) {
    const replica = i % o.replicas;
    const label = rng() < o.positives ? 'match' : 'no_match';
    const switched = i >= warmup * o.replicas;
    const bad = switched && replica === 0;
    const wrong = bad ? label === 'no_match' : rng() < o.q;
    if (bad) onBad += 1;
    ledger.apply(event(replica, label, wrong));
    // Out of routing counts, also when a false alarm during the warm-up had already put it there.
    if (bad && ledger.replicas()[0]?.state === 'quarantined') return onBad;
  }
  return Infinity;
}

const percentile = (sorted: number[], p: number): number =>
  sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? NaN;

function main(): void {
  const seedsArg = process.argv.indexOf('--seeds');
  const seeds = seedsArg > 0 ? Number(process.argv[seedsArg + 1]) : 20;
  const hArg = process.argv.indexOf('--h');
  const threshold = hArg > 0 ? Number(process.argv[hArg + 1]) : 10;
  const base = { replicas: 4, positives: 0.5, margin: 0.2, threshold, floor: 0.05, window: 200, seed: 1 };
  const rows: string[] = [];
  for (const q of [0.05, 0.1, 0.2, 0.3]) {
    let quarantines = 0;
    let alerts = 0;
    const delays: number[] = [];
    for (let seed = 1; seed <= seeds; seed++) {
      const fa = falseAlarms({ ...base, q, seed }, 10_000);
      quarantines += fa.quarantines;
      alerts += fa.alerts;
      delays.push(detectionDelay({ ...base, q, seed: seed + 1000 }, 100));
    }
    delays.sort((a, b) => a - b);
    const mean = delays.reduce((a, b) => a + b, 0) / delays.length;
    rows.push(
      `| ${q} | ${(quarantines / (seeds * base.replicas)).toFixed(3)} | ${(alerts / (seeds * base.replicas)).toFixed(3)} | ` +
        `${mean.toFixed(1)} | ${percentile(delays, 0.95)} | ${delays[delays.length - 1]} |`,
    );
  }
  process.stdout.write(
    `${seeds} seeds; 4 replicas; 10 000 canaries per replica per seed; margin ${base.margin}, h ${base.threshold}, floor ${base.floor}, window ${base.window}\n` +
      '| healthy error q | false quarantines / 10 000 canaries / replica | fleet alerts / 10 000 / replica | delay mean (canaries on the bad replica) | p95 | max |\n' +
      '|---|---|---|---|---|---|\n' +
      `${rows.join('\n')}\n`,
  );
}

if (process.argv[1]?.endsWith('canary-cusum.ts') === true) main();
