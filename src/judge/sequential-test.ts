/**
 * The sequential test behind replica quarantine: a Bernoulli CUSUM (Page 1954) on a replica's canary
 * errors. Pure functions; the canary ledger (`server/integrity/canary-ledger.ts`) keeps the state and the reference.
 *
 * H0: the replica's canary error rate is q0, the reference (its fleet's, floored); H1: it is q1 = q0 + margin.
 * Each canary adds its log-likelihood ratio — ln(q1/q0) when wrong, ln((1−q1)/(1−q0)) when right — to
 * S = max(0, S + llr); S ≥ h raises the alarm. Once quarantined, the mirror statistic R = max(0, R − llr)
 * collects evidence for H0 and R ≥ h releases the replica. The false-alarm rate per canary and the detection
 * delay for a given h are simulated (`bench/canary-cusum.ts`; numbers in docs/integrity.md).
 */

export interface SequentialTestOptions {
  /** Accuracy drop to detect: q1 = q0 + margin. */
  margin: number;
  /** The alarm (and release) threshold h on the log-likelihood-ratio statistic. */
  threshold: number;
  /** Lowest reference error rate q0 (a perfect fleet would make any single error infinitely damning). */
  floor: number;
}

/** q0 and q1 for a reference error rate (floored; q1 capped below 1). */
export function hypotheses(
  referenceError: number,
  options: SequentialTestOptions,
): { q0: number; q1: number } {
  const q0 = Math.min(0.9, Math.max(options.floor, referenceError));
  return { q0, q1: Math.min(0.99, q0 + options.margin) };
}

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
