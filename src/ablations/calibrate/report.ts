/** `report.md` of a calibration run. */
import { biasCell, biasRuleText } from '../format.js';
import type { BinomialInterval } from './binomial.js';
import type { Prediction } from './condorcet.js';
import type { CalibrationResults, CommitteeResult, EmittedGraph, PlanResult } from './analyze.js';
import type { HeldOutScore, SplitSummary } from './holdout.js';
import type { PlannedCommittee } from './plan.js';
import type { Suggestion } from './suggest.js';

function pct(x: number | null | undefined): string {
  return x == null ? '—' : (100 * x).toFixed(1);
}

/** `rate [lo, hi]` in %; with few events also the cluster-level bound (holds at any intra-cluster correlation). */
function ci(i: BinomialInterval): string {
  if (i.rate === null) return '—';
  const cell = `${pct(i.rate)} [${pct(i.lo)}, ${pct(i.hi)}]`;
  const bound = i.clusterLevel;
  if (bound === null || bound === undefined) return cell;
  return `${cell} (clustered ${i.x <= i.n - i.x ? `≤ ${pct(bound.hi)}` : `≥ ${pct(bound.lo)}`})`;
}

function num(x: number | null, digits = 3): string {
  return x === null ? '—' : x.toFixed(digits);
}

function pred(p: Prediction | null): string {
  return p === null ? '—' : `${pct(p.accuracy)} (P ${pct(p.precision)}, R ${pct(p.recall)})`;
}

function committeeLines(c: CommitteeResult): string[] {
  const o = c.observed;
  const lines = [
    `### ${c.graph} (${c.rule}, ${c.voters.length} voters)`,
    '',
    `Observed: accuracy ${ci(o.accuracy)}, precision ${ci(o.precision)}, recall ${ci(o.tpr)} over ${o.n} decided` +
      ` items (${o.failures} failures excluded). Mean member error: ${pct(c.meanError.positive)} on positives,` +
      ` ${pct(c.meanError.negative)} on negatives; mean pairwise error φ: ${num(c.rho.positive)} / ${num(c.rho.negative)}` +
      `${c.rhoNote === null ? '' : ` (${c.rhoNote})`}.`,
    '',
    '| rule | independent | joint (measured) | beta-binomial |',
    '|---|---|---|---|',
  ];
  for (const p of c.predictions) {
    const own = p.rule === c.rule ? ' (own rule)' : '';
    lines.push(`| ${p.rule}${own} | ${pred(p.independent)} | ${pred(p.joint)} | ${pred(p.betaBinomial)} |`);
  }
  const says: string[] = [];
  for (const [model, check] of Object.entries(c.check)) {
    if (check.inside === null) continue;
    const where = check.overPromises
      ? 'over-promises (above the observed CI)'
      : check.inside
        ? 'inside the observed CI'
        : 'below the observed CI';
    says.push(`${model} ${pct(check.accuracy)}: ${where}`);
  }
  lines.push('', `Own rule, predicted accuracy vs observed: ${says.join('; ')}.`, '');
  return lines;
}

function splitLines(split: SplitSummary): string[] {
  const side = (p: SplitSummary['selection']) =>
    `${p.items} items (${p.clusters} ground-truth clusters, ${p.positives} positives, ${p.negatives} negatives)`;
  return [
    '## Selection and held-out items',
    '',
    `The committee plan and the strictness suggestions are chosen on one part of the items and scored on the other;` +
      ` items sharing a ground truth stay on one side (seed ${split.seed}, ${Math.round(split.fraction * 100)} % of the clusters held out).`,
    '',
    `- chosen on: ${side(split.selection)}`,
    `- held out: ${side(split.heldOut)}`,
    ...split.warnings.map((w) => `- **warning:** ${w}`),
  ];
}

function heldOutCell(s: HeldOutScore | null): string {
  return s === null
    ? '—'
    : `${ci(s.accuracy)} (P ${pct(s.precision.rate)}, R ${pct(s.tpr.rate)}; ${s.n} items)`;
}

