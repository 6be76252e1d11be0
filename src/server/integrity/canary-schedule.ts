/**
 * Where the canaries go and how many are due: pure and deterministic, shared by the canary runner and the
 * simulation (`bench/canary-cusum.ts`).
 *
 * Turns: CANARY_RATE canaries per computed real judgment in turn over the replicas, canary n taking the
 * n-th combination of replicas (mixed radix over the graph's backends, so with a routing file every
 * combination comes round), the rows advancing once per round of combinations.
 *
 * Doubt: while a replica is under doubt (its CUSUM is rising: `doubted`, or the audits make it suspect) or the
 * pooled fleet statistic is watching, the rate rises to the ceiling `boost` × CANARY_RATE. The extra
 * canaries go in threes to the doubted replicas in turn: two aimed (`targeted`) at the replica, one at one
 * of its peers (every other backend of the graph takes them in its own rotation); when only the fleet is in
 * doubt they are more turns. Once the doubt is gone (cleared, or the replica quarantined) the rate falls
 * back to CANARY_RATE. With 4 replicas at the default ceiling 3 a doubted replica gets 0.25 + 1.33 = 1.58 ×
 * CANARY_RATE, six times its turn share.
 */

export interface ScheduleBackend {
  name: string;
  /** Replica labels (the backend's name when it has none). */
  replicas: readonly string[];
}

export interface DoubtedReplica {
  backend: string;
  replica: string;
}

export interface Doubt {
  /** Replicas under doubt (watching, or suspect by the audits), none of them quarantined. */
  replicas: readonly DoubtedReplica[];
  /** The pooled fleet statistic is watching or alarmed. */
  fleet: boolean;
}

export const NO_DOUBT: Doubt = { replicas: [], fleet: false };

export interface PlannedCanary {
  /** The row slot: the runner takes row `order[slot % rows]`. */
  slot: number;
  /** Backend name → replica label. */
  pins: Map<string, string>;
  targeted: boolean;
}

export interface ReplicaShare {
  backend: string;
  replica: string;
  /** Share of the backend's current canaries pinned to this replica (the backend's shares sum to 1). */
  share: number;
}

export interface ScheduleOptions {
  /** CANARY_RATE: canaries per computed real judgment. */
  rate: number;
  /** CANARY_BOOST: the rate's ceiling under doubt, as a multiple of `rate` (≥ 1; 1 = no boost). */
  boost: number;
  /** The graph's backends and their replicas, in node order. */
  backends(): readonly ScheduleBackend[];
}

export interface CanarySchedule {
  /** Canaries per computed real judgment under `doubt`: `rate`, or `boost` × `rate` while in doubt. */
  rate(doubt: Doubt): number;
  /** Each replica's share of the current canaries. */
  shares(doubt: Doubt): ReplicaShare[];
  /** One computed real judgment: its canaries join what is due. */
  tick(doubt: Doubt): void;
  /** Whole canaries due. */
  readonly due: number;
  /** Drops up to `n` due canaries (the runner's skipped ones), extra ones first; returns how many. */
  skip(n: number): number;
  /** Takes the next due canary off `due`; undefined when none is due. */
  next(doubt: Doubt): PlannedCanary | undefined;
}

const inDoubt = (doubt: Doubt): boolean => doubt.fleet || doubt.replicas.length > 0;

