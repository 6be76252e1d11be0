/**
 * The evaluation report: a markdown page with a table shaped like the paper's Table 2 (systems × criteria ×
 * protocol), the position-bias rate, agreement between the protocols and with humans, cost and failures; and
 * an SVG dot plot of every system's scores with CI whiskers. Deterministic for the same results.
 */
import type { Criterion } from '../../roles/types.js';
import type { Cell, EvaluateResults, Interval, Protocol, TauWithCi } from './stats.js';
import { escapeXml, niceTicks } from '../plots.js';
import type { Proportion } from '../stats/proportion.js';

const f2 = (v: number | null | undefined): string => (v === null || v === undefined ? '—' : v.toFixed(2));
const f3 = (v: number | null | undefined): string => (v === null || v === undefined ? '—' : v.toFixed(3));
const ci = (i: Interval, fmt = f2): string =>
  i.lo === null || i.hi === null ? '' : ` [${fmt(i.lo)}, ${fmt(i.hi)}]`;
const cell = (c: Cell | undefined): string =>
  c === undefined || c.mean === null ? '—' : `${f2(c.mean)}${ci(c.ci)}`;
const tau = (t: TauWithCi | null | undefined): string =>
  t === null || t === undefined || t.tau === null ? '—' : `${f3(t.tau)}${ci(t.ci, f3)} (n = ${t.n})`;
/** With few events (or non-events) the cluster-level bound, which holds at any intra-cluster correlation. */
const clustered = (p: Proportion): string => {
  const bound = p.ci.clusterLevel;
  if (bound === null) return '';
  const side =
    p.hits <= p.trials - p.hits ? `≤ ${(100 * bound.hi).toFixed(1)}%` : `≥ ${(100 * bound.lo).toFixed(1)}%`;
  return ` (clustered: ${side})`;
};
const pct = (p: Proportion | undefined): string =>
  p === undefined || p.rate === null
    ? '—'
    : `${(100 * p.rate).toFixed(1)}% (${p.hits}/${p.trials})${p.ci.lo === null || p.ci.hi === null ? '' : ` [${(100 * p.ci.lo).toFixed(1)}%, ${(100 * p.ci.hi).toFixed(1)}%]`}${clustered(p)}`;
const ABBREV: Readonly<Record<Protocol, string>> = { absolute: 'abs', pairwise: 'pair' };

/** The paper's Table 2 shape: one row per system, an absolute and a pairwise column per criterion. */
export function renderTable2(results: EvaluateResults): string {
  const { criteria, protocols } = results;
  const head = ['system', 'ideas'];
  for (const c of criteria) for (const p of protocols) head.push(`${c} (${ABBREV[p]})`);
  for (const p of protocols) head.push(`mean (${ABBREV[p]})`);
  const lines = [`| ${head.join(' | ')} |`, `|${head.map((_, i) => (i < 2 ? '---' : '---:')).join('|')}|`];
  for (const row of results.stats.table) {
    const cells = [row.system, String(row.ideas)];
    for (const c of criteria) for (const p of protocols) cells.push(cell(row.cells[c]?.[p]));
    for (const p of protocols) cells.push(cell(row.mean[p]));
    lines.push(`| ${cells.join(' | ')} |`);
  }
  return lines.join('\n');
}

