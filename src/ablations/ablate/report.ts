/**
 * Markdown report of an ablation run: methods and warnings, the summary table, the three views of
 * failures, the paired comparison with the reference (F1/P/R headline, accuracy tests apart), the
 * budget-matched vote baselines, then one section per graph.
 */
import {
  biasCell,
  biasRuleText,
  DASH,
  graphLabel,
  num,
  pct,
  pPair,
  proportionCell,
  table,
  withCi,
} from '../format.js';
import type { ReviewerCalibration } from '../stats/calibration.js';
import type { Estimate } from '../stats/clustered.js';
import type { AblationResults, Budget, GraphResult, PairedComparison, Timing } from '../types.js';

function estimateCell(e: Estimate): string {
  return withCi(e.point, e.ci);
}

function methodText(results: AblationResults): string {
  const level = Math.round(results.level * 100);
  const resampling =
    results.method === 'percentile'
      ? `percentile cluster bootstrap (${results.resamples} resamples of whole ground-truth clusters, seed ${results.seed}); ` +
        'endpoints are printed to their Monte-Carlo precision and undefined resamples are counted, never dropped silently'
      : `cluster jackknife t-interval (leave one ground-truth cluster out, logit scale for a rate and atanh for a difference, t on ${results.dataset.clusters - 1} degrees of freedom)`;
  return (
    `${level}% intervals. Proportions (precision, recall, accuracy, specificity, failure rate, FPR on hard negatives, accept rates, oracle gap): ` +
    'exact Clopper–Pearson interval on the design-effect-adjusted sample size (Korn–Graubard; clusters = ground truths). ' +
    `F1 and every difference: ${resampling}. ` +
    'Failures (judge_error, timeout, overloaded) are never counted as negatives (three views below); ' +
    'a rejected input (degenerate candidate) is a real no_match. `*` = added automatically (reference or budget-matched vote baseline). ' +
    `Graphs and agents: ${biasRuleText(results.biasTolerance)} — the rule \`calibrate\` applies to its members.`
  );
}

/** Reasoning tokens per judgment, `~` when some were estimated from a trace (a server that reports none). */
const reasoningCell = (tokens: number | undefined, estimated: boolean | undefined): string =>
  `${estimated === true ? '~' : ''}${num(tokens ?? 0, 0)}`;

function summaryTable(results: AblationResults, timing: Timing | undefined): string {
  // The column appears when some judge reasoned, so reports of other judges stay as they were.
  const reasoning = results.graphs.some((g) => (g.usage.reasoningTokensPerJudgment ?? 0) > 0);
  return table(
    [
      'graph',
      'precision [95% CI]',
      'recall [95% CI]',
      'F1 [95% CI]',
      'FPR hard neg [95% CI]',
      'failure rate [95% CI]',
      'calls/judgment',
      'tokens/judgment',
      'prompt tokens cached / uncached',
      ...(reasoning ? ['reasoning tokens/judgment'] : []),
      ...(timing === undefined ? [] : ['latency p50 ms']),
    ],
    results.graphs.map((g) => {
      const hard = g.byKind['hard_negative'];
      return [
        graphLabel(g),
        withCi(g.metrics.point.precision, g.metrics.ci.precision),
        withCi(g.metrics.point.recall, g.metrics.ci.recall),
        withCi(g.metrics.point.f1, g.metrics.ci.f1),
        hard === undefined ? DASH : `${pct(hard.rate)} [${pct(hard.ci.lo)}, ${pct(hard.ci.hi)}]`,
        proportionCell(g.failure),
        num(g.usage.callsPerJudgment, 2),
        num(g.usage.tokensPerJudgment, 0),
        g.usage.cachedPromptTokensPerJudgment === null
          ? 'unknown'
          : `${num(g.usage.cachedPromptTokensPerJudgment, 0)} / ${num(g.usage.uncachedPromptTokensPerJudgment, 0)}`,
        ...(reasoning
          ? [reasoningCell(g.usage.reasoningTokensPerJudgment, g.usage.reasoningTokensEstimated)]
          : []),
        ...(timing === undefined ? [] : [num(timing.graphs[g.name]?.latencyMs.p50, 0)]),
      ];
    }),
  );
}

