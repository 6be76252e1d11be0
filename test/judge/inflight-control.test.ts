/**
 * The in-flight control law (src/judge/inflight-control.ts), driven by hand: engine readings from a
 * scripted scraper, attempt samples with a scripted event-loop lag, a manual clock.
 */
import { describe, expect, it } from 'vitest';

import type { EngineReading, EngineScraper, ScrapeState } from '../../src/judge/engine-metrics.js';
import {
  createInflightControl,
  GAUGE_MIN_OURS,
  GAUGE_STRIKES,
  INITIAL,
  TOLERANCE,
  WINDOW_MS,
  WINDOW_SAMPLES,
  type ControlLoad,
} from '../../src/judge/inflight-control.js';

function scriptedScraper(clock: { t: number }) {
  let state: ScrapeState = 'probing';
  let latest: EngineReading | undefined;
  const listeners: Array<(r: EngineReading | undefined) => void> = [];
  const scraper: EngineScraper = {
    url: 'http://engine/metrics',
    get state() {
      return state;
    },
    get kind() {
      return latest?.kind;
    },
    fresh: () => (latest !== undefined && clock.t - latest.at <= 1000 ? latest : undefined),
    subscribe: (l) => listeners.push(l),
    close: async () => {},
  };
  return {
    scraper,
    /** One reading of the engine (requested 10 ms before `at`, after the control's last change). */
    read(running: number, waiting: number, extra: Partial<EngineReading> = {}) {
      clock.t += 100;
      state = 'engine';
      latest = {
        kind: 'vllm',
        running,
        waiting,
        kvUsage: 0.3,
        queueTime: undefined,
        requestedAt: clock.t - 10,
        at: clock.t,
        ...extra,
      };
      for (const l of listeners) l(latest);
    },
    none() {
      state = 'none';
      for (const l of listeners) l(undefined);
    },
  };
}

function setup(options: { ceiling?: number; lag?: number; metrics?: boolean } = {}) {
  const clock = { t: 1_000_000 };
  const engine = scriptedScraper(clock);
  const load: ControlLoad = { inflight: 0, waiting: 0 };
  let raised = 0;
  const lag = { ms: options.lag ?? 0 };
  const control = createInflightControl({
    ceiling: options.ceiling ?? 256,
    scraper: options.metrics === false ? undefined : engine.scraper,
    lagMs: () => lag.ms,
    now: () => clock.t,
  });
  control.attach(
    () => load,
    () => (raised += 1),
  );
  /** Our calls: all the limit allows in flight, `queued` more waiting for a slot. */
  const demand = (queued: number): void => {
    load.inflight = control.limit;
    load.waiting = queued;
  };
  return { clock, engine, load, control, demand, lag, raised: () => raised };
}

