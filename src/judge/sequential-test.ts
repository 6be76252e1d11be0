/**
 * The sequential tests behind replica quarantine, the fleet alert and audit suspicion: Bernoulli CUSUMs
 * (Page 1954). Pure functions; the canary ledger (`server/integrity/canary-ledger.ts`) and the auditor keep
 * the state and the references.
 *
 * H0: the error rate is q0, the reference (floored); H1: it is q1 = q0 + margin. Each outcome adds its
 * log-likelihood ratio — ln(q1/q0) when wrong, ln((1−q1)/(1−q0)) when right — to S = max(0, S + llr);
 * S ≥ h raises the alarm. Once alarmed, the mirror statistic R = max(0, R − llr) collects evidence for H0
 * and R ≥ h clears the alarm. The false-alarm rate per outcome and the detection delay for a given h are
 * simulated (`bench/canary-cusum.ts`; numbers in docs/integrity.md).
 *
 * A reference estimated from n outcomes is itself uncertain, and a reference that came out low by chance
 * makes every later error look damning. `guardedError` therefore tests against the upper end of the
 * one-sided `REFERENCE_CONFIDENCE` (90 %) Clopper–Pearson interval of the reference's error rate: with
 * probability ≥ 0.9 over the reference draw the true rate is at most q0, and the false-alarm rate at a
 * true rate below q0 is lower than the simulated one at q0.
 */
import { betaQuantile } from '../math/beta.js';

export interface SequentialTestOptions {
  /** Accuracy drop to detect: q1 = q0 + margin. */
  margin: number;
  /** The alarm (and release) threshold h on the log-likelihood-ratio statistic. */
  threshold: number;
  /** Lowest reference error rate q0 (a perfect fleet would make any single error infinitely damning). */
  floor: number;
}

/** One-sided confidence of the guarded reference (`guardedError`). */
export const REFERENCE_CONFIDENCE = 0.9;

/** q0 and q1 for a reference error rate (floored; q1 capped below 1). */
export function hypotheses(
  referenceError: number,
  options: SequentialTestOptions,
): { q0: number; q1: number } {
  const q0 = Math.min(0.9, Math.max(options.floor, referenceError));
  return { q0, q1: Math.min(0.99, q0 + options.margin) };
}

/**
 * The error rate to test against for a reference of `wrong` errors in `n` outcomes: the upper bound of
 * the one-sided `REFERENCE_CONFIDENCE` Clopper–Pearson interval (the 0.9 quantile of Beta(wrong + 1,
 * n − wrong)); 1 for n = 0 (no reference). The caller floors it (`hypotheses`).
 */
export function guardedError(wrong: number, n: number): number {
  if (n <= 0 || wrong >= n) return 1;
  // A quantile costs ~100 µs of bisection and the counts repeat (every canary asks for its peers' window).
  const key = `${wrong}/${n}`;
  const known = guarded.get(key);
  if (known !== undefined) return known;
  const q = betaQuantile(REFERENCE_CONFIDENCE, wrong + 1, n - wrong);
  if (guarded.size >= MAX_GUARDED) guarded.clear();
  guarded.set(key, q);
  return q;
}

const guarded = new Map<string, number>();
/** Distinct (wrong, n) pairs kept (a window of 200 on 4 replicas has at most ~180 000; most never occur). */
const MAX_GUARDED = 20_000;

/** The log-likelihood ratio of one canary (H1 over H0). */
export function canaryLlr(wrong: boolean, q0: number, q1: number): number {
  return wrong ? Math.log(q1 / q0) : Math.log((1 - q1) / (1 - q0));
}

/** One CUSUM step towards the alarm: max(0, s + llr). */
export function alarmStep(s: number, llr: number): number {
  return Math.max(0, s + llr);
}

/** One CUSUM step towards release (evidence for H0): max(0, r − llr). */
export function releaseStep(r: number, llr: number): number {
  return Math.max(0, r - llr);
}

/** A CUSUM that alarms at S ≥ h and clears when its mirror R reaches h (the fleet test, audit suspicion). */
export interface CusumState {
  s: number;
  r: number;
  alarmed: boolean;
}

export const newCusum = (): CusumState => ({ s: 0, r: 0, alarmed: false });

/**
 * Applies one outcome's llr to `state` in place; says whether it raised (`alarm`) or cleared (`clear`)
 * the alarm, else null.
 */
export function cusumStep(state: CusumState, llr: number, h: number): 'alarm' | 'clear' | null {
  if (state.alarmed) {
    state.r = releaseStep(state.r, llr);
    if (state.r < h) return null;
    state.alarmed = false;
    state.s = 0;
    state.r = 0;
    return 'clear';
  }
  state.s = alarmStep(state.s, llr);
  if (state.s < h) return null;
  state.alarmed = true;
  state.r = 0;
  return 'alarm';
}
