/** `report.md` of a calibration run. */
import { biasCell, biasRuleText } from '../format.js';
import type { BinomialInterval } from './binomial.js';
import type { Prediction } from './condorcet.js';
import type { CalibrationResults, CommitteeResult } from './analyze.js';
import type { Plan, PlannedCommittee } from './plan.js';

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

function planLines(p: Plan): string[] {
  const unit = p.unit === 'usd' ? 'USD' : 'tokens';
  const show = (c: PlannedCommittee | null): string =>
    c === null
      ? '—'
      : `${c.members.join(' + ')}: ${pred(c.predicted)}, ${num(c.cost, p.unit === 'usd' ? 6 : 0)} ${unit}/judgment`;
  return [
    `## Budgeted committee (majority of ${p.size}, budget ${p.budget} ${unit} per judgment)`,
    '',
    `${p.candidates.length} candidate seats, ${p.considered} committees within budget, scored on the measured joint vote distribution.`,
    '',
    `- best: ${show(p.best)}`,
    `- what an independence-based planner picks: ${show(p.independenceChoice)}`,
    `- best single member within budget: ${show(p.bestSingle)}`,
    `- committee gain over the best single member: ${pct(p.committeeGain)} points; of it from decorrelation (best − independence pick): ${pct(p.decorrelationGain)} points`,
  ];
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
  if (r.plan !== null) lines.push('', ...planLines(r.plan));
  if (r.suggestions !== null) {
    lines.push('', '## Strictness suggestions', '');
    if (r.suggestions.length === 0)
      lines.push(
        'No member has a bias the data show (no permissive or strict label is shown by its interval).',
      );
    for (const s of r.suggestions) {
      const effect =
        s.measured === null
          ? 'not measured: add a graph with this node at that strictness to the run'
          : `measured in ${s.measured.member}: FPR ${pct(s.measured.fprChange)}, FNR ${pct(s.measured.fnrChange)} points`;
      lines.push(
        `- ${s.member} is ${s.bias}: \`strictness: "${s.suggested}"\` (now ${s.current}); ${effect}`,
      );
    }
  }
  lines.push('');
  return lines.join('\n');
}
