/**
 * The metric names a PromQL expression selects, without a PromQL parser: strings, label matchers, range
 * and subquery brackets, offsets and grouping label lists are blanked first, then every identifier that
 * is not a call, a keyword or an aggregation is a metric name. Prometheus itself checks that the
 * expression parses (the dashboard test sends each one to /api/v1/query).
 */
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
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""')
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
