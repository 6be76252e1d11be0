/**
 * Symmetric positive-definite linear systems, for the Bradley–Terry Newton steps (src/judge/bradley-terry.ts):
 * a dense Cholesky factorisation and solve, and Jacobi-preconditioned conjugate gradients on a matrix-free
 * operator. Row-major `Float64Array`s, no allocation beyond the result. Pure.
 */

/** The Cholesky factor L (row-major, lower) of a symmetric positive-definite m×m matrix; null if not SPD. */
export function cholesky(a: Float64Array, m: number): Float64Array | null {
  const l = new Float64Array(m * m);
  for (let i = 0; i < m; i++) {
    const ri = i * m;
    for (let j = 0; j <= i; j++) {
      const rj = j * m;
      let sum = a[ri + j] ?? 0;
      for (let k = 0; k < j; k++) sum -= (l[ri + k] ?? 0) * (l[rj + k] ?? 0);
      if (i === j) {
        if (!(sum > 0)) return null;
        l[ri + i] = Math.sqrt(sum);
      } else {
        l[ri + j] = sum / (l[rj + j] ?? 1);
      }
    }
  }
  return l;
}

/** Solves L Lᵀ x = b given the Cholesky factor L. */
export function choleskySolve(l: Float64Array, b: Float64Array, m: number): Float64Array {
  const x = Float64Array.from(b);
  for (let i = 0; i < m; i++) {
    const ri = i * m;
    let sum = x[i] ?? 0;
    for (let k = 0; k < i; k++) sum -= (l[ri + k] ?? 0) * (x[k] ?? 0);
    x[i] = sum / (l[ri + i] ?? 1);
  }
  for (let i = m - 1; i >= 0; i--) {
    let sum = x[i] ?? 0;
    for (let k = i + 1; k < m; k++) sum -= (l[k * m + i] ?? 0) * (x[k] ?? 0);
    x[i] = sum / (l[i * m + i] ?? 1);
  }
  return x;
}

/** Scratch vectors of `conjugateGradient` for systems of size m (reused across solves of one size). */
export interface CgWork {
  r: Float64Array;
  z: Float64Array;
  p: Float64Array;
  q: Float64Array;
}

export function cgWork(m: number): CgWork {
  return { r: new Float64Array(m), z: new Float64Array(m), p: new Float64Array(m), q: new Float64Array(m) };
}

/**
 * Solves A x = b by Jacobi-preconditioned conjugate gradients, A symmetric positive definite, given as
 * `apply(v, out)` (out = A v) and its `diagonal`. Exact in ≤ m steps in exact arithmetic; stops when the
 * residual's squared norm is 1e-24 of b's, or after 2m + 10 steps. b = 0 gives x = 0.
 */
export function conjugateGradient(
  apply: (v: Float64Array, out: Float64Array) => void,
  b: Float64Array,
  diagonal: Float64Array,
  work: CgWork = cgWork(b.length),
): Float64Array {
  const m = b.length;
  const { r, z, p, q } = work;
  const x = new Float64Array(m);
  r.set(b);
  let bnorm = 0;
  for (let k = 0; k < m; k++) bnorm += (r[k] ?? 0) ** 2;
  if (bnorm === 0) return x;
  let rz = 0;
  for (let k = 0; k < m; k++) {
    z[k] = (r[k] ?? 0) / (diagonal[k] ?? 1);
    p[k] = z[k] ?? 0;
    rz += (r[k] ?? 0) * (z[k] ?? 0);
  }
  for (let step = 0; step < 2 * m + 10; step++) {
    apply(p, q);
    let pq = 0;
    for (let k = 0; k < m; k++) pq += (p[k] ?? 0) * (q[k] ?? 0);
    const alpha = rz / pq;
    let rnorm = 0;
    for (let k = 0; k < m; k++) {
      x[k] = (x[k] ?? 0) + alpha * (p[k] ?? 0);
      r[k] = (r[k] ?? 0) - alpha * (q[k] ?? 0);
      rnorm += (r[k] ?? 0) ** 2;
    }
    if (rnorm <= 1e-24 * bnorm) break;
    let rzNext = 0;
    for (let k = 0; k < m; k++) {
      z[k] = (r[k] ?? 0) / (diagonal[k] ?? 1);
      rzNext += (r[k] ?? 0) * (z[k] ?? 0);
    }
    const beta = rzNext / rz;
    rz = rzNext;
    for (let k = 0; k < m; k++) p[k] = (z[k] ?? 0) + beta * (p[k] ?? 0);
  }
  return x;
}
