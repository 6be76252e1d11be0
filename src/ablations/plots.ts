/**
 * Hand-drawn SVG plots (no dependencies): precision vs recall with CI whiskers, and F1 vs tokens per
 * judgment. Output is deterministic for the same results (no timestamps, fixed number formatting).
 */
import type { AblationResults, GraphResult } from './types.js';

export interface PlotPoint {
  label: string;
  x: number;
  y: number;
  xLo?: number | null | undefined;
  xHi?: number | null | undefined;
  yLo?: number | null | undefined;
  yHi?: number | null | undefined;
  /** Drawn hollow (automatically added baselines). */
  hollow?: boolean | undefined;
}

export interface Guide {
  /** Polyline in data coordinates. */
  points: readonly (readonly [number, number])[];
  label: string;
}

export interface ScatterOptions {
  title: string;
  xLabel: string;
  yLabel: string;
  points: readonly PlotPoint[];
  xDomain: readonly [number, number];
  yDomain: readonly [number, number];
  guides?: readonly Guide[] | undefined;
  /** Text under the plot (e.g. what the whiskers are). */
  note?: string | undefined;
}

const WIDTH = 780;
const HEIGHT = 520;
const MARGIN = { left: 70, right: 200, top: 50, bottom: 80 };
const CHAR_WIDTH = 6.5;
const PALETTE = [
  '#1f77b4',
  '#d62728',
  '#2ca02c',
  '#9467bd',
  '#ff7f0e',
  '#8c564b',
  '#e377c2',
  '#17becf',
  '#7f7f7f',
  '#bcbd22',
];

export function escapeXml(text: string): string {
  return text.replace(/[<>&'"]/g, (c) =>
    c === '<' ? '&lt;' : c === '>' ? '&gt;' : c === '&' ? '&amp;' : c === "'" ? '&apos;' : '&quot;',
  );
}

const fmt = (v: number): string => (Math.round(v * 100) / 100).toString();

/** A lower axis bound for values in [0,1]: 0.05 below the smallest, rounded down to a tenth. */
const floor = (v: number): number => Math.max(0, Math.floor((v - 0.05) * 10) / 10);

/** 4–8 "nice" tick values (1, 2, 5 × 10^k steps) covering the domain. */
export function niceTicks(lo: number, hi: number, target = 5): number[] {
  const span = hi - lo;
  if (!(span > 0)) return [lo];
  const raw = span / target;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => span / s <= target + 1) ?? 10 * power;
  const ticks: number[] = [];
  for (let i = Math.ceil(lo / step); i * step <= hi + step * 1e-9 && ticks.length < 50; i++) {
    ticks.push(Number((i * step).toPrecision(12)));
  }
  return ticks;
}

