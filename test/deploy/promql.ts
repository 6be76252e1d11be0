/**
 * The metric names a PromQL expression selects, without a PromQL parser: strings, label matchers, range
 * and subquery brackets, offsets and grouping label lists are blanked first, then every identifier that
 * is not a call, a keyword or an aggregation is a metric name. Prometheus itself checks that the
 * expression parses (the dashboard test sends each one to /api/v1/query).
 */
const STRINGS = /"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g;
const KEYWORDS = new Set([
  'and',
  'or',
  'unless',
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'bool',
  'offset',
  'atan2',
  'inf',
  'nan',
  // Aggregation operators can take their grouping before the parenthesis: `sum by (le) (…)`.
  'sum',
  'min',
  'max',
  'avg',
  'group',
  'stddev',
  'stdvar',
  'count',
  'count_values',
  'bottomk',
  'topk',
  'quantile',
]);

export function metricNames(expr: string): string[] {
  const blanked = expr
    .replace(STRINGS, '""')
    .replace(/#[^\n]*/g, ' ')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ')
    .replace(/\boffset\s+-?\w+/g, ' ')
    .replace(/@\s*(start|end)\s*\(\s*\)|@\s*[\d.]+/g, ' ');
  const names = new Set<string>();
  for (const m of blanked.matchAll(/(?<![\w.:])([a-zA-Z_:][\w:]*)(\s*\()?/g)) {
    if (m[2] !== undefined || KEYWORDS.has(m[1]!.toLowerCase())) continue;
    names.add(m[1]!);
  }
  return [...names].sort();
}

export interface Selector {
  name: string;
  /** Label names its matchers use (`{a="x", b=~"y"}` → a, b). */
  labels: string[];
}

/** Every `name{matchers}` selector of `expr`, with the label names its matchers use. */
export function selectors(expr: string): Selector[] {
  const found: Selector[] = [];
  const matcher = /([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)\s*(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)/gy;
  // Strings blanked to the same length, so that a `{` inside a label value starts no selector.
  const blanked = expr.replace(STRINGS, (s) => `${s[0]}${' '.repeat(s.length - 2)}${s[s.length - 1]}`);
  for (const m of blanked.matchAll(/(?<![\w.:])([a-zA-Z_:][\w:]*)\s*\{/g)) {
    const labels: string[] = [];
    let at = m.index + m[0].length;
    for (let i = 0; i < 100; i++) {
      const space = /[\s,]*/y;
      space.lastIndex = at;
      at += space.exec(expr)![0].length;
      if (expr[at] === '}' || at >= expr.length) break;
      matcher.lastIndex = at;
      const lm = matcher.exec(expr);
      if (lm === null) throw new Error(`cannot read the matchers of ${m[1]} in ${expr}`);
      labels.push(lm[1]!);
      at = matcher.lastIndex;
    }
    found.push({ name: m[1]!, labels });
  }
  return found;
}

/** Label names of the grouping clauses: `by (…)`, `without (…)`, `on (…)`, `ignoring (…)`, `group_left (…)`. */
export function groupingLabels(expr: string): string[] {
  const blanked = expr.replace(STRINGS, '""');
  const labels = new Set<string>();
  for (const m of blanked.matchAll(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)/g)) {
    for (const l of m[1]!.split(',')) if (l.trim() !== '') labels.add(l.trim());
  }
  return [...labels].sort();
}
