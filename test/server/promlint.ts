/**
 * The lint rules of `promtool check metrics` (Prometheus' promlint, client_golang
 * prometheus/testutil/promlint) over the text exposition format, so the suite needs no Go binary. The
 * problem texts are promlint's, so a failure reads like promtool's output.
 */

export type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';

export interface Sample {
  name: string;
  /** In exposition order (a duplicated label name is a parse error, as in promtool). */
  labels: [name: string, value: string][];
  value: number;
}

export interface Family {
  name: string;
  type: MetricType;
  help?: string;
  samples: Sample[];
}

export interface Problem {
  metric: string;
  text: string;
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set<string>(['counter', 'gauge', 'histogram', 'summary', 'untyped']);
const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?[ \t]+(\S+)(?:[ \t]+-?\d+)?$/;
const LABEL = /[ \t]*([^=\s]+)[ \t]*=[ \t]*"((?:[^"\\\n]|\\[\\"n])*)"[ \t]*(,|$)/y;

function parseValue(raw: string, line: string): number {
  const lower = raw.toLowerCase();
  if (lower === 'nan') return NaN;
  if (lower === '+inf' || lower === 'inf') return Infinity;
  if (lower === '-inf') return -Infinity;
  if (!/^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i.test(raw)) throw new Error(`bad sample value: ${line}`);
  return Number(raw);
}

function parseLabels(body: string, line: string): [string, string][] {
  const labels: [string, string][] = [];
  LABEL.lastIndex = 0;
  while (LABEL.lastIndex < body.length) {
    const m = LABEL.exec(body);
    if (m === null) throw new Error(`bad label set: ${line}`);
    const name = m[1]!;
    if (!LABEL_NAME.test(name) || name.startsWith('__'))
      throw new Error(`invalid label name ${name}: ${line}`);
    if (labels.some(([seen]) => seen === name)) throw new Error(`duplicate label names: ${line}`);
    labels.push([name, m[2]!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c))]);
    if (m[3] === '') break;
  }
  return labels;
}

/** A sample of family `f`: its own name, a histogram's `_bucket`/`_sum`/`_count`, a summary's `_sum`/`_count`. */
function belongsTo(sample: string, f: Family): boolean {
  if (sample === f.name) return true;
  const suffixes =
    f.type === 'histogram' ? ['_bucket', '_sum', '_count'] : f.type === 'summary' ? ['_sum', '_count'] : [];
  return suffixes.some((suffix) => sample === f.name + suffix);
}

/**
 * Parses the text format (0.0.4) strictly: HELP and TYPE at most once per family and before its samples,
 * valid values, no duplicate label names — as promtool's parser — and, stricter than promtool 2.42 but as
 * the format's spec says, a family's samples contiguous, histogram buckets with `le`, no reserved `__`
 * label names. Throws on the first line it does not accept, as promtool reports a parse error before any
 * lint.
 */
export function parseExposition(text: string): Family[] {
  const families = new Map<string, Family>();
  const order: Family[] = [];
  let current: Family | undefined;
  const open = (name: string, line: string): Family => {
    let family = families.get(name);
    if (family === undefined) {
      if (!METRIC_NAME.test(name)) throw new Error(`invalid metric name: ${line}`);
      family = { name, type: 'untyped', samples: [] };
      families.set(name, family);
      order.push(family);
    } else if (family !== current) {
      throw new Error(`metric family ${name} is not contiguous: ${line}`);
    }
    current = family;
    return family;
  };

  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    if (line.startsWith('#')) {
      const m = /^#[ \t]+(HELP|TYPE)[ \t]+(\S+)(?:[ \t]+(.*))?$/.exec(line);
      if (m === null) continue; // any other comment
      const [, keyword, name, rest = ''] = m;
      const family = open(name!, line);
      if (keyword === 'HELP') {
        if (family.help !== undefined) throw new Error(`second HELP line for ${name}: ${line}`);
        family.help = rest.replace(/\\([\\n])/g, (_, c: string) => (c === 'n' ? '\n' : c));
      } else {
        if (family.type !== 'untyped' || family.samples.length > 0)
          throw new Error(`TYPE line for ${name} after its samples or twice: ${line}`);
        if (!TYPES.has(rest)) throw new Error(`unknown metric type ${rest}: ${line}`);
        family.type = rest as MetricType;
      }
      continue;
    }
    const m = SAMPLE.exec(line);
    if (m === null) throw new Error(`not a sample line: ${line}`);
    const name = m[1]!;
    const family = current !== undefined && belongsTo(name, current) ? current : open(name, line);
    const labels = parseLabels(m[2] ?? '', line);
    if (family.type === 'histogram' && name === `${family.name}_bucket` && !labels.some(([l]) => l === 'le'))
      throw new Error(`histogram bucket without le: ${line}`);
    if (family.type === 'histogram' && name === family.name)
      throw new Error(`histogram sample without _bucket/_sum/_count suffix: ${line}`);
    if (family.type === 'summary' && name === family.name && !labels.some(([l]) => l === 'quantile'))
      throw new Error(`summary sample without quantile: ${line}`);
    family.samples.push({ name, labels, value: parseValue(m[3]!, line) });
  }
  return order;
}