function viewsTable(results: AblationResults): string {
  const any = results.graphs.some((g) => g.failure.hits > 0);
  return [
    '## Failures: three views',
    '',
    'Complete-case = each graph over the items it decided (the table above; graphs may then be compared on different items). ' +
      `Common items = only the ${results.commonItems} items every graph decided. Failure-as-wrong = every item, a failure counted as the wrong answer. ` +
      (any
        ? 'Failures that track difficulty flatter the complete-case view: read the other two beside it.'
        : 'No graph failed on any item, so the three views coincide.'),
    '',
    table(
      [
        'graph',
        'complete-case n',
        'complete-case F1',
        'common-items F1',
        'failure-as-wrong n',
        'failure-as-wrong F1',
      ],
      results.graphs.map((g) => [
        graphLabel(g),
        String(g.views.complete.n),
        withCi(g.views.complete.point.f1, g.views.complete.ci.f1),
        withCi(g.views.common.point.f1, g.views.common.ci.f1),
        String(g.views.failureAsWrong.n),
        withCi(g.views.failureAsWrong.point.f1, g.views.failureAsWrong.ci.f1),
      ]),
    ),
  ].join('\n');
}

function signOf(v: number | null): number {
  return v === null || v === 0 ? 0 : Math.sign(v);
}

function comparisonRows(rows: readonly { label: string; c: PairedComparison }[]): {
  headline: string[][];
  accuracy: string[][];
} {
  const headline = rows.map(({ label, c }) => [
    label,
    String(c.rates.n),
    estimateCell(c.rates.f1),
    pPair(c.rates.f1.p, c.holm.f1),
    estimateCell(c.rates.precision),
    pPair(c.rates.precision.p, c.holm.precision),
    estimateCell(c.rates.recall),
    pPair(c.rates.recall.p, c.holm.recall),
  ]);
  const accuracy = rows.map(({ label, c }) => {
    const opposite = signOf(c.rates.f1.point) * signOf(c.rates.accuracy.point) < 0;
    return [
      label,
      estimateCell(c.rates.accuracy),
      `${c.rates.mcnemar.b} / ${c.rates.mcnemar.c}`,
      pPair(c.rates.mcnemar.exactP, c.holm.mcnemarExact),
      pPair(c.rates.mcnemar.clusteredP, c.holm.mcnemarClustered),
      opposite ? 'opposite to ΔF1' : '',
    ];
  });
  return { headline, accuracy };
}

const HEADLINE_HEADER = [
  'graph',
  'n',
  'ΔF1 [95% CI]',
  'ΔF1 p (Holm)',
  'Δprecision [95% CI]',
  'p (Holm)',
  'Δrecall [95% CI]',
  'p (Holm)',
];
const ACCURACY_HEADER = [
  'graph',
  'Δaccuracy [95% CI]',
  'b / c',
  'McNemar exact p (Holm)',
  'clustered McNemar p (Holm)',
  'sign',
];

function testText(results: AblationResults): string {
  const how =
    results.method === 'percentile'
      ? 'p inverts the paired cluster-bootstrap interval'
      : 'p from the cluster jackknife t statistic';
  return (
    `Headline test: the paired difference of F1, precision and recall, both graphs resampled on the same clusters (${how}). ` +
    "McNemar's tests are tests of **accuracy** (b = only the graph right, c = only the other right), not of F1: with a class imbalance the two can " +
    'disagree, even in sign. The exact McNemar test treats items as independent; the clustered one (Durkalski) respects the ground-truth clusters. ' +
    'p-values: raw, then Holm-adjusted across the comparisons of this table (each test its own family).'
  );
}

function pairedSection(results: AblationResults): string | null {
  const rows = results.graphs.flatMap((g) =>
    g.paired === null ? [] : [{ label: graphLabel(g), c: g.paired }],
  );
  if (rows.length === 0 || results.reference === null) return null;
  const { headline, accuracy } = comparisonRows(rows);
  return [
    `## Paired comparison with \`${results.reference}\``,
    '',
    `Each graph against \`${results.reference}\` on the items both decided; Δ = graph − ${results.reference}. ${testText(results)}`,
    '',
    table(HEADLINE_HEADER, headline),
    '',
    'Accuracy:',
    '',
    table(ACCURACY_HEADER, accuracy),
  ].join('\n');
}

