/**
 * CANARY_REFERENCE: the file `npm run ablate -- --canary-reference` writes, read and fitted to the serving
 * canary rows (per row: exactly those rows; a row it has no outcome for stops the server), or taken as
 * written (overall only); config names the variable on every defect.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { loadConfig } from '../../src/config.js';
import { judgeMismatch, parseCanaryReference } from '../../src/settings/canary-reference.js';
import { writeCanaries } from '../server/integrity-fleet.js';
import { useTempDirs } from '../support/temp-dirs.js';

const tempDir = useTempDirs('canary-reference-');

const judge = {
  graph: { name: 'single-judge', hash: 'abc' },
  prompt_version: 'p1',
  routes: ['judge=default/fake-model'],
};

function file(rows: Array<[string, boolean]>, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({
    kind: 'canary-reference',
    version: 1,
    judge,
    rows: rows.map(([id, correct]) => ({
      id,
      label: 'match',
      verdict: correct ? 'match' : 'no_match',
      correct,
    })),
    overall: { n: rows.length, correct: rows.filter(([, c]) => c).length },
    ...extra,
  });
}

describe('canary reference file', () => {
  it('takes the accuracy over exactly the serving canary rows', () => {
    const text = file([
      ['a', true],
      ['b', false],
      ['c', true],
      ['d', false],
    ]);
    expect(parseCanaryReference(text, 'ref.json', ['a', 'b', 'c'])).toMatchObject({
      source: 'file',
      n: 3,
      wrong: 1,
      per_row: true,
    });
  });

  it('refuses a canary set with a row it has no outcome for, naming it', () => {
    const text = file([['a', true]]);
    expect(() => parseCanaryReference(text, 'ref.json', ['a', 'zz'])).toThrow(
      /ref\.json: no offline outcome for 1 of the 2 canary rows \(first: zz\)/,
    );
  });

  it('takes an overall-only reference as written', () => {
    const text = JSON.stringify({
      kind: 'canary-reference',
      version: 1,
      judge,
      overall: { n: 200, correct: 180 },
    });
    expect(parseCanaryReference(text, 'r', ['x'])).toMatchObject({ n: 200, wrong: 20, per_row: false });
  });

  it('names the field of a malformed file', () => {
    expect(() => parseCanaryReference('{', 'r.json', [])).toThrow(/r\.json: not JSON/);
    const wrongCount = JSON.stringify({
      kind: 'canary-reference',
      version: 1,
      judge,
      overall: { n: 2, correct: 3 },
    });
    expect(() => parseCanaryReference(wrongCount, 'r.json', [])).toThrow(/field "overall\.correct"/);
    expect(() => parseCanaryReference(file([['a', true]], { extra: 1 }), 'r.json', ['a'])).toThrow(
      /field ""/,
    );
  });

  it('tells a reference of another graph, prompt version or model from the serving judge', () => {
    expect(judgeMismatch(judge, judge)).toBeUndefined();
    expect(judgeMismatch(judge, { ...judge, graph: { name: 'vote-3', hash: 'def' } })).toMatch(
      /graph single-judge/,
    );
    expect(judgeMismatch(judge, { ...judge, prompt_version: 'p2' })).toMatch(/prompt version p1/);
    expect(judgeMismatch(judge, { ...judge, routes: ['judge=default/other'] })).toMatch(/routes/);
  });

  it('config reads CANARY_REFERENCE against CANARY_DATASET and names the variable on a defect', async () => {
    const dir = await tempDir();
    const canaries = writeCanaries(dir, 4);
    const ids = [0, 1, 2, 3].map((i) => `canary:${i}`);
    const good = join(dir, 'ref.json');
    writeFileSync(good, file(ids.map((id, i) => [id, i !== 1])));
    const env = { JUDGE_BASE_URL: 'http://127.0.0.1:1/v1', JUDGE_MODEL: 'm', CANARY_DATASET: canaries };
    expect(loadConfig({ ...env, CANARY_REFERENCE: good }).integrity.fleet.reference).toMatchObject({
      n: 4,
      wrong: 1,
    });
    const partial = join(dir, 'partial.json');
    writeFileSync(partial, file([[ids[0]!, true]]));
    expect(() => loadConfig({ ...env, CANARY_REFERENCE: partial })).toThrow(
      /CANARY_REFERENCE: .*partial\.json: no offline outcome for 3 of the 4 canary rows/,
    );
    expect(() =>
      loadConfig({ JUDGE_BASE_URL: env.JUDGE_BASE_URL, JUDGE_MODEL: 'm', CANARY_REFERENCE: good }),
    ).toThrow(/CANARY_REFERENCE: needs CANARY_DATASET/);
    expect(() => loadConfig({ ...env, CANARY_REFERENCE: join(dir, 'missing.json') })).toThrow(
      /CANARY_REFERENCE: .*ENOENT/,
    );
  });
});
