import { describe, expect, it } from 'vitest';
import {
  betaQuantile,
  chiSquare1Sf,
  incompleteBeta,
  logGamma,
  normalCdf,
  normalQuantile,
  tCdf,
  tQuantile,
} from '../../../src/ablations/stats/distributions.js';

// Reference values from R 4.3 (qnorm, qt, qbeta, pchisq, pbeta, lgamma).
describe('distribution functions', () => {
  it('match R on the normal and Student t quantiles', () => {
    expect(normalQuantile(0.975)).toBeCloseTo(1.959963984540054, 12);
    expect(normalQuantile(0.025)).toBeCloseTo(-1.959963984540054, 12);
    expect(normalCdf(1.959963984540054)).toBeCloseTo(0.975, 12);
    expect(tQuantile(0.975, 33)).toBeCloseTo(2.034515297449338, 10);
    expect(tQuantile(0.975, 10)).toBeCloseTo(2.228138851986274, 10);
    expect(tQuantile(0.975, 1)).toBeCloseTo(12.70620473617471, 8);
    expect(tCdf(2.034515297449338, 33)).toBeCloseTo(0.975, 12);
  });

  it('match R on the beta, χ²(1) and log-gamma functions', () => {
    // binom.test(5, 20)$conf.int = 0.08657147 0.49104587
    expect(betaQuantile(0.025, 5, 16)).toBeCloseTo(0.08657147, 7);
    expect(betaQuantile(0.975, 6, 15)).toBeCloseTo(0.49104587, 7);
    expect(incompleteBeta(0.3, 2.5, 4.5)).toBeCloseTo(0.4065390166824593, 12);
    expect(chiSquare1Sf(3.841458820694124)).toBeCloseTo(0.05, 12);
    expect(chiSquare1Sf(0)).toBe(1);
    expect(logGamma(10)).toBeCloseTo(Math.log(362880), 12);
    expect(logGamma(0.5)).toBeCloseTo(Math.log(Math.sqrt(Math.PI)), 12);
  });
});