function baselineSection(results: AblationResults): string | null {
  if (results.baselines.length === 0) return null;
  const rows = results.baselines.map((b) => [
    b.graph,
    num(b.graphCalls, 2),
    num(b.graphTokens, 0),
    b.matchedOn.join(', '),
    b.against,
    num(b.baselineCalls, 2),
    num(b.baselineTokens, 0),
    estimateCell(b.rates.f1),
    pPair(b.rates.f1.p, b.holm.f1),
    estimateCell(b.rates.accuracy),
  ]);
  const perCall = results.graphs.find((g) => g.budget?.byTokens != null)?.budget?.byTokens?.tokensPerCall;
  return [
    '## Budget-matched vote baselines',
    '',
    "`vote-N` = N independent single judges, majority vote. N is the odd number nearest to what the graph **measurably** spent per judgment that reached the LLM: its mean calls, or its mean tokens ÷ a vote judge's measured tokens per call" +
      (perCall === undefined ? '' : ` (${num(perCall, 0)})`) +
      '; an exactly even budget takes the larger N. Odd N: a vote never ties. Δ = graph − baseline on the items both decided; Holm across this table.',
    '',
    table(
      [
        'graph',
        'calls',
        'tokens',
        'matched on',
        'baseline',
        'baseline calls',
        'baseline tokens',
        'ΔF1 [95% CI]',
        'ΔF1 p (Holm)',
        'Δaccuracy [95% CI]',
      ],
      rows,
    ),
  ].join('\n');
}

function biasText(c: ReviewerCalibration): string {
  const on =
    c.negatives === 'hard_negative' ? 'hard negatives' : 'all negatives (the set has no hard negatives)';
  return (
    `Bias on ${on}: FPR ${proportionCell(c.negativeFpr)} − FNR ${proportionCell(c.positiveFnr)} = ` +
    `${estimateCell(c.difference)} → **${biasCell(c)}**; balanced when |FPR − FNR| ≤ ${c.tolerance}`
  );
}

function scoreText(g: GraphResult): string {
  const s = g.scores;
  const what =
    s.kind === 'vote-share'
      ? 'vote share (the fraction of voters saying match: not a confidence, so its ECE is not comparable with a confidence’s)'
      : s.kind === 'confidence'
        ? 'confidence (the deciding node’s, turned towards match)'
        : 'confidence-weighted vote';
  return `Score = ${what}, n = ${s.n}: ECE ${num(s.ece)} · Brier ${num(s.brier)}`;
}

/** One graph's section of the report: its header, the bullet list, then its role, node and dynamics tables. */
function graphSection(g: GraphResult, timing: Timing | undefined): string {
  return [
    ...graphHeading(g),
    ...graphFacts(g),
    '',
    ...roleTable(g, timing),
    ...nodeTable(g),
    ...(g.dynamics === null ? [] : dynamicsLines(g.dynamics)),
  ]
    .join('\n')
    .trimEnd();
}

/** The title, the graph's identity and cost, and its description. */
function graphHeading(g: GraphResult): string[] {
  const facts = [
    `graph \`${g.graph}\` hash \`${g.hash}\``,
    `${g.llmCallsPerJudgment} LLM calls max, critical path ${g.criticalPathCalls}`,
    `${g.rounds} round${g.rounds === 1 ? '' : 's'}`,
  ];
  if (g.aliases.length > 0) facts.push(`also asked for as ${g.aliases.map((a) => `\`${a}\``).join(', ')}`);
  if (g.baselineFor.length > 0) {
    facts.push(`vote baseline for ${g.baselineFor.map((b) => `\`${b.graph}\` (${b.matchedOn})`).join(', ')}`);
  }
  return [
    `### ${g.name}`,
    '',
    `${facts.join(' · ')}${g.description === null ? '' : `  \n${g.description}`}`,
    '',
  ];
}

