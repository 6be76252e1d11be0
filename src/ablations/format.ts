/**
 * Number formatting shared by the ablation and probe reports and the docs tables. Endpoints of a Monte-Carlo interval are
 * printed to their precision: to the last decimal that twice the endpoints' Monte-Carlo standard error does
 * not reach (so a rerun with another seed changes the last digit by at most one), 3 decimals at most.
 */
import type { AnyInterval } from './stats/rates.js';
import type { Proportion } from './stats/proportion.js';
import { BIAS_TOLERANCE, type BiasLabel } from './stats/calibration.js';
import type { GraphResult } from './types.js';

export const DASH = '–';

export function num(v: number | null | undefined, digits = 3): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return DASH;
  const text = v.toFixed(digits);
  // -0.000 is 0 printed with the sign of a rounding residue.
  return /^-0(\.0*)?$/.test(text) ? text.slice(1) : text;
}

/** A rate as a percentage: 1 decimal, 2 below 1% (an exact bound such as 0.61% would otherwise read 0.6%). */
export function pct(v: number | null | undefined): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return DASH;
  const digits = v > 0 && v < 0.01 ? 2 : 1;
  return `${(v * 100).toFixed(digits)}%`;
}

/** Decimals an interval's endpoints carry (3 for exact and deterministic intervals). */
export function endpointDecimals(ci: AnyInterval, max = 3): number {
  const error = ci.method === 'clopper-pearson' ? 0 : ci.mcError;
  if (!(error > 0)) return max;
  return Math.max(1, Math.min(max, Math.floor(-Math.log10(2 * error))));
}

/** `point [lo, hi]`, the endpoints at their precision; `[–]` and the reason when there is no interval. */
export function withCi(point: number | null, ci: AnyInterval): string {
  if (ci.lo === null || ci.hi === null) {
    return `${num(point)} [${DASH}]${ci.note === null ? '' : ` (${ci.note})`}`;
  }
  const d = endpointDecimals(ci);
  const flag =
    ci.method === 'percentile' && ci.undefinedResamples > 0
      ? ` (undefined in ${ci.undefinedResamples}/${ci.resamples} resamples)`
      : '';
  const note = ci.note === null ? '' : ` (${ci.note})`;
  return `${num(point)} [${num(ci.lo, d)}, ${num(ci.hi, d)}]${flag}${note}`;
}

/**
 * `rate (hits/trials) [lo, hi]` with an exact interval; with few events (or non-events) also the cluster-level
 * bound, which holds at any intra-cluster correlation (the interval itself assumes unclustered events then).
 */
export function proportionCell(p: Proportion): string {
  const cell = `${pct(p.rate)} (${p.hits}/${p.trials}) [${pct(p.ci.lo)}, ${pct(p.ci.hi)}]`;
  const bound = p.ci.clusterLevel;
  if (bound === null) return cell;
  const side = p.hits <= p.trials - p.hits ? `≤ ${pct(bound.hi)}` : `≥ ${pct(bound.lo)}`;
  return `${cell} (clustered: ${side})`;
}

/** A p-value to 3 decimals, `< 0.001` below that. */
export function pValue(p: number | null): string {
  if (p === null) return DASH;
  return p < 0.001 ? '< 0.001' : p.toFixed(3);
}

/** `p (Holm p)`: raw first, adjusted in brackets. */
export function pPair(raw: number | null, adjusted: number | null): string {
  return `${pValue(raw)} (${pValue(adjusted)})`;
}

/** A graph's name in a table; `*` marks a graph the run added (reference, baseline, cascade stage). */
export function graphLabel(g: Pick<GraphResult, 'name' | 'auto'>): string {
  return g.auto ? `${g.name}*` : g.name;
}

/** A Markdown table; `|` inside cells is escaped. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const line = (cells: readonly string[]) => `| ${cells.map((c) => c.replace(/\|/g, '\\|')).join(' | ')} |`;
  return [line(header), `|${header.map(() => '---').join('|')}|`, ...rows.map(line)].join('\n');
}

/** A bias label as both reports print it: `permissive`, `strict (not shown)`, `—` without one. */
export function biasCell(label: BiasLabel): string {
  if (label.bias === null) return DASH;
  return label.shown === true ? label.bias : `${label.bias} (not shown)`;
}

/** The bias rule in words, for the method text of `ablate`'s and `calibrate`'s reports. */
export function biasRuleText(tolerance = BIAS_TOLERANCE): string {
  return (
    `bias from d = FPR − FNR (FPR on hard negatives when the set has them): \`permissive\` when d > ${tolerance}, ` +
    `\`strict\` when d < −${tolerance}, else \`balanced\`; \`(not shown)\` when the 95% interval of d does ` +
    `not support the label (it must exclude 0 on the label's side, or for balanced lie within ±${tolerance})`
  );
}