describe('the engine law', () => {
  it('starts at INITIAL, doubles while the engine queues nothing, and settles at its batch + headroom once it queues', () => {
    const { engine, control, demand } = setup();
    expect(control.limit).toBe(INITIAL);
    demand(500);
    engine.read(16, 0);
    expect(control.limit).toBe(32);
    demand(500);
    engine.read(32, 0);
    expect(control.limit).toBe(64);
    // An engine of 48 slots: 16 of our 64 wait in its queue, at two readings in a row.
    demand(500);
    engine.read(48, 16);
    expect(control.limit).toBe(64);
    engine.read(48, 16);
    // 48 + ⌈0.1 × 48⌉ = 53.
    expect(control.limit).toBe(53);
    expect(control.snapshot().capacity).toEqual({ calls: 48, known: true });
    expect(control.snapshot().saturated).toBe(true);
  });

  it('takes a queue seen once, or a shallow one, for a transient: no capacity, no decrease', () => {
    const { engine, control, demand } = setup();
    demand(500);
    engine.read(16, 0);
    expect(control.limit).toBe(32);
    demand(500);
    // Requests that arrived mid-step: a queue at one reading, gone at the next, the batch grown.
    engine.read(20, 12);
    engine.read(31, 0);
    expect(control.snapshot().capacity.known).toBe(false);
    expect(control.limit).toBe(64);
    // Two in a row, but only 2 deep (the headroom's depth): still no evidence.
    engine.read(30, 2);
    engine.read(30, 2);
    expect(control.snapshot().capacity.known).toBe(false);
  });

  it('takes a lasting queue whose requests barely waited (vLLM histogram) for step boundaries', () => {
    const { engine, control, demand } = setup();
    demand(500);
    // A recent call took 200 ms; requests left the queue after 5 ms each.
    control.observe({ sentAt: 0, headersAt: 150, endedAt: 200, result: 'ok', kind: 'analyst' });
    engine.read(20, 8, { queueTime: { sumS: 0, count: 0 } });
    engine.read(20, 8, { queueTime: { sumS: 0.05, count: 10 } });
    expect(control.snapshot().capacity.known).toBe(false);
    // Now they waited 100 ms each (half a call): a full batch.
    engine.read(20, 8, { queueTime: { sumS: 1.05, count: 20 } });
    expect(control.snapshot().capacity).toEqual({ calls: 20, known: true });
  });

  it('keeps to its share when others send to the same engine', () => {
    const { engine, control, demand, load } = setup();
    demand(500);
    engine.read(16, 0);
    demand(500);
    engine.read(32, 0);
    // 64 of ours in flight; the engine runs 32 and queues 96: we hold 64 of its 128.
    load.inflight = 64;
    engine.read(32, 96);
    engine.read(32, 96);
    // (32 + 4) × 64 / 128 = 18.
    expect(control.limit).toBe(18);
  });

  it('grows by the headroom once the queue is empty, not while the KV cache is full', () => {
    const { engine, control, demand } = setup();
    demand(500);
    engine.read(16, 0);
    demand(500);
    engine.read(16, 16);
    engine.read(16, 16);
    expect(control.limit).toBe(18);
    demand(500);
    engine.read(16, 0, { kvUsage: 0.97 });
    expect(control.limit).toBe(18);
    engine.read(16, 1);
    expect(control.limit).toBe(18);
    engine.read(16, 0);
    expect(control.limit).toBe(20);
  });

  it('does not grow while many of our calls are not at the engine yet (a busy machine’s transit)', () => {
    const { engine, control, demand } = setup();
    demand(500);
    engine.read(16, 0);
    expect(control.limit).toBe(32);
    demand(500);
    // 32 of ours in flight, 12 at the engine: the batch has room, our calls are on the wire.
    engine.read(12, 0);
    expect(control.limit).toBe(32);
    engine.read(31, 0);
    expect(control.limit).toBe(64);
  });

  it('does not grow for an idle replica, and tells the limiter when it rises', () => {
    const { engine, control, demand, load, raised } = setup();
    load.inflight = 3;
    load.waiting = 0;
    engine.read(3, 0);
    expect(control.limit).toBe(INITIAL);
    demand(10);
    engine.read(16, 0);
    expect(control.limit).toBe(32);
    expect(raised()).toBe(1);
  });

  it('goes to the ceiling and the gradient when the URL publishes no engine metrics', () => {
    const { engine, control } = setup({ ceiling: 100 });
    expect(control.limit).toBe(INITIAL);
    engine.none();
    expect(control.limit).toBe(100);
    expect(control.law).toBe('gradient');
    expect(control.snapshot().capacity).toEqual({ calls: 100, known: true });
  });
});