/** The bullet list: cascade, confusion, accuracy, calibration and bias, kinds, scores, statuses, spend, agents. */
function graphFacts(g: GraphResult): string[] {
  const out: string[] = [];
  const m = g.metrics;
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
    `- Reviewer calibration (all decided items): TPR ${num(g.calibration.tpr)} · TNR ${num(g.calibration.tnr)} · FPR ${num(g.calibration.fpr)} · FNR ${num(g.calibration.fnr)}`,
    `- ${biasText(g.calibration)}`,
    `- Accept rate by kind: ${Object.entries(g.byKind)
      .map(([kind, p]) => `${kind} ${proportionCell(p)}`)
      .join(' · ')}`,
    `- ${scoreText(g)}`,
    `- ${statusText(g)}`,
  );
  if (g.budget !== null) out.push(`- ${budgetText(g.budget)}`);
  if (g.oracleGap !== null) {
    out.push(
      `- Oracle gap (some agent right at some point, verdict wrong; ok judgments): ${proportionCell(g.oracleGap)}`,
    );
  }
  for (const a of g.agreement) {
    out.push(
      `- Fleiss κ among parallel ${a.role}s (${a.nodes.join(', ')}), ${a.subjects} judgments: ${num(a.kappa)}`,
    );
  }
  return out;
}

function statusText(g: GraphResult): string {
  return `Statuses: ${Object.entries(g.statuses)
    .filter(([, n]) => n > 0)
    .map(([s, n]) => `${s} ${n}`)
    .join(' · ')}; failure rate ${proportionCell(g.failure)}${
    Object.keys(g.failureCodes).length === 0
      ? ''
      : ` — ${Object.entries(g.failureCodes)
          .map(([c, n]) => `${c} ${n}`)
          .join(', ')}`
  }`;
}

function budgetText(b: Budget): string {
  const same = b.byCalls !== null && b.byTokens !== null && b.byCalls.baseline === b.byTokens.baseline;
  const matched = same
    ? [`\`${b.byCalls?.baseline ?? ''}\` (calls, tokens)`]
    : [
        ...(b.byCalls === null ? [] : [`\`${b.byCalls.baseline}\` (calls)`]),
        ...(b.byTokens === null ? [] : [`\`${b.byTokens.baseline}\` (tokens)`]),
      ];
  return `Spend per LLM-reaching judgment: ${num(b.meanCalls, 2)} calls, ${num(b.meanTokens, 0)} tokens → baseline ${matched.join(', ')}`;
}

/** Per role: calls and tokens per judgment (and the latency p50 when timing is given); none without roles. */
function roleTable(g: GraphResult, timing: Timing | undefined): string[] {
  const roleTiming = timing?.graphs[g.name]?.perRole ?? {};
  const roles = Object.entries(g.usage.perRole);
  if (roles.length === 0) return [];
  const reasoning = roles.some(([, u]) => (u.reasoningTokensPerJudgment ?? 0) > 0);
  return [
    table(
      [
        'role',
        'calls/judgment',
        'prompt tokens/judgment',
        'completion tokens/judgment',
        ...(reasoning ? ['reasoning tokens/judgment'] : []),
        ...(timing === undefined ? [] : ['latency p50 ms']),
      ],
      roles.map(([role, u]) => [
        role,
        num(u.callsPerJudgment, 2),
        num(u.promptTokensPerJudgment, 0),
        num(u.completionTokensPerJudgment, 0),
        ...(reasoning ? [reasoningCell(u.reasoningTokensPerJudgment, g.usage.reasoningTokensEstimated)] : []),
        ...(timing === undefined ? [] : [num(roleTiming[role]?.p50, 0)]),
      ]),
    ),
    '',
  ];
}

/** Per node (graphs of more than one): its final stance against the label, and its bias. */
function nodeTable(g: GraphResult): string[] {
  if (g.nodes.length <= 1) return [];
  return [
    'Per node (final stance of each agent vs the label, ok judgments; bias on hard negatives):',
    '',
    table(
      ['node', 'role', 'n', 'TPR', 'TNR', 'FPR hard neg', 'FNR', 'FPR − FNR [95% CI]', 'bias'],
      g.nodes.map((n) => [
        n.nodeId,
        n.role,
        String(n.n),
        num(n.tpr),
        num(n.tnr),
        num(n.negativeFpr.rate),
        num(n.positiveFnr.rate),
        estimateCell(n.difference),
        biasCell(n),
      ]),
    ),
    '',
  ];
}

