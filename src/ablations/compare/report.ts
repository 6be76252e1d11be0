/** Markdown of a run-to-run comparison (compare/run.ts). */
import { DASH, pPair, table, withCi } from '../format.js';
import type { Comparison } from './run.js';

/** How many flipped items each graph lists before "… and N more". */
export const FLIPS_SHOWN = 30;

export function renderComparison(c: Comparison): string {
  const parts = [
    '# Run comparison (B − A)',
    '',
    `- A: \`${c.a.dir}\` — ${c.a.describe}`,
    `- B: \`${c.b.dir}\` — ${c.b.describe}`,
    '',
    'Paired on the items both runs decided (epoch 1), clustered by ground truth: cluster jackknife-t ' +
      'intervals of B − A; McNemar (clustered) tests accuracy; Holm over the graphs compared.',
    '',
    table(
      [
        'graph (A → B)',
        'shared items',
        'ΔF1 [95% CI]',
        'Δprecision',
        'Δrecall',
        'Δaccuracy',
        'p ΔF1 (Holm)',
        'McNemar p (Holm)',
        'flipped',
      ],
      c.graphs.map((g) => [
        g.a === g.b ? g.a : `${g.a} → ${g.b}`,
        String(g.rates.n),
        withCi(g.rates.f1.point, g.rates.f1.ci),
        withCi(g.rates.precision.point, g.rates.precision.ci),
        withCi(g.rates.recall.point, g.rates.recall.ci),
        withCi(g.rates.accuracy.point, g.rates.accuracy.ci),
        pPair(g.rates.f1.p, g.holmF1),
        pPair(g.rates.mcnemar.clusteredP, g.holmMcnemar),
        String(g.flips.length),
      ]),
    ),
    '',
  ];
  if (c.onlyA.length > 0 || c.onlyB.length > 0) {
    parts.push(
      `Not compared: only in A ${c.onlyA.join(', ') || DASH}; only in B ${c.onlyB.join(', ') || DASH}.`,
      '',
    );
  }
  for (const g of c.graphs) {
    if (g.unlabelled > 0)
      parts.push(`${g.a}: ${g.unlabelled} items carry no label (older records) and are left out.`, '');
    if (g.flips.length === 0) continue;
    parts.push(`## Flipped verdicts: ${g.a === g.b ? g.a : `${g.a} → ${g.b}`} (${g.flips.length})`, '');
    const rows = g.flips
      .slice(0, FLIPS_SHOWN)
      .map((f) => [
        f.item,
        f.label === null ? DASH : f.label === 1 ? 'match' : 'no_match',
        f.a,
        f.b,
        f.label === null
          ? DASH
          : f.b === (f.label === 1 ? 'match' : 'no_match')
            ? 'B right'
            : f.a === (f.label === 1 ? 'match' : 'no_match')
              ? 'A right'
              : 'neither',
      ]);
    parts.push(table(['item', 'label', 'A', 'B', 'who is right'], rows), '');
    if (g.flips.length > FLIPS_SHOWN)
      parts.push(`… and ${g.flips.length - FLIPS_SHOWN} more (compare.json).`, '');
  }
  return `${parts.join('\n').trimEnd()}\n`;
}