function planLines(p: PlanResult, emitted: EmittedGraph | null | undefined): string[] {
  const unit = p.unit === 'usd' ? 'USD' : 'tokens';
  const cost = (c: PlannedCommittee) => `${num(c.cost, p.unit === 'usd' ? 6 : 0)} ${unit}/judgment`;
  const row = (what: string, c: PlannedCommittee | null, held: HeldOutScore | null): string =>
    c === null
      ? `| ${what} | — | — | — | — |`
      : `| ${what} | ${c.members.join(' + ')} | ${cost(c)} | ${pred(c.predicted)} | ${heldOutCell(held)} |`;
  const h = p.heldOut;
  const lines = [
    `## Budgeted committee (majority of ${p.size}, budget ${p.budget} ${unit} per judgment)`,
    '',
    `${p.candidates.length} candidate seats, ${p.considered} runnable committees within budget, scored on the` +
      ' measured joint vote distribution of the selection items; the chosen ones replayed on the held-out items.',
    '',
    '| committee | members | cost | accuracy where chosen (P, R) | held-out accuracy [CI] (P, R) |',
    '|---|---|---|---|---|',
    row('best', p.best, h.best),
    row('independence-based pick', p.independenceChoice, h.independenceChoice),
    row('best single member', p.bestSingle, h.bestSingle),
    '',
    `Where chosen: committee gain over the best single member ${pct(p.committeeGain)} points, of it from decorrelation` +
      ` ${pct(p.decorrelationGain)}. Held out: ${pct(h.committeeGain)} and ${pct(h.decorrelationGain)} points;` +
      ` the best committee's accuracy fell by ${pct(h.optimism)} points from where it was chosen (the optimism of` +
      ' scoring a choice on the items it was chosen on).',
  ];
  if (p.graph !== null) {
    lines.push(
      '',
      'Runnable graph: ' +
        p.graph.seats.map((s) => `\`${s.id}\` ← ${s.member}`).join(', ') +
        (emitted == null ? '.' : ` in \`${emitted.file}\`. Evaluate it on the held-out items:`),
    );
    if (emitted != null) lines.push('', '```sh', emitted.command, '```');
  }
  return lines;
}

function suggestionLine(s: Suggestion): string {
  const effect =
    s.measured === null
      ? 'not measured: add a graph with this node at that strictness to the run'
      : `measured in ${s.measured.member}: FPR ${pct(s.measured.fprChange)}, FNR ${pct(s.measured.fnrChange)} points`;
  const held =
    s.heldOut === null
      ? ''
      : `; held out (${s.heldOut.n} items): ${s.heldOut.bias ?? '—'}${s.heldOut.confirmed ? ', confirmed' : ', not confirmed'}`;
  return `- ${s.member} is ${s.bias}: \`strictness: "${s.suggested}"\` (now ${s.current}); ${effect}${held}`;
}