/** A debate's dynamics: rounds used, stop reasons and switches, stances per round, switches between rounds. */
function dynamicsLines(d: NonNullable<GraphResult['dynamics']>): string[] {
  const out: string[] = [
    `Debate dynamics (${d.judgments} ok judgments): rounds used ${Object.entries(d.roundsUsed)
      .map(([r, n]) => `${r}: ${n}`)
      .join(', ')}; stop reasons ${Object.entries(d.stopReasons)
      .map(([r, n]) => `${r}: ${n}`)
      .join(
        ', ',
      )}; harmful switches ${d.harmful}, helpful switches ${d.helpful} (of ${d.trajectories} agent trajectories).`,
    '',
  ];
  const nodeIds = Object.keys(d.perRound[0]?.nodes ?? {});
  out.push(
    table(
      ['round', ...nodeIds.map((id) => `${id} match / no_match`)],
      d.perRound.map((r) => [
        String(r.round),
        ...nodeIds.map((id) => {
          const c = r.nodes[id];
          return c === undefined ? DASH : `${c.match} / ${c.no_match}`;
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
  return out;
}

/** `mean ± sd` of a rate over the epochs. */
function spreadCell(r: { mean: number | null; sd: number | null }): string {
  return r.mean === null ? DASH : `${num(r.mean)} ± ${num(r.sd)}`;
}

/** Between-epoch variance beside epoch 1's intervals; null without repeats. */
function epochSection(results: AblationResults): string | null {
  const e = results.epochs;
  if (e === undefined || e.epochs < 2) return null;
  const rows = results.graphs.map((g) => {
    const s = e.graphs[g.name];
    return [
      graphLabel(g),
      withCi(g.metrics.point.f1, g.metrics.ci.f1),
      s === undefined ? DASH : spreadCell(s.f1),
      s === undefined ? DASH : spreadCell(s.accuracy),
      s === undefined ? DASH : `${s.sameVerdict}/${s.decidedEveryEpoch}`,
      s === undefined ? DASH : num(s.meanItemVariance),
    ];
  });
  return [
    `## Repeats (${e.epochs} epochs)`,
    '',
    `Every item was judged ${e.epochs} times, each with its own seeded nonce. The intervals are over epoch 1 ` +
      '(items are the sampling unit); the spread between epochs is what the judge’s own noise moves a rate.',
    '',
    table(
      [
        'graph',
        'F1 epoch 1 [95% CI]',
        'F1 over epochs (mean ± sd)',
        'accuracy over epochs',
        'same verdict every epoch',
        'mean item variance',
      ],
      rows,
    ),
  ].join('\n');
}

/** Only the summary table (what the CLI prints), after the warnings. */
export function renderSummary(results: AblationResults, timing?: Timing): string {
  const warnings = results.warnings.map((w) => `WARNING: ${w}\n\n`).join('');
  const epochs = epochSection(results);
  return `${warnings}${summaryTable(results, timing)}\n${epochs === null ? '' : `\n${epochs}\n`}`;
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
    ...results.warnings.flatMap((w) => [`> **Warning**: ${w}.`, '']),
    methodText(results),
    '',
    summaryTable(results, timing),
    '',
    'Plots: [precision vs recall](precision-recall.svg), [F1 vs tokens per judgment](f1-vs-tokens.svg).',
    '',
    viewsTable(results),
    '',
  ];
  const epochs = epochSection(results);
  if (epochs !== null) parts.push(epochs, '');
  const paired = pairedSection(results);
  if (paired !== null) parts.push(paired, '');
  const baselines = baselineSection(results);
  if (baselines !== null) parts.push(baselines, '');
  parts.push('## Per graph', '');
  for (const g of results.graphs) parts.push(graphSection(g, timing), '');
  return `${parts.join('\n').trimEnd()}\n`;
}