// promlint's unit tables (validations/units.go).
const UNITS = new Map<string, string>([
  ['amperes', 'amperes'],
  ['bytes', 'bytes'],
  ['celsius', 'celsius'],
  ['grams', 'grams'],
  ['joules', 'joules'],
  ['kelvin', 'kelvin'],
  ['meters', 'meters'],
  ['metres', 'metres'],
  ['seconds', 'seconds'],
  ['volts', 'volts'],
  ['minutes', 'seconds'],
  ['hours', 'seconds'],
  ['days', 'seconds'],
  ['weeks', 'seconds'],
  ['kelvins', 'kelvin'],
  ['fahrenheit', 'celsius'],
  ['rankine', 'celsius'],
  ['inches', 'meters'],
  ['yards', 'meters'],
  ['miles', 'meters'],
  ['bits', 'bytes'],
  ['calories', 'joules'],
  ['pounds', 'grams'],
  ['ounces', 'grams'],
]);
const UNIT_PREFIXES = [
  ...['pico', 'nano', 'micro', 'milli', 'centi', 'deci', 'deca', 'hecto', 'kilo', 'kibi'],
  ...['mega', 'mibi', 'giga', 'gibi', 'tera', 'tebi', 'peta', 'pebi'],
];
const UNIT_ABBREVIATIONS = ['s', 'ms', 'us', 'ns', 'sec', 'b', 'kb', 'mb', 'gb', 'tb', 'pb', 'm', 'h', 'd'];
const TYPE_NAMES = ['counter', 'gauge', 'histogram', 'summary', 'gauge_histogram'];
const CAMEL_CASE = /[a-z][A-Z]/;

function metricUnit(name: string): { unit: string; base: string } | undefined {
  for (const token of name.split('_')) {
    const base = UNITS.get(token);
    if (base !== undefined) return { unit: token, base };
    for (const prefix of UNIT_PREFIXES) {
      const prefixed = token.startsWith(prefix) ? UNITS.get(token.slice(prefix.length)) : undefined;
      if (prefixed !== undefined) return { unit: token, base: prefixed };
    }
  }
  return undefined;
}

const hasWord = (name: string, word: string) => name.includes(`_${word}_`) || name.endsWith(`_${word}`);

/** promlint's problems for one family, in its rule order. */
export function lintFamily(f: Family): string[] {
  const problems: string[] = [];
  if (f.help === undefined) problems.push('no help text');

  const unit = metricUnit(f.name);
  if (unit !== undefined && unit.unit !== unit.base)
    problems.push(`use base unit "${unit.base}" instead of "${unit.unit}"`);

  const total = f.name.endsWith('_total');
  if (f.type === 'counter' && !total) problems.push('counter metrics should have "_total" suffix');
  if (f.type !== 'counter' && f.type !== 'untyped' && total)
    problems.push('non-counter metrics should not have "_total" suffix');

  if (f.type !== 'untyped') {
    const histogram = f.type === 'histogram';
    const summary = f.type === 'summary';
    if (!histogram && f.name.endsWith('_bucket'))
      problems.push('non-histogram metrics should not have "_bucket" suffix');
    if (!histogram && !summary && f.name.endsWith('_count'))
      problems.push('non-histogram and non-summary metrics should not have "_count" suffix');
    if (!histogram && !summary && f.name.endsWith('_sum'))
      problems.push('non-histogram and non-summary metrics should not have "_sum" suffix');
    for (const s of f.samples) {
      for (const [label] of s.labels) {
        if (!histogram && label === 'le') problems.push('non-histogram metrics should not have "le" label');
        if (!summary && label === 'quantile')
          problems.push('non-summary metrics should not have "quantile" label');
      }
    }
  }

  const lower = f.name.toLowerCase();
  for (const type of TYPE_NAMES)
    if (hasWord(lower, type)) problems.push(`metric name should not include type '${type}'`);
  if (f.name.includes(':')) problems.push("metric names should not contain ':'");
  if (CAMEL_CASE.test(f.name))
    problems.push("metric names should be written in 'snake_case' not 'camelCase'");
  for (const s of f.samples)
    for (const [label] of s.labels)
      if (CAMEL_CASE.test(label))
        problems.push("label names should be written in 'snake_case' not 'camelCase'");
  for (const abbreviation of UNIT_ABBREVIATIONS)
    if (hasWord(lower, abbreviation)) problems.push('metric names should not contain abbreviated units');
  return problems;
}

/** Parses and lints an exposition; problems sorted by metric, then text (promlint's order). */
export function promlint(text: string): Problem[] {
  return parseExposition(text)
    .flatMap((f) => lintFamily(f).map((problem) => ({ metric: f.name, text: problem })))
    .sort((a, b) =>
      a.metric === b.metric ? (a.text < b.text ? -1 : a.text > b.text ? 1 : 0) : a.metric < b.metric ? -1 : 1,
    );
}
