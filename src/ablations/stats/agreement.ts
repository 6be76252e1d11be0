/** Agreement among raters: Fleiss' κ. Pure. */

/**
 * Fleiss' κ for a subjects × categories matrix of rating counts; every subject must have the same number
 * of raters (≥ 2). Returns null when κ is undefined (no subjects, or every rating in one category).
 */
export function fleissKappa(counts: readonly (readonly number[])[]): number | null {
  const first = counts[0];
  if (first === undefined) return null;
  const raters = first.reduce((s, x) => s + x, 0);
  if (raters < 2) throw new RangeError('fleissKappa: at least 2 raters per subject');
  const categories = first.length;
  const totals = new Array<number>(categories).fill(0);
  let sumPi = 0;
  for (const [index, row] of counts.entries()) {
    if (row.length !== categories)
      throw new RangeError(`fleissKappa: row ${index} has ${row.length} categories`);
    const n = row.reduce((s, x) => s + x, 0);
    if (n !== raters) throw new RangeError(`fleissKappa: row ${index} has ${n} ratings, expected ${raters}`);
    let squares = 0;
    for (const [j, x] of row.entries()) {
      squares += x * x;
      totals[j] = (totals[j] ?? 0) + x;
    }
    sumPi += (squares - raters) / (raters * (raters - 1));
  }
  const pBar = sumPi / counts.length;
  const all = counts.length * raters;
  const pe = totals.reduce((s, t) => s + (t / all) ** 2, 0);
  if (pe >= 1 - 1e-12) return null;
  return (pBar - pe) / (1 - pe);
}
