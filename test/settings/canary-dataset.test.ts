import { readFileSync } from 'node:fs';

import { describe, expect, it } from 'vitest';

import { parseCanaryDataset } from '../../src/settings/canary-dataset.js';

const row = (over: Record<string, unknown> = {}) =>
  JSON.stringify({
    id: 'a',
    question: 'q',
    candidate: 'c',
    ground_truth: 'g',
    label: 1,
    kind: 'positive',
    ...over,
  });

describe('parseCanaryDataset', () => {
  it('reads the project’s labelled sample (the dataset schema of datasets/README.md)', () => {
    const rows = parseCanaryDataset(readFileSync('datasets/sample.jsonl', 'utf8'), 'sample.jsonl');
    expect(rows).toHaveLength(24);
    expect(rows.filter((r) => r.label === 'match')).toHaveLength(12);
    expect(rows[0]).toEqual({
      id: expect.any(String),
      question: expect.any(String),
      candidate: expect.any(String),
      groundTruth: expect.any(String),
      label: expect.stringMatching(/^(match|no_match)$/),
    });
  });

  it('names the line and field of a bad row', () => {
    const text = `${row()}\n${row({ id: 'b', label: 0, kind: 'easy_negative' })}\n{"id": "c"}\n`;
    expect(() => parseCanaryDataset(text, 'f.jsonl')).toThrow(/^f\.jsonl:3: field "question"/);
    expect(() => parseCanaryDataset(`${row()}\nnot json`, 'f.jsonl')).toThrow(/f\.jsonl:2: field "\(json\)"/);
    expect(() => parseCanaryDataset(`${row()}\n${row()}`, 'f.jsonl')).toThrow(/duplicate id a/);
    expect(() => parseCanaryDataset(row({ label: 0 }), 'f.jsonl')).toThrow(/contradicts kind positive/);
  });

  it('refuses a set without both labels: an always-match judge could never get a canary wrong', () => {
    expect(() => parseCanaryDataset(`${row()}\n${row({ id: 'b' })}`, 'f.jsonl')).toThrow(/both labels/);
  });
});
