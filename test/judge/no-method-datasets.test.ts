/**
 * The false-positive rate of every "what is judged" rule on the labelled sets' positives (issue 19): each rule
 * alone, on each set, and the whole preparation path. The target is 0 positives rejected; docs/inputs.md
 * states the same numbers, and this test holds the doc to them (a failure prints the measured table).
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { describe, expect, it } from 'vitest';

import { MAX_INVISIBLE_SHARE, prepareCandidate } from '../../src/judge/candidate.js';
import { isAsking, noMethodRules } from '../../src/judge/no-method.js';
import { stripChatTokens } from '../../src/text/chat-tokens.js';
import { normalizeText } from '../../src/text/normalize.js';
import { echoMeasure, encodedMeasure, letterMeasure, tokenMeasure } from '../../src/text/prose.js';
import { extractAnswer } from '../../src/text/reasoning.js';
import { markdownTables, readDoc } from '../support/markdown.js';

const SETS = [
  { name: 'moose-chem-expert-pairs', path: '../../../shared/datasets/moose-chem-expert-pairs.jsonl' },
  { name: 'openreview-pairs', path: '../../../shared/datasets/openreview-pairs.jsonl' },
  { name: 'sample', path: '../../datasets/sample.jsonl' },
].map((s) => ({ ...s, file: fileURLToPath(new URL(s.path, import.meta.url)) }));
const HAVE_SHARED = SETS.slice(0, 2).every((s) => existsSync(s.file));

interface Row {
  question: string;
  candidate: string;
  label: 0 | 1;
}

const RULES = [
  'truncated_reasoning',
  'control_only',
  'encoded',
  'long_token',
  'non_prose',
  'question_restated',
] as const;
type Rule = (typeof RULES)[number];

/** Each rule alone on one candidate (the preparation path applies them in order; here each is measured). */
function broken(row: Row): Set<Rule> {
  const out = new Set<Rule>();
  const n = normalizeText(row.candidate);
  if (n.invisible > 0 && n.invisible >= MAX_INVISIBLE_SHARE * (n.invisible + n.visible))
    out.add('control_only');
  const e = extractAnswer(n.text, 'auto');
  if (e.kind === 'truncated') {
    out.add('truncated_reasoning');
    return out;
  }
  const answer = stripChatTokens(e.answer);
  for (const r of noMethodRules(answer, normalizeText(row.question).text)) out.add(r);
  return out;
}

/** How close the nearest positive comes to each threshold. */
function closest(rows: readonly Row[]): Record<Rule, string> {
  let invisible = 0;
  let word = 0;
  let token = 0;
  let letters = 1;
  let echo: number | undefined;
  let encoded = 0;
  for (const r of rows) {
    encoded = Math.max(encoded, encodedMeasure(r.candidate).chars);
    const n = normalizeText(r.candidate);
    invisible = Math.max(invisible, n.invisible / Math.max(1, n.invisible + n.visible));
    const t = tokenMeasure(r.candidate);
    word = Math.max(word, t.longestWord);
    token = Math.max(token, t.longestToken);
    const l = letterMeasure(r.candidate);
    letters = Math.min(letters, l.letters / Math.max(1, l.visible));
    if (isAsking(r.question)) {
      const m = echoMeasure(r.candidate, r.question);
      if (m.terms > 0) echo = Math.max(echo ?? 0, m.shared / m.terms);
    }
  }
  return {
    truncated_reasoning: '—',
    control_only: `invisible share ≤ ${invisible.toFixed(2)}`,
    encoded: `encoded chars ≤ ${encoded}`,
    long_token: `word ≤ ${word}, token ≤ ${token}`,
    non_prose: `letter share ≥ ${letters.toFixed(2)}`,
    question_restated: echo === undefined ? 'no question asked' : `shared share ≤ ${echo.toFixed(2)}`,
  };
}

function load(file: string): Row[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Row);
}

/** The measured table, one row per rule and set: positives rejected, negatives rejected, the closest positive. */
function measure(): string[][] {
  const table: string[][] = [];
  for (const set of SETS) {
    const rows = load(set.file);
    const pos = rows.filter((r) => r.label === 1);
    const neg = rows.filter((r) => r.label === 0);
    const near = closest(pos);
    const count = (rs: readonly Row[], rule: Rule): number => rs.filter((r) => broken(r).has(rule)).length;
    for (const rule of RULES) {
      table.push([
        `\`${rule}\``,
        set.name,
        `${count(pos, rule)} / ${pos.length}`,
        `${count(neg, rule)} / ${neg.length}`,
        near[rule],
      ]);
    }
  }
  return table;
}

describe.skipIf(!HAVE_SHARED)('what is judged, on the labelled sets', () => {
  it('rejects 0 positives of both shared sets (and of datasets/sample.jsonl) by any new rule, or the whole path', () => {
    for (const set of SETS) {
      const rows = load(set.file).filter((r) => r.label === 1);
      expect(rows.length).toBeGreaterThan(0);
      for (const row of rows) {
        expect([...broken(row)], row.candidate.slice(0, 80)).toEqual([]);
        expect(prepareCandidate(row.candidate, { question: row.question }).rejection).toBeUndefined();
      }
    }
  });

  it('docs/inputs.md states the measured false-positive table', () => {
    const measured = measure();
    const table = markdownTables(readDoc('docs/inputs.md')).find((t) => t.header[0] === 'rule');
    expect(table, 'docs/inputs.md has a table whose first column is `rule`').toBeDefined();
    expect(table?.rows, `measured:\n${measured.map((r) => `| ${r.join(' | ')} |`).join('\n')}`).toEqual(
      measured,
    );
  });
});
