/** The Newton steps' solvers (src/math/linear.ts), alone: Cholesky and conjugate gradients on SPD systems. */
import { describe, expect, it } from 'vitest';

import { cholesky, choleskySolve, conjugateGradient } from '../../src/math/linear.js';
import { createRng } from '../../src/math/sampling.js';

/** A weighted graph Laplacian plus a positive diagonal (the Bradley–Terry negated Hessian's shape), dense. */
function laplacianSystem(m: number, density: number, seed: number): Float64Array {
  const rng = createRng(seed);
  const a = new Float64Array(m * m);
  for (let k = 0; k < m; k++) a[k * m + k] = 0.1 + rng();
  for (let i = 0; i < m; i++)
    for (let j = i + 1; j < m; j++) {
      if (rng() >= density) continue;
      const c = rng() * 0.25;
      a[i * m + i]! += c;
      a[j * m + j]! += c;
      a[i * m + j]! -= c;
      a[j * m + i]! -= c;
    }
  return a;
}

const times = (a: Float64Array, v: Float64Array, out: Float64Array): void => {
  const m = v.length;
  for (let i = 0; i < m; i++) {
    let sum = 0;
    for (let j = 0; j < m; j++) sum += a[i * m + j]! * v[j]!;
    out[i] = sum;
  }
};

describe('cholesky', () => {
  it('factors an SPD matrix: L Lᵀ = A, and the solve satisfies A x = b', () => {
    const a = Float64Array.from([4, 2, 2, 3]);
    const l = cholesky(a, 2)!;
    expect(Array.from(l)).toEqual([2, 0, 1, Math.sqrt(2)]);
    const x = choleskySolve(l, Float64Array.from([2, 1]), 2);
    const back = new Float64Array(2);
    times(a, x, back);
    expect(back[0]).toBeCloseTo(2, 12);
    expect(back[1]).toBeCloseTo(1, 12);
  });

  it('is null for a matrix that is not positive definite', () => {
    expect(cholesky(Float64Array.from([1, 2, 2, 1]), 2)).toBeNull();
    expect(cholesky(Float64Array.from([0, 0, 0, 1]), 2)).toBeNull();
  });
});

describe('conjugateGradient', () => {
  it.each([
    [8, 1, 1],
    [40, 0.1, 2],
    [120, 0.03, 3],
  ])('agrees with Cholesky on an m=%i Laplacian system (density %f)', (m, density, seed) => {
    const a = laplacianSystem(m, density, seed);
    const rng = createRng(seed + 100);
    const b = Float64Array.from({ length: m }, () => rng() - 0.5);
    const diagonal = Float64Array.from({ length: m }, (_, k) => a[k * m + k]!);
    const direct = choleskySolve(cholesky(a, m)!, b, m);
    const iterative = conjugateGradient((v, out) => times(a, v, out), b, diagonal);
    for (let k = 0; k < m; k++) expect(iterative[k]).toBeCloseTo(direct[k]!, 9);
  });

  it('returns 0 for b = 0 without applying the operator', () => {
    let applied = 0;
    const x = conjugateGradient(() => void (applied += 1), new Float64Array(3), Float64Array.from([1, 1, 1]));
    expect(Array.from(x)).toEqual([0, 0, 0]);
    expect(applied).toBe(0);
  });
});
