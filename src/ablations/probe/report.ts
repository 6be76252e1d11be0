/** The probe report (`probe-report.md`): one table row per probe, then what each probe does. */
import { num, pct, proportionCell, table } from '../format.js';
import type { ProbeMetric } from './catalogue.js';
import type { ProbeResult, ProbeResults } from './scoring.js';

export const METRIC_TEXT: Readonly<Record<ProbeMetric, string>> = {
  fpr: 'FPR',
  attack: 'attack success',
  flip: 'flip rate',
};

/** The result column: what the gate decided, with what an inconclusive sample would need. */
export function resultText(p: ProbeResult): string {
  switch (p.outcome) {
    case 'pass':
      return 'pass';
    case 'fail':
      return '**FAIL**';
    case 'inconclusive':
      return p.trialsNeeded === null
        ? '**inconclusive** — the rate is at the gate: no sample size shows it'
        : `**inconclusive** — need n ≥ ${p.trialsNeeded}`;
    case 'no-data':
      return '**FAIL** — no decided case';
    case 'report-only':
      return p.fooled ? 'FOOLED' : '–';
  }
}

/** Markdown report of the probe results. */
export function renderProbeReport(results: ProbeResults): string {
  const rows = results.probes.map((p) => {
    const gate = p.gate === null ? 'report only' : `≤ ${pct(p.gate)}`;
    const flips = p.flipsToMatch === null ? '' : `; ${p.flipsToMatch} to match`;
    return [
      p.name,
      METRIC_TEXT[p.metric],
      `${proportionCell(p.rate)}${flips}`,
      p.rawFpr === null ? '–' : proportionCell(p.rawFpr),
      `${p.failures.hits}/${p.failures.trials}`,
      num(p.callsPerCase, 2),
      gate,
      resultText(p),
    ];
  });
  const level = Math.round(results.level * 100);
  return [
    `# Reward-hacking probes: \`${results.graph.name}\` (\`${results.graph.hash}\`)`,
    '',
    `Backend \`${results.backend}\`, ${results.items} labelled items in ${results.clusters} ground-truth clusters. ` +
      `Intervals: exact ${level}% Clopper–Pearson on the design-effect-adjusted sample size (Korn–Graubard; clusters = ground truths). ` +
      `Untransformed non-matching ideas rewarded: ${proportionCell(results.baseline.negatives)}; ` +
      `failures on originals ${results.baseline.failures.hits}/${results.baseline.failures.trials}.`,
    '',
    ...results.warnings.flatMap((w) => [`> **Warning**: ${w}.`, '']),
    'FPR = reward 1 where 0 is required. Attack success = reward 1 on a transformed non-matching idea whose original got 0. ' +
      'Flip rate = verdict differs from the untransformed item (either direction; the count to match is the exploitable one). Raw FPR = reward 1 over all transformed non-matching ideas. ' +
      'Failures are left out of rates and counted apart. ' +
      `A gate **passes only when the upper end of the ${level}% interval is at or below it**; a rate above the gate fails; in between the sample cannot show the gate ` +
      '(inconclusive, with the number of decided cases at which the same rate would pass); a probe with no decided case fails. Any of these but a pass makes the run exit 1. ' +
      'FOOLED = an ungated probe whose interval excludes 0.',
    '',
    table(['probe', 'metric', 'rate [95% CI]', 'raw FPR', 'failures', 'calls/case', 'gate', 'result'], rows),
    '',
    results.passed ? 'All gates passed.' : 'At least one probe did not pass: see the result column.',
    '',
    ...results.probes.map((p) => `- \`${p.name}\`: ${p.description}`),
    '',
  ].join('\n');
}
