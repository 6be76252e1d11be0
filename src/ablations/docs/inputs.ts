/**
 * The false-rejection table of docs/inputs.md (issue 27 item 5): every rejection rule measured alone on a
 * large body of legitimate writing (every ground truth and every positive of the shared labelled sets,
 * submitted as a candidate with its question, and datasets/legit-corpus.jsonl by form). Pure: the CLI
 * (cli-inputs.ts, `npm run docs:inputs`) writes the table, test/judge/false-rejections.test.ts recomputes
 * it and compares with the page.
 */
import { MAX_INVISIBLE_SHARE, prepareCandidate } from '../../judge/candidate.js';
import { DEFAULT_CANDIDATE_LIMITS, isFiller, isRepetitive, REPETITION } from '../../judge/degenerate.js';
import { isInvalidText } from '../../judge/invalid-text.js';
import { noMethodRules } from '../../judge/no-method.js';
import { endOfTurn, stripChatTokens } from '../../text/chat-tokens.js';
import { foldText } from '../../text/fold.js';
import { codePoints, normalizeText, normalized } from '../../text/normalize.js';
import { answerSpan } from '../../text/reasoning.js';
import { FAMILIES, familyOf, REASONING_FORMATS } from '../../text/reasoning-formats.js';
import { dedupeRepeats } from '../../text/repetition.js';

/** Every rule that can reject an idea without a judge, in the order of the table's columns. */
export const MEASURED_RULES = [
  'invalid_text',
  'control_only',
  'truncated_reasoning',
  'master_key_filler',
  'too_short',
  'too_long',
  'repetitive',
  'encoded',
  'long_token',
  'non_prose',
  'question_restated',
] as const;
export type MeasuredRule = (typeof MEASURED_RULES)[number];

export interface LegitText {
  /** The row it counts in (a shared set's ground truths or positives, or a corpus form). */
  source: string;
  text: string;
  question: string;
}

/** Each rule alone on one text, under the default format and limits (the path applies them in order). */
export function rulesBroken(text: string, question: string): Set<MeasuredRule> {
  const out = new Set<MeasuredRule>();
  if (isInvalidText(text)) out.add('invalid_text');
  const n = normalizeText(text);
  if (n.invisible > 0 && n.invisible >= MAX_INVISIBLE_SHARE * (n.invisible + n.visible))
    out.add('control_only');
  const f = foldText(n.text);
  const cut = endOfTurn(f, true);
  const turn = cut === undefined ? f : f.slice(0, cut);
  const span = answerSpan(turn, 'auto');
  if (span.kind === 'truncated') {
    out.add('truncated_reasoning');
    return out;
  }
  const answer = stripChatTokens(turn.slice(span.start, span.end));
  const d = dedupeRepeats(answer, REPETITION.minChars);
  const trimmed = d.text.trim();
  if (isFiller(trimmed)) out.add('master_key_filler');
  const chars = codePoints(trimmed);
  if (chars < DEFAULT_CANDIDATE_LIMITS.minChars) out.add('too_short');
  if (chars > DEFAULT_CANDIDATE_LIMITS.maxChars) out.add('too_long');
  if (isRepetitive(d)) out.add('repetitive');
  for (const r of noMethodRules(trimmed, normalized(question))) out.add(r);
  return out;
}

function zeroCounts(): Record<MeasuredRule, number> {
  return {
    invalid_text: 0,
    control_only: 0,
    truncated_reasoning: 0,
    master_key_filler: 0,
    too_short: 0,
    too_long: 0,
    repetitive: 0,
    encoded: 0,
    long_token: 0,
    non_prose: 0,
    question_restated: 0,
  };
}

export interface SourceRow {
  source: string;
  texts: number;
  /** Texts each rule rejects alone. */
  rejected: Record<MeasuredRule, number>;
  /** Texts the whole path rejects (what a trainer would have been paid 0 for). */
  path: number;
}

/** The table: one row per source, in first-seen order. */
export function falseRejections(texts: readonly LegitText[]): SourceRow[] {
  const rows = new Map<string, SourceRow>();
  for (const t of texts) {
    let row = rows.get(t.source);
    if (row === undefined) {
      row = { source: t.source, texts: 0, rejected: zeroCounts(), path: 0 };
      rows.set(t.source, row);
    }
    row.texts += 1;
    for (const r of rulesBroken(t.text, t.question)) row.rejected[r] += 1;
    if (prepareCandidate(t.text, { question: normalized(t.question) }).rejection !== undefined) row.path += 1;
  }
  return [...rows.values()];
}