describe('the gradient law', () => {
  /** `n` attempts of `kind` whose headers came `rttMs` after sending, spread over more than a window. */
  function attempts(ctl: ReturnType<typeof setup>, n: number, rttMs: number, kind = 'analyst'): void {
    for (let i = 0; i < n; i++) {
      ctl.clock.t += Math.ceil(WINDOW_MS / WINDOW_SAMPLES) + 1;
      const sentAt = ctl.clock.t - rttMs - 20;
      ctl.control.observe({ sentAt, headersAt: sentAt + rttMs, endedAt: ctl.clock.t, result: 'ok', kind });
    }
  }

  it('starts at the ceiling and cuts the limit when headers come TOLERANCE × later than the baseline', () => {
    const ctl = setup({ ceiling: 128, metrics: false });
    expect(ctl.control.limit).toBe(128);
    // The first sets the baseline, the next WINDOW_SAMPLES make a window.
    attempts(ctl, WINDOW_SAMPLES + 1, 100);
    expect(ctl.control.limit).toBe(128);
    attempts(ctl, WINDOW_SAMPLES, 100 * TOLERANCE * 2);
    // Ratio 4: × max(0.5, 2 / 4).
    expect(ctl.control.limit).toBe(64);
  });

  it('ignores latency measured while this process’s event loop lagged', () => {
    const ctl = setup({ ceiling: 128, metrics: false });
    attempts(ctl, WINDOW_SAMPLES, 100);
    ctl.lag.ms = 300;
    attempts(ctl, 5 * WINDOW_SAMPLES, 100 * TOLERANCE * 3);
    expect(ctl.control.limit).toBe(128);
  });

  it('compares each kind of call with its own baseline (a long analysis is not a queued verdict)', () => {
    const ctl = setup({ ceiling: 128, metrics: false });
    attempts(ctl, WINDOW_SAMPLES, 50, 'evaluator');
    attempts(ctl, WINDOW_SAMPLES, 400, 'analyst');
    attempts(ctl, 3 * WINDOW_SAMPLES, 420, 'analyst');
    attempts(ctl, 3 * WINDOW_SAMPLES, 55, 'evaluator');
    expect(ctl.control.limit).toBe(128);
  });

  it('grows by √limit while calls wait for a slot and latency holds', () => {
    const ctl = setup({ ceiling: 128, metrics: false });
    attempts(ctl, WINDOW_SAMPLES + 1, 100);
    attempts(ctl, WINDOW_SAMPLES, 100 * TOLERANCE * 2);
    expect(ctl.control.limit).toBe(64);
    ctl.demand(100);
    attempts(ctl, WINDOW_SAMPLES, 110);
    expect(ctl.control.limit).toBe(72);
  });

  it('steers with the gradient while the engine’s readings are stale', () => {
    const ctl = setup({ ceiling: 128 });
    ctl.demand(500);
    ctl.engine.read(16, 0);
    expect(ctl.control.law).toBe('engine');
    ctl.clock.t += 5_000;
    expect(ctl.control.law).toBe('gradient');
    expect(ctl.control.snapshot().saturated).toBe(false);
  });
});

describe('the rate the engine has shown (for the capacity estimate)', () => {
  it("is Little's law over recent attempts: the engine's load when each was sent over its latency", () => {
    const { clock, engine, control } = setup();
    engine.read(8, 8); // load 16 (batch 8 + queue 8)
    const sample = (sentAt: number, ms: number) =>
      control.observe({
        sentAt,
        headersAt: sentAt + ms,
        endedAt: sentAt + ms,
        result: 'ok',
        kind: 'analyst',
      });
    // Sent after that reading and before the next: its load is the lower of the two.
    const sent = clock.t + 5;
    engine.read(8, 8);
    for (let i = 0; i < 3; i++) sample(sent, 400);
    // Three attempts are no rate yet.
    expect(control.snapshot().shown?.callsPerS).toBeUndefined();
    sample(sent, 400);
    // 16 calls ahead, 0.4 s each: 40 calls/s. The engine queued at two readings (its capacity is 8), but
    // 4 attempts that ran at it are too few for its rate at capacity; 8 make it.
    expect(control.snapshot().shown).toMatchObject({ callsPerS: 40, load: 16, fullCallsPerS: undefined });
    for (let i = 0; i < 4; i++) sample(sent, 400);
    expect(control.snapshot().capacity).toEqual({ calls: 8, known: true });
    expect(control.snapshot().shown).toMatchObject({ callsPerS: 40, fullCallsPerS: 40 });
  });

  it('keeps to attempts under the most load it was given, and leaves out those it cannot place', () => {
    const { clock, engine, control } = setup();
    const sample = (sentAt: number, ms: number) =>
      control.observe({
        sentAt,
        headersAt: sentAt + ms,
        endedAt: sentAt + ms,
        result: 'ok',
        kind: 'analyst',
      });
    // Sent before any reading: unknown load, not counted.
    sample(clock.t - 50, 100);
    // Unloaded probes: a load of 1, 0.1 s each (10 calls/s: the rate of one sequence, not of a batch).
    for (let i = 0; i < 4; i++) {
      engine.read(1, 0);
      const sent = clock.t + 5;
      engine.read(1, 0);
      sample(sent, 100);
    }
    expect(control.snapshot().shown).toMatchObject({ callsPerS: 10, load: 1 });
    // Then a burst: a load of 12, 0.3 s each. The probes are below half of it and leave the rate.
    for (let i = 0; i < 4; i++) {
      engine.read(8, 4);
      const sent = clock.t + 5;
      engine.read(8, 4);
      sample(sent, 300);
    }
    expect(control.snapshot().shown).toMatchObject({ callsPerS: 40, load: 12 });
  });
});