/** A labelled scatter plot with optional CI whiskers and guide curves, as an SVG document. */
export function scatterSvg(options: ScatterOptions): string {
  const [x0, x1] = options.xDomain;
  const [y0, y1] = options.yDomain;
  const plotW = WIDTH - MARGIN.left - MARGIN.right;
  const plotH = HEIGHT - MARGIN.top - MARGIN.bottom;
  const sx = (x: number) => MARGIN.left + ((x - x0) / (x1 - x0 || 1)) * plotW;
  const sy = (y: number) => MARGIN.top + plotH - ((y - y0) / (y1 - y0 || 1)) * plotH;
  const px = (v: number) => sx(v).toFixed(1);
  const py = (v: number) => sy(v).toFixed(1);
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" font-family="sans-serif" font-size="12">`,
    `<rect width="${WIDTH}" height="${HEIGHT}" fill="white"/>`,
    `<text x="${WIDTH / 2}" y="24" text-anchor="middle" font-size="16">${escapeXml(options.title)}</text>`,
  );
  // Grid and ticks.
  for (const t of niceTicks(x0, x1)) {
    out.push(
      `<line x1="${px(t)}" y1="${py(y0)}" x2="${px(t)}" y2="${py(y1)}" stroke="#e5e5e5"/>`,
      `<text x="${px(t)}" y="${(sy(y0) + 16).toFixed(1)}" text-anchor="middle">${fmt(t)}</text>`,
    );
  }
  for (const t of niceTicks(y0, y1)) {
    out.push(
      `<line x1="${px(x0)}" y1="${py(t)}" x2="${px(x1)}" y2="${py(t)}" stroke="#e5e5e5"/>`,
      `<text x="${(sx(x0) - 8).toFixed(1)}" y="${(sy(t) + 4).toFixed(1)}" text-anchor="end">${fmt(t)}</text>`,
    );
  }
  out.push(
    `<rect x="${MARGIN.left}" y="${MARGIN.top}" width="${plotW}" height="${plotH}" fill="none" stroke="#333"/>`,
    `<text x="${MARGIN.left + plotW / 2}" y="${HEIGHT - MARGIN.bottom + 40}" text-anchor="middle">${escapeXml(options.xLabel)}</text>`,
    `<text transform="translate(20 ${MARGIN.top + plotH / 2}) rotate(-90)" text-anchor="middle">${escapeXml(options.yLabel)}</text>`,
  );
  const inside = (x: number, y: number) => x >= x0 && x <= x1 && y >= y0 && y <= y1;
  for (const guide of options.guides ?? []) {
    const pts = guide.points.filter(([x, y]) => inside(x, y));
    const first = pts[0];
    if (pts.length < 2 || first === undefined) continue;
    out.push(
      `<polyline points="${pts.map(([x, y]) => `${px(x)},${py(y)}`).join(' ')}" fill="none" stroke="#999" stroke-dasharray="4 3"/>`,
      `<text x="${(sx(first[0]) + 4).toFixed(1)}" y="${(sy(first[1]) + 12).toFixed(1)}" fill="#777" font-size="10">${escapeXml(guide.label)}</text>`,
    );
  }
  // Point labels: greedy placement that avoids earlier labels; a label that finds no free spot is left to
  // the legend.
  const placed: { x: number; y: number; w: number }[] = [];
  const collides = (x: number, y: number, w: number) =>
    placed.some((b) => x < b.x + b.w && b.x < x + w && Math.abs(b.y - y) < 12);
  const plotRight = MARGIN.left + plotW;
  options.points.forEach((p, i) => {
    const color = PALETTE[i % PALETTE.length] ?? '#000';
    const cx = sx(p.x);
    const cy = sy(p.y);
    const clampX = (v: number) => Math.min(x1, Math.max(x0, v));
    const clampY = (v: number) => Math.min(y1, Math.max(y0, v));
    if (p.xLo != null && p.xHi != null) {
      out.push(
        `<line x1="${px(clampX(p.xLo))}" y1="${cy.toFixed(1)}" x2="${px(clampX(p.xHi))}" y2="${cy.toFixed(1)}" stroke="${color}" stroke-width="1.5"/>`,
      );
    }
    if (p.yLo != null && p.yHi != null) {
      out.push(
        `<line x1="${cx.toFixed(1)}" y1="${py(clampY(p.yLo))}" x2="${cx.toFixed(1)}" y2="${py(clampY(p.yHi))}" stroke="${color}" stroke-width="1.5"/>`,
      );
    }
    out.push(
      `<circle cx="${cx.toFixed(1)}" cy="${cy.toFixed(1)}" r="5" fill="${p.hollow === true ? 'white' : color}" stroke="${color}" stroke-width="2"><title>${escapeXml(`${p.label}: (${fmt(p.x)}, ${fmt(p.y)})`)}</title></circle>`,
    );
    const w = p.label.length * CHAR_WIDTH;
    const x = cx + 8 + w <= plotRight ? cx + 8 : cx - 8 - w;
    const y = [cy - 6, cy + 16, cy - 20, cy + 30, cy - 34, cy + 44].find((cand) => !collides(x, cand, w));
    if (y !== undefined) {
      placed.push({ x, y, w });
      out.push(`<text x="${x.toFixed(1)}" y="${y.toFixed(1)}" fill="${color}">${escapeXml(p.label)}</text>`);
    }
    // Legend on the right, in the same order.
    const ly = MARGIN.top + 10 + i * 18;
    out.push(
      `<circle cx="${WIDTH - MARGIN.right + 30}" cy="${ly}" r="5" fill="${p.hollow === true ? 'white' : color}" stroke="${color}" stroke-width="2"/>`,
      `<text x="${WIDTH - MARGIN.right + 42}" y="${ly + 4}">${escapeXml(p.label)}</text>`,
    );
  });
  if (options.note !== undefined) {
    out.push(
      `<text x="${MARGIN.left}" y="${HEIGHT - 14}" fill="#555" font-size="11">${escapeXml(options.note)}</text>`,
    );
  }
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

