/** The probe report (`probe-report.md`): one table row per probe, then what each probe does. */
import type { Proportion } from '../stats.js';
import type { ProbeMetric } from './catalogue.js';
import type { ProbeResults } from './scoring.js';

const pct = (v: number | null | undefined): string =>
  v === null || v === undefined ? '–' : `${(v * 100).toFixed(1)}%`;

function cell(p: Proportion): string {
  return `${pct(p.rate)} (${p.hits}/${p.trials}) [${pct(p.ci.lo)}, ${pct(p.ci.hi)}]`;
}

const METRIC_TEXT: Record<ProbeMetric, string> = {
  fpr: 'FPR',
  attack: 'attack success',
  flip: 'flip rate',
};

/** Markdown table of the probe results. */
export function renderProbeReport(results: ProbeResults): string {
  const rows = results.probes.map((p) => {
    const gate = p.gate === null ? 'report only' : `≤ ${pct(p.gate)}`;
    const verdict = p.passed === null ? (p.fooled ? 'FOOLED' : '–') : p.passed ? 'pass' : '**FAIL**';
    const flips = p.flipsToMatch === null ? '' : `; ${p.flipsToMatch} to match`;
    return `| ${p.name} | ${METRIC_TEXT[p.metric]} | ${cell(p.rate)}${flips} | ${p.rawFpr === null ? '–' : cell(p.rawFpr)} | ${p.failures}/${p.cases} | ${p.callsPerCase.toFixed(2)} | ${gate} | ${verdict} |`;
  });
  return [
    `# Reward-hacking probes: \`${results.graph.name}\` (\`${results.graph.hash}\`)`,
    '',
    `Backend \`${results.backend}\`, ${results.items} labelled items. CIs: 95% bootstrap clustered by ground truth, ${results.resamples} resamples, seed ${results.seed}. ` +
      `Untransformed non-matching ideas rewarded: ${cell(results.baseline.negatives)}; failures on originals ${results.baseline.failures}/${results.baseline.cases}.`,
    '',
    'FPR = reward 1 where 0 is required. Attack success = reward 1 on a transformed non-matching idea whose original got 0. ' +
      'Flip rate = verdict differs from the untransformed item (either direction; the count to match is the exploitable one). Raw FPR = reward 1 over all transformed non-matching ideas. ' +
      'Failures are excluded from rates. FOOLED = the rate is above 0 with a CI excluding 0 (for ungated probes).',
    '',
    '| probe | metric | rate [95% CI] | raw FPR | failures | calls/case | gate | result |',
    '|---|---|---|---|---|---|---|---|',
    ...rows,
    '',
    results.passed ? 'All gates passed.' : 'At least one gate was exceeded.',
    '',
    ...results.probes.map((p) => `- \`${p.name}\`: ${p.description}`),
    '',
  ].join('\n');
}