export function createCanarySchedule(options: ScheduleOptions): CanarySchedule {
  const extraRate = options.rate * (Math.max(1, options.boost) - 1);
  let baseDue = 0;
  let extraDue = 0;
  let turn = 0;
  let targetedTurn = 0;
  let targetedSlot = 0;
  let peerTurn = 0;
  let otherTurn = 0;

  const combinations = (backends: readonly ScheduleBackend[]): number =>
    backends.reduce((n, b) => n * Math.max(1, b.replicas.length), 1);

  /** The replica per backend for combination `n`: mixed radix over the backends. */
  const pinsFor = (backends: readonly ScheduleBackend[], n: number): Map<string, string> => {
    const pins = new Map<string, string>();
    let rest = n;
    for (const b of backends) {
      const count = Math.max(1, b.replicas.length);
      pins.set(b.name, b.replicas[rest % count] ?? b.name);
      rest = Math.floor(rest / count);
    }
    return pins;
  };

  const nextTurn = (): PlannedCanary => {
    const backends = options.backends();
    const combos = combinations(backends);
    const planned = {
      slot: Math.floor(turn / combos),
      pins: pinsFor(backends, turn % combos),
      targeted: false,
    };
    turn += 1;
    return planned;
  };

  /**
   * Extra canaries, in threes: two aimed at a doubted replica, one at one of its peers in turn. The peers'
   * third keeps the comparison balanced: the pooled canaries without the doubted replica (the ledger's
   * leave-one-out test, which must see a whole-fleet drop before a replica is quarantined for it) grow
   * about as fast as the doubted replica's own (4 replicas: 0.75 + 0.67 against 0.25 + 1.33 × the rate).
   */
  const nextTargeted = (doubted: readonly DoubtedReplica[]): PlannedCanary => {
    const triple = Math.floor(targetedTurn / 3);
    const target = doubted[triple % doubted.length];
    const backends = options.backends();
    const home = backends.find((b) => b.name === target?.backend);
    const peers = home?.replicas.filter((r) => r !== target?.replica) ?? [];
    const aimed = targetedTurn % 3 !== 2 || peers.length === 0;
    const replica = aimed ? target?.replica : peers[peerTurn++ % peers.length];
    // The other backends take their own rotation (a counter of their own, so they still all come round).
    const others = backends.filter((b) => b.name !== target?.backend);
    const pins = pinsFor(others, otherTurn++);
    if (target !== undefined && replica !== undefined) pins.set(target.backend, replica);
    const ordered = new Map<string, string>();
    for (const b of backends) ordered.set(b.name, pins.get(b.name) ?? b.name);
    targetedTurn += 1;
    targetedSlot += 1;
    return { slot: targetedSlot - 1, pins: ordered, targeted: aimed };
  };

  /** A replica's share of the extra canaries of one doubted replica (`part` of them). */
  const extraShare = (b: ScheduleBackend, replica: string, d: DoubtedReplica, part: number): number => {
    const count = Math.max(1, b.replicas.length);
    if (d.backend !== b.name) return part / count;
    if (count === 1) return replica === d.replica ? part : 0;
    return replica === d.replica ? (part * 2) / 3 : part / 3 / (count - 1);
  };

  return {
    rate: (doubt) => options.rate + (inDoubt(doubt) ? extraRate : 0),
    shares(doubt) {
      const total = this.rate(doubt);
      const extra = inDoubt(doubt) ? extraRate : 0;
      const doubted = doubt.replicas;
      const out: ReplicaShare[] = [];
      for (const b of options.backends()) {
        const labels = b.replicas.length === 0 ? [b.name] : b.replicas;
        for (const replica of labels) {
          // With only the fleet in doubt, the extra canaries are more turns.
          let rate = (options.rate + (doubted.length === 0 ? extra : 0)) / labels.length;
          for (const d of doubted) rate += extraShare(b, replica, d, extra / doubted.length);
          out.push({ backend: b.name, replica, share: total > 0 ? rate / total : 0 });
        }
      }
      return out;
    },
    tick(doubt) {
      if (options.rate <= 0) return;
      baseDue += options.rate;
      if (inDoubt(doubt)) extraDue += extraRate;
      else if (extraDue < 0) {
        // A canary borrowed from the extra pool when the doubt ended is owed by the turns.
        baseDue += extraDue;
        extraDue = 0;
      }
    },
    get due() {
      return Math.max(0, Math.floor(baseDue + extraDue + 1e-9));
    },
    skip(n) {
      let left = Math.max(0, Math.floor(n));
      const fromExtra = Math.min(left, Math.max(0, Math.floor(extraDue + 1e-9)));
      extraDue -= fromExtra;
      left -= fromExtra;
      const fromBase = Math.min(left, Math.max(0, Math.floor(baseDue + extraDue + 1e-9)));
      baseDue -= fromBase;
      return fromExtra + fromBase;
    },
    next(doubt) {
      if (baseDue + extraDue < 1 - 1e-9) return undefined;
      // Whichever pool owes more goes first, so extra canaries interleave with the turns (a pool may lend
      // the other up to one canary).
      if (extraDue > 0 && extraDue >= baseDue) {
        extraDue -= 1;
        return doubt.replicas.length > 0 ? nextTargeted(doubt.replicas) : nextTurn();
      }
      baseDue -= 1;
      return nextTurn();
    },
  };
}

/**
 * The doubt the ledger and the audits raise: replicas the ledger has in doubt (`doubted`: its CUSUM is
 * rising) or the audits make suspect, none of them quarantined, and whether the pooled fleet statistic is
 * watching or alarmed.
 */
export function doubtOf(
  replicas: ReadonlyArray<{ backend: string; replica: string; state: string; doubted: boolean }>,
  fleetState: string,
  suspects: readonly DoubtedReplica[],
): Doubt {
  const k = (r: DoubtedReplica): string => `${r.backend}\u0000${r.replica}`;
  const known = new Map(replicas.map((r) => [k(r), r]));
  const doubted = new Map<string, DoubtedReplica>();
  for (const r of replicas) if (r.doubted) doubted.set(k(r), r);
  for (const r of suspects) {
    const rec = known.get(k(r));
    if (rec !== undefined && rec.state !== 'quarantined') doubted.set(k(r), rec);
  }
  return {
    replicas: [...doubted.values()].map((r) => ({ backend: r.backend, replica: r.replica })),
    fleet: fleetState === 'watching' || fleetState === 'alarmed',
  };
}
