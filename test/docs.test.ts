/**
 * The reference pages agree with the code: error codes (docs/api.md ↔ src/errors.ts), environment
 * variables (docs/configuration.md ↔ the config schema), metrics (docs/metrics.md ↔ createMetrics), and
 * every relative link and every backticked repository path of the README and docs/ exists.
 */
import { existsSync, readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

import { ENV_VARIABLES } from '../src/config.js';
import { ERROR_STATUS } from '../src/errors.js';
import { createMetrics } from '../src/server/observe/metrics.js';
import { codeSpans, docTable, readDoc, ROOT_URL } from './support/markdown.js';

describe('docs/api.md error-code table', () => {
  const { rows } = docTable('docs/api.md', ['code', 'HTTP', 'when', 'whose fault / retry?']);

  it('lists exactly the codes and statuses of src/errors.ts', () => {
    const table = new Map(rows.map((r) => [codeSpans(r[0]!)[0], Number(r[1])]));
    expect(table.size).toBe(rows.length);
    expect(Object.fromEntries(table)).toEqual({ ...ERROR_STATUS });
  });

  it('says for every code when it happens, whose fault it is and whether to retry', () => {
    for (const r of rows)
      expect(
        r.slice(2).every((cell) => cell.length > 0),
        r[0],
      ).toBe(true);
  });
});

describe('docs/configuration.md variable table', () => {
  const { rows } = docTable('docs/configuration.md', ['variable', 'default', 'unit', 'meaning']);
  const documented = new Map(
    rows.map((r) => [codeSpans(r[0]!), r] as const).map(([names, r]) => [names[0]!, r]),
  );

  it('has one variable per row, each once', () => {
    for (const r of rows) expect(codeSpans(r[0]!), r[0]).toHaveLength(1);
    expect(documented.size).toBe(rows.length);
  });

  it('documents every variable of the config schema and no other', () => {
    expect([...documented.keys()].sort()).toEqual(Object.keys(ENV_VARIABLES).sort());
  });

  it('gives each variable the default of the schema ("unset" when it has none)', () => {
    for (const [name, schema] of Object.entries(ENV_VARIABLES)) {
      const parsed = schema.safeParse(undefined);
      expect(parsed.success, `${name} needs a value: document it as required`).toBe(true);
      const cell = documented.get(name)?.[1] ?? '';
      if (parsed.data === undefined) expect(cell, name).toMatch(/^unset\b/);
      else {
        const value = typeof parsed.data === 'object' ? JSON.stringify(parsed.data) : String(parsed.data);
        expect(codeSpans(cell)[0], name).toBe(value);
      }
    }
  });

  it('names the unit its suffix says (_MS ms, _BYTES bytes, _CHARS characters)', () => {
    const units: [RegExp, string][] = [
      [/_MS$/, 'ms'],
      [/_BYTES$/, 'bytes'],
      [/_CHARS$/, 'characters'],
    ];
    for (const [name, r] of documented) {
      for (const [suffix, unit] of units) {
        if (suffix.test(name)) expect(r[2], name).toBe(unit);
        else expect(r[2], name).not.toBe(unit);
      }
    }
  });
});

describe('docs/metrics.md metric table', () => {
  it('lists exactly the reward_ metrics of createMetrics, with their types and labels', () => {
    const { rows } = docTable('docs/metrics.md', ['metric', 'type', 'labels']);
    const documented = rows.map((r) => ({ name: codeSpans(r[0]!)[0], type: r[1], labels: codeSpans(r[2]!) }));
    const registry = createMetrics().registry;
    const actual = registry
      .getMetricsAsArray()
      .map((m) => m as unknown as { name: string; type: string; labelNames: readonly string[] })
      .filter((m) => m.name.startsWith('reward_'))
      .map((m) => ({ name: m.name, type: m.type, labels: [...m.labelNames] }));
    const byName = (a: { name?: string | undefined }, b: { name?: string | undefined }) =>
      (a.name ?? '').localeCompare(b.name ?? '');
    expect(documented.sort(byName)).toEqual(actual.sort(byName));
  });
});

describe('links and paths in README.md and docs/', () => {
  const pages = [
    'README.md',
    ...readdirSync(new URL('docs/', ROOT_URL))
      .filter((f) => f.endsWith('.md'))
      .map((f) => `docs/${f}`),
  ];

  it('link to files that exist', () => {
    const broken: string[] = [];
    for (const page of pages) {
      for (const [, target] of readDoc(page).matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(target!) || target!.startsWith('#')) continue;
        const path = target!.split('#')[0]!;
        if (!existsSync(new URL(path, new URL(page, ROOT_URL)))) broken.push(`${page}: ${target}`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('name repository paths that exist (`src/…`, `test/…`, …)', () => {
    const missing: string[] = [];
    for (const page of pages) {
      const prose = readDoc(page).replace(/^```[^\n]*\n[\s\S]*?^```$/gm, ''); // fenced blocks are examples
      for (const span of codeSpans(prose)) {
        if (!/^(src|test|bench|clients|datasets|docs)\/[\w./-]+$/.test(span)) continue;
        if (!existsSync(new URL(span, ROOT_URL))) missing.push(`${page}: ${span}`);
      }
    }
    expect(missing).toEqual([]);
  });
});

describe('README.md', () => {
  it('stays a guide: at most 300 lines, the reference lives in docs/', () => {
    expect(readDoc('README.md').split('\n').length).toBeLessThanOrEqual(300);
  });
});

describe('the runtime', () => {
  const dockerfile = readDoc('Dockerfile');
  const images = [...dockerfile.matchAll(/^FROM node:(\d+)-slim\b/gm)].map((m) => Number(m[1]));

  it('builds and runs the image on one Node LTS, the one the README names', () => {
    expect(images.length).toBe(2);
    expect(new Set(images).size).toBe(1);
    expect(readDoc('README.md')).toContain(`Node ${images[0]} LTS, node:${images[0]}-slim`);
  });

  it("promises in package.json's engines the image's Node only, and npm test runs every stage on it", () => {
    const pkg = JSON.parse(readDoc('package.json')) as {
      engines: { node: string };
      scripts: Record<string, string>;
    };
    // Node 20 left support on 2026-04-30: engines claims the shipped runtime and nothing older, so no
    // older runtime is tested (issue 41 item 2).
    expect(pkg.engines.node).toBe(`>=${images[0]}.0.0`);
    expect(pkg.scripts['test']).toBe('bash scripts/test.sh');
    const runner = readDoc('scripts/test.sh');
    expect(runner).toContain(`-lt ${images[0]} ]`);
    expect(runner).toContain('bash scripts/node24.sh');
    expect(readDoc('scripts/node24.sh')).toMatch(new RegExp(`NODE24_VERSION:-${images[0]}\\.\\d+\\.\\d+`));
    expect(readDoc('.nvmrc').trim()).toBe(String(images[0]));
  });
});