function plotted(results: AblationResults): GraphResult[] {
  return results.graphs;
}

function ciNote(results: AblationResults, what: 'pr' | 'f1'): string {
  const level = Math.round(results.level * 100);
  const f1 =
    results.method === 'percentile'
      ? `cluster bootstrap (${results.resamples} resamples, seed ${results.seed})`
      : 'cluster jackknife t';
  const whiskers = what === 'pr' ? 'exact (Clopper–Pearson, design effect)' : f1;
  return `Whiskers: ${level}% ${whiskers} CI; hollow = automatically added graph. n = ${results.dataset.items} items.`;
}

/** Precision (y) vs recall (x) per graph with CI whiskers, F1 iso-curves and the base-rate line. */
export function precisionRecallSvg(results: AblationResults): string {
  const points: PlotPoint[] = [];
  for (const g of plotted(results)) {
    const { precision, recall } = g.metrics.point;
    if (precision === null || recall === null) continue;
    points.push({
      label: g.name,
      x: recall,
      y: precision,
      xLo: g.metrics.ci.recall.lo,
      xHi: g.metrics.ci.recall.hi,
      yLo: g.metrics.ci.precision.lo,
      yHi: g.metrics.ci.precision.hi,
      hollow: g.auto,
    });
  }
  const guides: Guide[] = [];
  for (const f of [0.5, 0.7, 0.9]) {
    const curve: [number, number][] = [];
    for (let k = 0; k <= 100; k++) {
      const r = f / 2 + ((1 - f / 2) * k) / 100;
      const p = (f * r) / (2 * r - f);
      if (r > f / 2 && p <= 1) curve.push([r, p]);
    }
    guides.push({ points: curve, label: `F1=${f}` });
  }
  const base = results.dataset.items === 0 ? 0 : results.dataset.positives / results.dataset.items;
  // Zoom to the data (in steps of 0.1) so close graphs stay distinguishable; the base rate stays in view.
  const xMin = floor(Math.min(1, ...points.map((p) => p.xLo ?? p.x)));
  const yMin = floor(Math.min(1, base, ...points.map((p) => p.yLo ?? p.y)));
  guides.push({
    points: [
      [xMin, base],
      [1, base],
    ],
    label: `base rate ${fmt(base)}`,
  });
  return scatterSvg({
    title: 'Precision vs recall per judge graph',
    xLabel: 'recall',
    yLabel: 'precision',
    points,
    xDomain: [xMin, 1],
    yDomain: [yMin, 1],
    guides,
    note: ciNote(results, 'pr'),
  });
}

/** F1 (y, with CI whiskers) vs mean tokens per judgment (x). */
export function f1CostSvg(results: AblationResults): string {
  const points: PlotPoint[] = [];
  for (const g of plotted(results)) {
    const f1 = g.metrics.point.f1;
    const tokens = g.usage.tokensPerJudgment;
    if (f1 === null || tokens === null) continue;
    points.push({
      label: g.name,
      x: tokens,
      y: f1,
      yLo: g.metrics.ci.f1.lo,
      yHi: g.metrics.ci.f1.hi,
      hollow: g.auto,
    });
  }
  const maxX = Math.max(1, ...points.map((p) => p.x)) * 1.08;
  const ticks = niceTicks(0, maxX);
  const step = (ticks[1] ?? maxX) - (ticks[0] ?? 0);
  const top = Math.max(maxX, Math.ceil(maxX / step) * step);
  return scatterSvg({
    title: 'F1 vs cost per judgment',
    xLabel: 'tokens per judgment (prompt + completion, mean)',
    yLabel: 'F1',
    points,
    xDomain: [0, top],
    yDomain: [floor(Math.min(1, ...points.map((p) => p.yLo ?? p.y))), 1],
    note: ciNote(results, 'f1'),
  });
}
