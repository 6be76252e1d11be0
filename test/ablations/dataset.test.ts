import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { clusterKey, loadDataset, parseDataset } from '../../src/ablations/dataset.js';
import { RewardError } from '../../src/errors.js';

const good = (id: string, label: 0 | 1 = 1) =>
  JSON.stringify({
    id,
    question: 'q',
    candidate: 'an idea about things',
    ground_truth: 'the abstract',
    label,
    kind: label === 1 ? 'positive' : 'hard_negative',
    source: 's',
    venue: 'v',
    area: 'a',
  });

let dir: string | undefined;
afterEach(async () => {
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  dir = undefined;
});

describe('parseDataset', () => {
  it('parses valid lines and ignores blank ones', () => {
    const { items, invalid } = parseDataset([good('a'), '', good('b', 0), ''].join('\n'));
    expect(items.map((i) => i.id)).toEqual(['a', 'b']);
    expect(invalid).toEqual([]);
  });

  it('stops at a bad line naming the line number and the field', () => {
    const text = [good('a'), good('b').replace('"label":1', '"label":2')].join('\n');
    expect(() => parseDataset(text, { name: 'x.jsonl' })).toThrow(/^x\.jsonl:2: field "label"/);
    try {
      parseDataset(text);
    } catch (err) {
      expect(err).toBeInstanceOf(RewardError);
      expect((err as RewardError).code).toBe('RW_BAD_REQUEST');
    }
  });

  it('reports invalid JSON, missing fields, duplicate ids and label/kind contradictions', () => {
    const missing = JSON.stringify({ ...JSON.parse(good('m')), ground_truth: undefined });
    const contradiction = good('k', 1).replace('"kind":"positive"', '"kind":"easy_negative"');
    const text = [good('a'), '{not json', missing, good('a'), contradiction, good('z')].join('\n');
    const { items, invalid } = parseDataset(text, { skipInvalid: true });
    expect(items.map((i) => i.id)).toEqual(['a', 'z']);
    expect(invalid.map((i) => [i.line, i.field])).toEqual([
      [2, '(json)'],
      [3, 'ground_truth'],
      [4, 'id'],
      [5, 'label'],
    ]);
    expect(invalid[2]!.message).toMatch(/first on line 1/);
  });
});

describe('loadDataset', () => {
  it('loads the checked-in sample: ≥ 20 items, balanced, with hard negatives', async () => {
    const ds = await loadDataset('datasets/sample.jsonl');
    expect(ds.items.length).toBeGreaterThanOrEqual(20);
    const positives = ds.items.filter((i) => i.label === 1).length;
    expect(positives * 2).toBe(ds.items.length);
    expect(ds.items.filter((i) => i.kind === 'hard_negative').length).toBeGreaterThanOrEqual(6);
    expect(ds.sha256).toMatch(/^[0-9a-f]{16}$/);
    expect(new Set(ds.items.map(clusterKey)).size).toBe(8);
  });

  it('names the file in errors', async () => {
    dir = await mkdtemp(join(tmpdir(), 'ds-'));
    const path = join(dir, 'bad.jsonl');
    await writeFile(path, `${good('a')}\n${good('b').replace('"question":"q",', '')}\n`);
    await expect(loadDataset(path)).rejects.toThrow(`${path}:2: field "question"`);
  });
});
