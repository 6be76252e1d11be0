/** Markdown report of an ablation run: one summary table, paired comparisons, then one section per graph. */
import type { AblationResults, GraphResult, Timing } from './types.js';
import type { Interval, Proportion } from './stats.js';

const num = (v: number | null | undefined, digits = 3): string =>
  v === null || v === undefined || !Number.isFinite(v) ? '–' : v.toFixed(digits);

const pct = (v: number | null | undefined, digits = 1): string =>
  v === null || v === undefined ? '–' : `${(v * 100).toFixed(digits)}%`;

function withCi(point: number | null, ci: Interval, digits = 3): string {
  return `${num(point, digits)} [${num(ci.lo, digits)}, ${num(ci.hi, digits)}]`;
}

function proportion(p: Proportion): string {
  return `${pct(p.rate)} (${p.hits}/${p.trials}) [${pct(p.ci.lo)}, ${pct(p.ci.hi)}]`;
}

function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const line = (cells: readonly string[]) => `| ${cells.map((c) => c.replace(/\|/g, '\\|')).join(' | ')} |`;
  return [line(header), `|${header.map(() => '---').join('|')}|`, ...rows.map(line)].join('\n');
}

function name(g: GraphResult): string {
  return g.auto ? `${g.name}*` : g.name;
}

function summaryTable(results: AblationResults, timing: Timing | undefined): string {
  return table(
    [
      'graph',
      'precision [95% CI]',
      'recall [95% CI]',
      'F1 [95% CI]',
      'FPR hard neg',
      'failure rate',
      'calls/judgment',
      'tokens/judgment',
      'prompt tokens cached / uncached',
      ...(timing === undefined ? [] : ['latency p50 ms']),
    ],
    results.graphs.map((g) => [
      name(g),
      withCi(g.metrics.point.precision, g.metrics.ci.precision),
      withCi(g.metrics.point.recall, g.metrics.ci.recall),
      withCi(g.metrics.point.f1, g.metrics.ci.f1),
      pct(g.byKind['hard_negative']?.acceptRate),
      `${pct(g.failure.rate)} (${g.failure.hits}/${g.failure.trials})`,
      num(g.usage.callsPerJudgment, 2),
      num(g.usage.tokensPerJudgment, 0),
      g.usage.cachedPromptTokensPerJudgment === null
        ? 'unknown'
        : `${num(g.usage.cachedPromptTokensPerJudgment, 0)} / ${num(g.usage.uncachedPromptTokensPerJudgment, 0)}`,
      ...(timing === undefined ? [] : [num(timing.graphs[g.name]?.latencyMs.p50, 0)]),
    ]),
  );
}

function pairedTable(results: AblationResults): string | null {
  const rows = results.graphs
    .filter((g) => g.paired !== null)
    .map((g) => {
      const p = g.paired;
      if (p === null) return [];
      return [
        name(g),
        String(p.f1Difference.n),
        withCi(p.f1Difference.difference, p.f1Difference.ci),
        `${p.mcnemar.b} / ${p.mcnemar.c}`,
        p.mcnemar.p < 0.001 ? p.mcnemar.p.toExponential(1) : p.mcnemar.p.toFixed(3),
      ];
    });
  if (rows.length === 0 || results.reference === null) return null;
  return [
    `## Paired comparison with \`${results.reference}\``,
    '',
    `Items both graphs decided. ΔF1 = F1(graph) − F1(${results.reference}), paired clustered bootstrap CI. ` +
      `McNemar exact test on b = only the graph right, c = only \`${results.reference}\` right.`,
    '',
    table(['graph', 'n', 'ΔF1 [95% CI]', 'b / c', 'McNemar p'], rows),
  ].join('\n');
}