export function renderEvaluationReport(results: EvaluateResults): string {
  const { stats, criteria, protocols } = results;
  const out: string[] = [
    '# Idea evaluation',
    '',
    `Backend \`${results.backend}\`${results.backend === 'offline' ? ' (deterministic term-overlap heuristic, **not an LLM judge**)' : ''}, ` +
      `comparative prompt version \`${results.promptVersion}\`, input sha256 \`${results.input.sha256}\`: ` +
      `${results.input.ideas} ideas, ${results.input.questions} questions, ${results.input.systems.length} systems` +
      `${results.input.invalidLines > 0 ? `, ${results.input.invalidLines} invalid lines skipped` : ''}.`,
    `Criteria: ${criteria.join(', ')}. Protocols: ${protocols.join(', ')}. CIs: 95% over questions, the ` +
      `jackknife-t (k − 1 degrees of freedom) for means and τ over ideas, the percentile bootstrap ` +
      `(${results.resamples} resamples, seed ${results.seed}) for the system-level τ (none when it cannot vary). ` +
      'A score interval is clamped to the 1–5 scale (the jackknife-t is symmetric and can pass an end of it; no ' +
      'mean lies outside, so clamping drops only impossible values).',
    '',
    ...stats.warnings.flatMap((w) => [`> **Warning**: ${w}.`, '']),
    "- **absolute**: one integer rating 1–5 per idea and criterion; a system's score is the mean over its ideas.",
    "- **pairwise**: every unordered pair of a question's ideas, judged once in each order; each order gives the",
    "  preferred idea +1 and the other −1 (tie 0); an idea's sum s over its k order judgments is normalised to",
    '  1–5 as 3 + 2·s/k (with n ideas and no failure, 3 + s/(n − 1)).',
    '',
    '## Scores (systems × criteria × protocol)',
    '',
    renderTable2(results),
    '',
  ];
  if (protocols.includes('pairwise')) {
    out.push(
      '## Position bias',
      '',
      "A pair whose two orders disagree (the judge's preference followed the position) is a position-bias event;",
      'the rate is over pairs decided by the judge (pairs with a degenerate idea are decided without it).',
      '',
      '| criterion | position-bias rate [95% CI] |',
      '|---|---:|',
      ...criteria.map((c) => `| ${c} | ${pct(stats.positionBias[c])} |`),
      `| all | ${pct(stats.positionBias.all)} |`,
      '',
    );
  }
  if (protocols.length === 2) {
    out.push(
      '## Agreement between the protocols (Kendall τ-b)',
      '',
      "System level: τ-b between the systems' absolute and pairwise means. Per question: mean over questions of",
      "τ-b between its ideas' absolute and pairwise scores.",
      '',
      '| criterion | system level [95% CI] | per question [95% CI] |',
      '|---|---:|---:|',
      ...criteria.map((c) => `| ${c} | ${tau(stats.systemTau[c])} | ${tau(stats.questionTau[c])} |`),
      `| mean over criteria | ${tau(stats.systemTau.mean)} | |`,
      '',
    );
  }
  const humanCriteria = criteria.filter((c) => stats.human[c] !== undefined);
  if (humanCriteria.length > 0) {
    out.push(
      '## Judge–human agreement',
      '',
      "Kendall τ-b between the judge's score and the human score over ideas (CI over questions); MAE of the",
      'absolute protocol when the human scores use the same 1–5 scale.',
      '',
      '| criterion | ideas with a human score | τ-b absolute [95% CI] | τ-b pairwise [95% CI] | MAE absolute |',
      '|---|---:|---:|---:|---:|',
      ...humanCriteria.map((c) => {
        const h = stats.human[c];
        return `| ${c} | ${h?.n ?? 0} | ${tau(h?.absolute)} | ${tau(h?.pairwise)} | ${f2(h?.absoluteMae)} |`;
      }),
      '',
    );
  }
  out.push(
    '## Cost and failures',
    '',
    '| protocol | units | LLM calls | prompt tokens | completion tokens | failed units | errors |',
    '|---|---:|---:|---:|---:|---:|---|',
  );
  for (const p of protocols) {
    const c = results.cost[p];
    if (c === undefined) continue;
    const errors = Object.entries(c.errors)
      .map(([code, n]) => `${code} × ${n}`)
      .join(', ');
    out.push(
      `| ${p} | ${c.units} | ${c.calls} | ${c.promptTokens} | ${c.completionTokens} | ${c.failed} | ${errors === '' ? '—' : errors} |`,
    );
  }
  out.push(
    '',
    'A failed unit (backend error after retries, invalid output after one re-ask, deadline) is left out: a failed',
    'rating gives its idea no absolute score, a failed pair no pairwise points; it is never counted as a low score.',
    '',
  );
  return `${out.join('\n')}\n`;
}

const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b'];

/**
 * Dot plot: one row band per system, one line per criterion inside it, the score on a 1–5 axis; absolute =
 * filled circle, pairwise = hollow diamond, with 95% CI whiskers.
 */