export function renderCalibrationReport(r: CalibrationResults): string {
  const level = `${Math.round(r.level * 100)} %`;
  const lines: string[] = [
    '# Committee calibration',
    '',
    `Backend \`${r.backend}\` · prompt ${r.promptVersion} · dataset ${r.datasetSha256} · ${r.items} items` +
      ` (${r.hardNegatives} hard negatives) · ${level} Clopper–Pearson intervals (percent).`,
    r.backend === 'offline'
      ? '\n> Offline backend: a deterministic term-overlap heuristic, not an LLM. Its members are nearly identical.\n'
      : '',
    '## Members alone',
    '',
    '| member | role | n | TPR | TNR | FPR | FNR | accuracy | bias (basis: FPR − FNR) |',
    '|---|---|---|---|---|---|---|---|---|',
  ];
  for (const m of r.members) {
    const d = m.bias.difference;
    const bias =
      m.bias.label === null || d === null
        ? biasCell({ bias: null, shown: null })
        : `${biasCell({ bias: m.bias.label, shown: m.bias.shown })} (${m.bias.basis === 'hard_negatives' ? 'hard neg.' : 'negatives'}: ${pct(d.point)} [${pct(d.lo)}, ${pct(d.hi)}])`;
    lines.push(
      `| ${m.member.key} | ${m.member.role} | ${m.n} | ${ci(m.tpr)} | ${ci(m.tnr)} | ${ci(m.fpr)} | ${ci(m.fnr)} | ${ci(m.accuracy)} | ${bias} |`,
    );
  }
  lines.push(
    '',
    'Rates: exact (Clopper–Pearson) intervals over the ground-truth clusters (design effect, few-cluster factor); with fewer than 5 events also the cluster-level bound. Bias (the rule `ablate` applies to graphs and agents) — ' +
      `${biasRuleText()}; this table prints d in percent (0.05 = 5.0), its interval Newcombe's on design-effect-adjusted counts.`,
    '',
    '## Pairwise error correlation (φ on errors)',
    '',
    'Pairs within one graph; every pair (across graphs too) is in `calibration.json`. CI: clustered bootstrap over ground truths.',
    '',
    '| a | b | n | both wrong | only a | only b | φ [CI] | φ positives | φ negatives |',
    '|---|---|---|---|---|---|---|---|---|',
  );
  const graphOf = new Map(r.members.map((m) => [m.member.key, m.member.graph]));
  for (const p of r.correlations) {
    if (graphOf.get(p.a) !== graphOf.get(p.b)) continue;
    lines.push(
      `| ${p.a} | ${p.b} | ${p.n} | ${p.table.both} | ${p.table.firstOnly} | ${p.table.secondOnly} | ${num(p.phi)} [${num(p.ci.lo)}, ${num(p.ci.hi)}] | ${num(p.phiPositive)} | ${num(p.phiNegative)} |`,
    );
  }
  lines.push(
    '',
    '## Condorcet predictions beside observed committees',
    '',
    '`independent`: members err independently given the label. `joint`: the measured joint distribution of the' +
      ' members’ votes (for the graph’s own rule it reproduces the run, a consistency check; for the other rules' +
      ' it is a prediction). `beta-binomial`: exchangeable members with the mean per-class error and the mean' +
      ' per-class pairwise error φ as ρ. Accuracy (precision, recall) in percent at the items’ prevalence.',
    '',
  );
  if (r.committees.length === 0) lines.push('No single-round vote committee among the graphs.', '');
  for (const c of r.committees) lines.push(...committeeLines(c));
  lines.push(
    '## Cost per correct judgment',
    '',
    '| graph | decided | correct | correct accepts | FP | FN | calls/correct | tokens/correct | tokens/correct accept | USD/correct | review impact USD/item |',
    '|---|---|---|---|---|---|---|---|---|---|---|',
  );
  for (const c of r.costs) {
    lines.push(
      `| ${c.graph} | ${c.decided} | ${c.correct} | ${c.correctAccepts} | ${c.falsePositives} | ${c.falseNegatives} | ${num(c.callsPerCorrect, 2)} | ${num(c.tokensPerCorrect, 0)} | ${num(c.tokensPerCorrectAccept, 0)} | ${num(c.usdPerCorrect, 6)} | ${num(c.impactPerItemUsd, 4)} |`,
    );
  }
  const k = r.costInputs;
  if (r.cheapest !== null) {
    lines.push(
      '',
      `Review impact = FP × ${k.costFp ?? 0} + FN × ${k.costFn ?? 0} (+ token cost) per decided item; cheapest overall: **${r.cheapest}**.`,
    );
  }
  if (r.split !== null) lines.push('', ...splitLines(r.split));
  if (r.plan !== null) lines.push('', ...planLines(r.plan, r.committeeGraph));
  if (r.suggestions !== null) {
    lines.push('', '## Strictness suggestions (chosen on the selection items)', '');
    if (r.suggestions.length === 0)
      lines.push(
        'No member has a bias the data show (no permissive or strict label is shown by its interval).',
      );
    for (const s of r.suggestions) lines.push(suggestionLine(s));
  }
  lines.push('');
  return lines.join('\n');
}