function graphSection(g: GraphResult, timing: Timing | undefined): string {
  const out: string[] = [];
  const m = g.metrics;
  out.push(`### ${g.name}`);
  out.push('');
  const facts = [
    `graph \`${g.graph}\` hash \`${g.hash}\``,
    `${g.llmCallsPerJudgment} LLM calls max, critical path ${g.criticalPathCalls}`,
    `${g.rounds} round${g.rounds === 1 ? '' : 's'}`,
  ];
  if (g.aliases.length > 0) facts.push(`also asked for as ${g.aliases.map((a) => `\`${a}\``).join(', ')}`);
  if (g.baselineFor.length > 0)
    facts.push(`equal-budget baseline for ${g.baselineFor.map((a) => `\`${a}\``).join(', ')}`);
  out.push(`${facts.join(' · ')}${g.description === null ? '' : `  \n${g.description}`}`);
  out.push('');
  if (g.cascade !== null) {
    const { stops, escalations } = g.cascade;
    out.push(
      `- Cascade: ${stops} of ${g.items} judgments decided by the first stage (cascade_stop), ` +
        `${escalations} escalated; its stages are in the summary table beside it.`,
    );
  }
  out.push(
    `- Confusion (decided items, n = ${m.n}): TP ${m.confusion.tp} · FP ${m.confusion.fp} · TN ${m.confusion.tn} · FN ${m.confusion.fn}`,
    `- Accuracy ${withCi(m.point.accuracy, m.ci.accuracy)} · specificity ${withCi(m.point.specificity, m.ci.specificity)}`,
    `- Reviewer calibration: TPR ${num(g.calibration.tpr)} · TNR ${num(g.calibration.tnr)} · FPR ${num(g.calibration.fpr)} · FNR ${num(g.calibration.fnr)} → **${g.calibration.bias ?? 'undetermined'}** (balanced when |FPR − FNR| ≤ ${g.calibration.tolerance})`,
    `- Accept rate by kind: ${Object.entries(g.byKind)
      .map(([kind, k]) => `${kind} ${pct(k.acceptRate)} (${k.accepted}/${k.decided})`)
      .join(' · ')}`,
    `- Score calibration (n = ${g.scores.n}): ECE ${num(g.scores.ece)} · Brier ${num(g.scores.brier)}`,
    `- Statuses: ${Object.entries(g.statuses)
      .filter(([, n]) => n > 0)
      .map(([s, n]) => `${s} ${n}`)
      .join(' · ')}; failure rate ${proportion(g.failure)}${
      Object.keys(g.failureCodes).length === 0
        ? ''
        : ` — ${Object.entries(g.failureCodes)
            .map(([c, n]) => `${c} ${n}`)
            .join(', ')}`
    }`,
  );
  if (g.oracleGap !== null) {
    out.push(
      `- Oracle gap (some agent right at some point, verdict wrong; ok judgments): ${proportion(g.oracleGap)}`,
    );
  }
  for (const a of g.agreement) {
    out.push(
      `- Fleiss κ among parallel ${a.role}s (${a.nodes.join(', ')}), ${a.subjects} judgments: ${num(a.kappa)}`,
    );
  }
  out.push('');
  const roleTiming = timing?.graphs[g.name]?.perRole ?? {};
  const roles = Object.entries(g.usage.perRole);
  if (roles.length > 0) {
    out.push(
      table(
        [
          'role',
          'calls/judgment',
          'prompt tokens/judgment',
          'completion tokens/judgment',
          ...(timing === undefined ? [] : ['latency p50 ms']),
        ],
        roles.map(([role, u]) => [
          role,
          num(u.callsPerJudgment, 2),
          num(u.promptTokensPerJudgment, 0),
          num(u.completionTokensPerJudgment, 0),
          ...(timing === undefined ? [] : [num(roleTiming[role]?.p50, 0)]),
        ]),
      ),
      '',
    );
  }
  if (g.nodes.length > 1) {
    out.push(
      'Per node (final stance of each agent vs the label, ok judgments):',
      '',
      table(
        ['node', 'role', 'n', 'TPR', 'TNR', 'FPR', 'FNR', 'bias'],
        g.nodes.map((n) => [
          n.nodeId,
          n.role,
          String(n.n),
          num(n.tpr),
          num(n.tnr),
          num(n.fpr),
          num(n.fnr),
          n.bias ?? '–',
        ]),
      ),
      '',
    );
  }
  const d = g.dynamics;
  if (d !== null) {
    out.push(
      `Debate dynamics (${d.judgments} ok judgments): rounds used ${Object.entries(d.roundsUsed)
        .map(([r, n]) => `${r}: ${n}`)
        .join(', ')}; stop reasons ${Object.entries(d.stopReasons)
        .map(([r, n]) => `${r}: ${n}`)
        .join(
          ', ',
        )}; harmful switches ${d.harmful}, helpful switches ${d.helpful} (of ${d.trajectories} agent trajectories).`,
      '',
    );
    const nodeIds = Object.keys(d.perRound[0]?.nodes ?? {});
    out.push(
      table(
        ['round', ...nodeIds.map((id) => `${id} match / no_match`)],
        d.perRound.map((r) => [
          String(r.round),
          ...nodeIds.map((id) => {
            const c = r.nodes[id];
            return c === undefined ? '–' : `${c.match} / ${c.no_match}`;
          }),
        ]),
      ),
      '',
    );
    if (d.switches.length > 0) {
      out.push(
        table(
          ['rounds', 'match → no_match', 'no_match → match', 'unchanged'],
          d.switches.map((s) => [
            `${s.from} → ${s.to}`,
            String(s.matchToNoMatch),
            String(s.noMatchToMatch),
            String(s.unchanged),
          ]),
        ),
        '',
      );
    }
  }
  return out.join('\n');
}

/** Only the summary table (what the CLI prints). */
export function renderSummary(results: AblationResults, timing?: Timing): string {
  return `${summaryTable(results, timing)}\n`;
}

/** The report as Markdown. `timing` (run-dependent latencies) is optional. */
export function renderReport(results: AblationResults, timing?: Timing): string {
  const d = results.dataset;
  const kinds = Object.entries(d.kinds)
    .map(([k, n]) => `${k} ${n}`)
    .join(', ');
  const parts = [
    '# Judge-graph ablation',
    '',
    `Dataset sha256 \`${d.sha256}\`: ${d.items} items (${d.positives} match / ${d.negatives} no_match; ${kinds}), ` +
      `${d.clusters} ground-truth clusters${d.invalidLines > 0 ? `, ${d.invalidLines} invalid lines skipped` : ''}. ` +
      `Backend \`${results.backend}\`, prompt version \`${results.promptVersion}\`.`,
    '',
    `CIs: ${Math.round(results.level * 100)}% percentile bootstrap, ${results.resamples} resamples clustered by ground truth, seed ${results.seed}. ` +
      'Failures (judge_error, timeout, overloaded) are excluded from precision/recall and reported as the failure rate; ' +
      'a rejected input (degenerate candidate) is a real no_match. `*` = added automatically (reference or equal-budget vote baseline).',
    '',
    summaryTable(results, timing),
    '',
    'Plots: [precision vs recall](precision-recall.svg), [F1 vs tokens per judgment](f1-vs-tokens.svg).',
    '',
  ];
  const paired = pairedTable(results);
  if (paired !== null) parts.push(paired, '');
  parts.push('## Per graph', '');
  for (const g of results.graphs) parts.push(graphSection(g, timing), '');
  return `${parts.join('\n').trimEnd()}\n`;
}