/** The rows as docs/inputs.md prints them (header first). */
export function renderFalseRejections(rows: readonly SourceRow[]): string[][] {
  const total: SourceRow = { source: '**all**', texts: 0, rejected: zeroCounts(), path: 0 };
  for (const r of rows) {
    total.texts += r.texts;
    total.path += r.path;
    for (const rule of MEASURED_RULES) total.rejected[rule] += r.rejected[rule];
  }
  return [
    ['source', 'texts', ...MEASURED_RULES.map((r) => `\`${r}\``), 'whole path'],
    ...[...rows, total].map((r) => [
      r.source,
      String(r.texts),
      ...MEASURED_RULES.map((rule) => String(r.rejected[rule])),
      String(r.path),
    ]),
  ];
}

interface Row {
  question?: unknown;
  candidate?: unknown;
  ground_truth?: unknown;
  label?: unknown;
  form?: unknown;
  text?: unknown;
}

function rowsOf(jsonl: string): Row[] {
  return jsonl
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l): Row => {
      const v: unknown = JSON.parse(l);
      return typeof v === 'object' && v !== null ? v : {};
    });
}

const str = (v: unknown): string => (typeof v === 'string' ? v : '');

/**
 * The texts measured: for each labelled set (name → JSONL), every distinct ground truth and every positive
 * candidate, each with its question; then every corpus text (`{form, text}` lines), without a question.
 */
export function legitTexts(sets: ReadonlyArray<[string, string]>, corpus: string): LegitText[] {
  const out: LegitText[] = [];
  for (const [name, jsonl] of sets) {
    const rows = rowsOf(jsonl);
    const seen = new Set<string>();
    for (const r of rows) {
      const gt = str(r.ground_truth);
      if (gt === '' || seen.has(gt)) continue;
      seen.add(gt);
      out.push({ source: `${name}: ground truths`, text: gt, question: str(r.question) });
    }
    for (const r of rows)
      if (r.label === 1)
        out.push({ source: `${name}: positives`, text: str(r.candidate), question: str(r.question) });
  }
  for (const r of rowsOf(corpus))
    out.push({ source: `corpus: ${str(r.form)}`, text: str(r.text), question: '' });
  return out;
}

/** The formats table of docs/inputs.md: each family, the REASONING_FORMAT names that read it, its source. */
export function renderFormats(): string[][] {
  const rows: string[][] = [['family', 'names', 'trace', 'answer block', 'in `auto`', 'source']];
  for (const f of FAMILIES) {
    const names = REASONING_FORMATS.filter((n) => familyOf(n) === f.id).map((n) => `\`${n}\``);
    const trace =
      f.kind === 'harmony'
        ? '`<|channel|>analysis<|message|>…<|end|>`'
        : f.kind === 'glimmer'
          ? '`to=self<|message|>…<|eom|>`'
          : `\`${f.trace?.open ?? ''}…${f.trace?.close ?? ''}\``;
    const answer =
      f.kind === 'harmony'
        ? 'last `<|channel|>final<|message|>…`'
        : f.kind === 'glimmer'
          ? 'last `to=user<|message|>…`'
          : (f.answers ?? []).map((a) => `\`${a.open}…${a.close}\``).join(', ') || 'text after the trace';
    const note = f.note === undefined ? '' : ` (${f.note})`;
    rows.push([f.id, names.join(', '), trace, answer, f.prose === true ? 'no' : 'yes', `${f.source}${note}`]);
  }
  return rows;
}

/** A markdown table from rows (header first), pipes in cells escaped. */
export function markdownTable(rows: readonly string[][]): string {
  const cell = (c: string): string => c.replace(/\|/g, '\\|');
  const [header = [], ...body] = rows;
  return [
    `| ${header.map(cell).join(' | ')} |`,
    `| ${header.map(() => '---').join(' | ')} |`,
    ...body.map((r) => `| ${r.map(cell).join(' | ')} |`),
  ].join('\n');
}

export const INPUTS_PAGE = 'docs/inputs.md';
/** The shared labelled sets measured (../shared/datasets/NAME.jsonl). */
export const SHARED_SETS = ['moose-chem-expert-pairs', 'openreview-pairs'] as const;

/** Replaces the block `<!-- name -->…<!-- /name -->` of `page`. */
export function replaceBlock(page: string, name: string, body: string): string {
  const re = new RegExp(`<!-- ${name} -->[\\s\\S]*?<!-- /${name} -->`);
  if (!re.test(page)) throw new Error(`${INPUTS_PAGE}: no <!-- ${name} --> block`);
  return page.replace(re, () => `<!-- ${name} -->\n\n${body}\n\n<!-- /${name} -->`);
}
