/**
 * Issue 27 item 5: no real idea rejected. Every rejection rule alone, and the whole preparation path, on
 * every ground truth and positive of the shared labelled sets and on datasets/legit-corpus.jsonl: the table
 * in docs/inputs.md is what `npm run docs:inputs` measures (recomputed here), and it is all 0. The
 * reasoning-format table there is the format table of src/text/reasoning-formats.ts.
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { describe, expect, it } from 'vitest';

import {
  falseRejections,
  legitTexts,
  markdownTable,
  MEASURED_RULES,
  renderFalseRejections,
  renderFormats,
  replaceBlock,
  SHARED_SETS,
} from '../../src/ablations/docs/inputs.js';
import { REJECTION_REASONS } from '../../src/judge/degenerate.js';
import { readDoc } from '../support/markdown.js';

const path = (p: string): string => fileURLToPath(new URL(`../../${p}`, import.meta.url));
const SETS = SHARED_SETS.map((name) => ({ name, file: path(`../shared/datasets/${name}.jsonl`) }));
const HAVE_SHARED = SETS.every((s) => existsSync(s.file));
const CORPUS = readFileSync(path('datasets/legit-corpus.jsonl'), 'utf8');

/** The page with `name`'s block replaced by `body`, normalised as prettier leaves tables (cell padding). */
const squash = (s: string): string => s.replace(/ *\| */g, '|').replace(/\|-+/g, '|-');

describe('the legitimate corpus', () => {
  it('has at least 500 texts in every form the issue names', () => {
    const rows = CORPUS.split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => JSON.parse(l) as { form: string; text: string });
    expect(rows.length).toBeGreaterThanOrEqual(500);
    const forms = new Set(rows.map((r) => r.form));
    for (const form of [
      'formulas',
      'reaction_conditions',
      'smiles',
      'latex',
      'code',
      'urls_dois',
      'bio_names',
    ])
      expect(forms).toContain(form);
    for (const form of [
      'slash_terms',
      'units_superscripts',
      'markdown_lists',
      'zh',
      'ja',
      'ko',
      'ru',
      'ar',
      'hi',
      'de',
    ])
      expect(forms).toContain(form);
    expect(new Set(rows.map((r) => r.text)).size).toBe(rows.length);
  });

  it('measures every rule that rejects without a judge', () => {
    const notMeasured = REJECTION_REASONS.filter(
      (r) => r !== 'empty' && !MEASURED_RULES.some((m) => m === r),
    );
    expect(notMeasured).toEqual([]);
  });
});

describe.skipIf(!HAVE_SHARED)('docs/inputs.md', () => {
  const texts = legitTexts(
    SETS.map((s): [string, string] => [s.name, readFileSync(s.file, 'utf8')]),
    CORPUS,
  );
  const rows = falseRejections(texts);

  it('rejects no legitimate text: every rule alone and the whole path', () => {
    for (const r of rows) {
      expect(r.path, r.source).toBe(0);
      for (const rule of MEASURED_RULES) expect(r.rejected[rule], `${r.source}: ${rule}`).toBe(0);
    }
    expect(texts.length).toBeGreaterThan(1000);
  });

  it('states the measured false-rejection table and the reasoning-format table', () => {
    const page = readDoc('docs/inputs.md');
    const want = replaceBlock(
      replaceBlock(page, 'false-rejections', markdownTable(renderFalseRejections(rows))),
      'reasoning-formats',
      markdownTable(renderFormats()),
    );
    expect(squash(page), 'run `npm run docs:inputs`').toBe(squash(want));
  });
});