describe('a gauge that contradicts our own in-flight count (issue 38 item 10)', () => {
  it('is distrusted after GAUGE_STRIKES readings of fewer calls than we hold: gradient law, capacity from the limit', () => {
    const { engine, control, demand } = setup();
    demand(500); // 16 of ours in flight, 500 more waiting
    for (let i = 0; i < GAUGE_STRIKES - 1; i++) engine.read(0, 0);
    expect(control.snapshot().gauge).toBe('trusted');
    engine.read(0, 0);
    const snapshot = control.snapshot();
    expect(snapshot).toMatchObject({ gauge: 'distrusted', law: 'gradient', metrics: false });
    // As without metrics: the limit goes to the ceiling and the gradient steers it from there; the
    // capacity is the limit, not the lying batch of 0 (which made it 1).
    expect(control.limit).toBe(256);
    expect(snapshot.capacity).toEqual({ calls: 256, known: true });
    expect(control.law).toBe('gradient');
  });

  it('believes a gauge that shows more than we hold (other clients only add load), or about what we hold', () => {
    const { engine, control, demand } = setup();
    for (let i = 0; i < 6; i++) {
      demand(500);
      engine.read(control.limit + 40, 10); // another client's load on top of ours
    }
    expect(control.snapshot().gauge).toBe('trusted');
    const honest = setup();
    for (let i = 0; i < 6; i++) {
      honest.demand(500);
      // A few of ours still on the wire: within the slack.
      honest.engine.read(Math.max(0, honest.control.limit - 3), 0);
    }
    expect(honest.control.snapshot().gauge).toBe('trusted');
    expect(honest.control.law).toBe('engine');
  });

  it('does not judge a gauge while we hold fewer than GAUGE_MIN_OURS calls', () => {
    const { engine, control, load } = setup();
    load.inflight = GAUGE_MIN_OURS - 1;
    for (let i = 0; i < 10; i++) engine.read(0, 0);
    expect(control.snapshot().gauge).toBe('trusted');
  });

  it('trusts the gauge again after GAUGE_STRIKES readings that agree with us', () => {
    const { engine, control, demand, load } = setup();
    demand(500);
    for (let i = 0; i < GAUGE_STRIKES; i++) engine.read(0, 0);
    expect(control.snapshot().gauge).toBe('distrusted');
    load.inflight = 100;
    for (let i = 0; i < GAUGE_STRIKES - 1; i++) engine.read(100, 0);
    expect(control.snapshot().gauge).toBe('distrusted');
    engine.read(100, 0);
    expect(control.snapshot()).toMatchObject({ gauge: 'trusted', law: 'engine', metrics: true });
  });
});
