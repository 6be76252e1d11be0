/** An integer CLI option ≥ `min`, or `fallback` when absent; throws a message naming the flag. */
export function intOption(name: string, value: string | undefined, fallback: number, min = 1): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < min)
    throw new Error(`--${name} must be an integer ≥ ${min}, got "${value}"`);
  return n;
}