export function evaluationSvg(results: EvaluateResults): string {
  const { criteria, protocols } = results;
  const rows = results.stats.table;
  const lineH = 16;
  const bandH = Math.max(1, criteria.length) * lineH + 14;
  const left = 170;
  const right = 170;
  const top = 60;
  const plotW = 520;
  const width = left + plotW + right;
  const height = top + rows.length * bandH + 70;
  const sx = (v: number): number => left + ((v - 1) / 4) * plotW;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
    `<text x="${width / 2}" y="24" text-anchor="middle" font-size="16">Idea scores per system (1–5)</text>`,
  ];
  const bottom = top + rows.length * bandH;
  for (const t of niceTicks(1, 5, 8)) {
    out.push(
      `<line x1="${sx(t).toFixed(1)}" y1="${top}" x2="${sx(t).toFixed(1)}" y2="${bottom}" stroke="#e5e5e5"/>`,
      `<text x="${sx(t).toFixed(1)}" y="${bottom + 16}" text-anchor="middle">${t}</text>`,
    );
  }
  out.push(
    `<rect x="${left}" y="${top}" width="${plotW}" height="${bottom - top}" fill="none" stroke="#333"/>`,
  );
  rows.forEach((row, r) => {
    const y0 = top + r * bandH;
    out.push(
      `<text x="${left - 10}" y="${(y0 + bandH / 2 + 4).toFixed(1)}" text-anchor="end">${escapeXml(row.system)}</text>`,
    );
    if (r > 0) out.push(`<line x1="${left}" y1="${y0}" x2="${left + plotW}" y2="${y0}" stroke="#bbb"/>`);
    criteria.forEach((c: Criterion, k) => {
      const y = y0 + 10 + k * lineH;
      const color = PALETTE[k % PALETTE.length] ?? '#000';
      for (const p of protocols) {
        const v = row.cells[c]?.[p];
        if (v === undefined || v.mean === null) continue;
        const dy = p === 'absolute' ? -3 : 3;
        if (v.ci.lo !== null && v.ci.hi !== null) {
          out.push(
            `<line x1="${sx(v.ci.lo).toFixed(1)}" y1="${y + dy}" x2="${sx(v.ci.hi).toFixed(1)}" y2="${y + dy}" stroke="${color}" stroke-width="1.5"/>`,
          );
        }
        const x = sx(v.mean).toFixed(1);
        const title = `<title>${escapeXml(`${row.system} · ${c} · ${p}: ${v.mean.toFixed(2)}`)}</title>`;
        out.push(
          p === 'absolute'
            ? `<circle cx="${x}" cy="${y + dy}" r="4.5" fill="${color}">${title}</circle>`
            : `<rect x="${(Number(x) - 4).toFixed(1)}" y="${y + dy - 4}" width="8" height="8" transform="rotate(45 ${x} ${y + dy})" fill="white" stroke="${color}" stroke-width="2">${title}</rect>`,
        );
      }
    });
  });
  criteria.forEach((c, k) => {
    const y = top + 10 + k * 18;
    out.push(
      `<line x1="${left + plotW + 20}" y1="${y}" x2="${left + plotW + 40}" y2="${y}" stroke="${PALETTE[k % PALETTE.length] ?? '#000'}" stroke-width="3"/>`,
      `<text x="${left + plotW + 46}" y="${y + 4}">${escapeXml(c)}</text>`,
    );
  });
  const ly = top + 10 + criteria.length * 18 + 10;
  out.push(
    `<circle cx="${left + plotW + 30}" cy="${ly}" r="4.5" fill="#555"/><text x="${left + plotW + 46}" y="${ly + 4}">absolute</text>`,
    `<rect x="${left + plotW + 26}" y="${ly + 14}" width="8" height="8" transform="rotate(45 ${left + plotW + 30} ${ly + 18})" fill="white" stroke="#555" stroke-width="2"/><text x="${left + plotW + 46}" y="${ly + 22}">pairwise</text>`,
    `<text x="${left}" y="${height - 14}" fill="#555" font-size="11">${escapeXml(
      `Whiskers: 95% jackknife-t CI over questions; backend ${results.backend}.`,
    )}</text>`,
    '</svg>',
  );
  return `${out.join('\n')}\n`;
}
