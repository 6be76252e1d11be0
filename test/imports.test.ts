import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

import { describe, expect, it } from 'vitest';

const SRC = fileURLToPath(new URL('../src/', import.meta.url));

/**
 * The layering of src/, as data. A file's layer is its first folder under src/ (`config` and `errors` for
 * the two top-level files). `uses` lists the other layers it may import (its own is always allowed);
 * `packages` the npm packages and `node:` built-ins. Imports flow server → judge → roles → text and
 * ablations → judge; config, errors, settings, text and math are leaves. `state` (shared state: local or Redis)
 * sits under judge (RPM/TPM buckets) and server (cache, leases, idempotency) and knows neither.
 */
const LAYERS: ReadonlyMap<string, { uses: readonly string[]; packages: readonly string[] }> = new Map([
  ['errors', { uses: [], packages: [] }],
  ['text', { uses: [], packages: [] }],
  ['math', { uses: [], packages: [] }],
  ['settings', { uses: [], packages: ['zod'] }],
  // REASONING_FORMAT's names are the text library's format table (a leaf); node:crypto: the keys file
  // holds SHA-256 hashes of keys (REWARD_KEYS).
  ['config', { uses: ['settings', 'text'], packages: ['zod', 'node:fs', 'node:crypto'] }],
  ['state', { uses: ['errors'], packages: ['ioredis', 'node:crypto', 'node:os'] }],
  // Roles are pure: prompt + schema. node:crypto hashes the prompt version.
  ['roles', { uses: ['text'], packages: ['zod', 'node:crypto'] }],
  [
    'judge',
    {
      uses: ['roles', 'text', 'math', 'settings', 'errors', 'state'],
      packages: ['zod', 'undici', 'openai', 'node:crypto', 'node:events', 'node:perf_hooks'],
    },
  ],
  [
    'server',
    {
      // math: the exact binomial interval of GET /v1/integrity (no ablation statistics).
      uses: ['judge', 'roles', 'text', 'settings', 'errors', 'config', 'state', 'math'],
      packages: [
        'fastify',
        'prom-client',
        'zod',
        'node:cluster',
        'node:crypto',
        'node:events',
        // watchFile: a changed keys file (REWARD_KEYS) is reloaded.
        'node:fs',
        'node:fs/promises',
        'node:os',
        'node:path',
      ],
    },
  ],
  [
    'ablations',
    {
      uses: ['judge', 'roles', 'text', 'math', 'settings', 'errors', 'config'],
      packages: ['zod', 'node:crypto', 'node:fs', 'node:fs/promises', 'node:path', 'node:util'],
    },
  ],
]);

/**
 * Inside src/ablations, one folder per command beside the shared code: `shared` is the files at its top
 * (dataset, records, pool, progress, tallies, types, format, plots, cli-common), `stats` the statistics. The
 * shared parts import no command; `probe`, `calibrate` and `docs` run graphs through `ablate`'s runner, and
 * `docs` renders `ablate`'s and `probe`'s reports; `evaluate` stands alone.
 */
const ABLATION_PARTS: ReadonlyMap<string, readonly string[]> = new Map([
  ['stats', []],
  ['shared', ['stats']],
  ['ablate', ['shared', 'stats']],
  ['compare', ['shared', 'stats', 'ablate']],
  ['probe', ['shared', 'stats', 'ablate']],
  ['calibrate', ['shared', 'stats', 'ablate']],
  ['evaluate', ['shared', 'stats']],
  ['docs', ['shared', 'stats', 'ablate', 'probe']],
]);

/**
 * Inside src/server, one folder per role (issue 31): `main` is the entry file at its top; `http` the app,
 * routes, schemas and error mapping; `serving` the judgment, comparison and rank services; `admission` what
 * is let in and when (lanes, budget, plan); `integrity` canaries, audits and drift; `controls` the operator
 * controls every part shares (cancel registry, stamps); `observe` metrics, transcripts and the failure log;
 * `process` clustering and start-up. Arrows run down this list only.
 */
const SERVER_PARTS: ReadonlyMap<string, readonly string[]> = new Map([
  ['observe', []],
  ['controls', []],
  ['admission', ['observe']],
  ['integrity', ['observe']],
  ['serving', ['admission', 'controls', 'observe']],
  // The tenants of REWARD_KEYS (issue 30): keys, scopes, per-tenant budgets and rates. Below http (its
  // request hook and routes ask who a request is) and main (SIGHUP reloads the keys); above admission
  // (a tenant's budget is a token budget, its work a fair-share flow) and observe (its metrics).
  ['tenants', ['admission', 'observe']],
  ['http', ['serving', 'admission', 'integrity', 'controls', 'observe', 'tenants']],
  ['process', ['admission', 'controls', 'observe']],
  ['main', ['http', 'process', 'controls', 'observe', 'tenants']],
]);

/**
 * A file's part inside `folder` (`ablations/probe/run.ts` → `probe`); a file at the folder's top is in
 * part `top` (`ablations/records.ts` → `shared`, `server/main.ts` → `main`); null outside the folder.
 */
function partOf(file: string, folder: string, top: string): string | null {
  if (!file.startsWith(`${folder}/`)) return null;
  const rest = file.slice(folder.length + 1);
  return rest.includes('/') ? rest.slice(0, rest.indexOf('/')) : top;
}

/** Each import inside `folder` that breaks `parts`, as `from -> to`. */
function partViolations(
  graph: Graph,
  folder: string,
  top: string,
  parts: ReadonlyMap<string, readonly string[]>,
): string[] {
  const out: string[] = [];
  for (const [file, edges] of graph) {
    const part = partOf(file, folder, top);
    if (part === null) continue;
    const allowed = parts.get(part);
    if (allowed === undefined) {
      out.push(`${file}: folder '${part}' is not in the parts of ${folder}`);
      continue;
    }
    for (const to of edges.relative) {
      const target = partOf(to, folder, top);
      if (target !== null && target !== part && !allowed.includes(target)) out.push(`${file} -> ${to}`);
    }
  }
  return out;
}

const ablationViolations = (graph: Graph): string[] =>
  partViolations(graph, 'ablations', 'shared', ABLATION_PARTS);
const serverViolations = (graph: Graph): string[] => partViolations(graph, 'server', 'main', SERVER_PARTS);

type Graph = ReadonlyMap<string, { relative: string[]; packages: string[] }>;

const IMPORT = /(?:\bfrom\s*|\bimport\s*\(?\s*)'([^']+)'/g;

/** Every import of every .ts file under `root`, paths relative to `root` (`judge/run.ts`). */
function importGraph(root: string): Graph {
  const graph = new Map<string, { relative: string[]; packages: string[] }>();
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.ts')) {
        const edges = { relative: [] as string[], packages: [] as string[] };
        for (const m of readFileSync(path, 'utf8').matchAll(IMPORT)) {
          const spec = m[1]!;
          if (spec.startsWith('.'))
            edges.relative.push(relative(root, join(dirname(path), spec.replace(/\.js$/, '.ts'))));
          else edges.packages.push(spec);
        }
        graph.set(relative(root, path), edges);
      }
    }
  };
  walk(root);
  return graph;
}

const layerOf = (file: string): string =>
  file.includes('/') ? file.slice(0, file.indexOf('/')) : file.replace(/\.ts$/, '');
/** `openai/resources/chat/completions` → `openai`, `@scope/pkg/x` → `@scope/pkg`; `node:` specifiers as is. */
const packageOf = (spec: string): string =>
  spec.startsWith('node:')
    ? spec
    : spec
        .split('/')
        .slice(0, spec.startsWith('@') ? 2 : 1)
        .join('/');

/** Each import that breaks LAYERS, as `from -> to`. */
function layerViolations(graph: Graph): string[] {
  const out: string[] = [];
  for (const [file, edges] of graph) {
    const layer = LAYERS.get(layerOf(file));
    if (layer === undefined) {
      out.push(`${file}: layer '${layerOf(file)}' is not in LAYERS`);
      continue;
    }
    for (const to of edges.relative) {
      const target = layerOf(to);
      if (target !== layerOf(file) && !layer.uses.includes(target)) out.push(`${file} -> ${to}`);
      if (!graph.has(to)) out.push(`${file} -> ${to} (no such file)`);
    }
    for (const spec of edges.packages)
      if (!layer.packages.includes(packageOf(spec))) out.push(`${file} -> ${spec}`);
  }
  return out;
}

/** Every import cycle (one per strongly connected component of more than one file, or a self-import). */
function importCycles(graph: Graph): string[][] {
  // Tarjan's algorithm, iterative-free recursion is fine at this size (~100 files).
  let index = 0;
  const indices = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const visit = (v: string): void => {
    indices.set(v, index);
    low.set(v, index);
    index += 1;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v)?.relative ?? []) {
      if (!graph.has(w)) continue;
      if (!indices.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, indices.get(w)!));
    }
    if (low.get(v) === indices.get(v)) {
      const component: string[] = [];
      for (let w = stack.pop(); w !== undefined; w = w === v ? undefined : stack.pop()) {
        onStack.delete(w);
        component.push(w);
      }
      if (component.length > 1 || graph.get(v)?.relative.includes(v) === true) cycles.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!indices.has(v)) visit(v);
  return cycles;
}

/** Every src file reachable from `entry` through relative imports (static, dynamic and type-only). */
function reachable(graph: Graph, entry: string): Set<string> {
  const seen = new Set<string>();
  const stack = [entry];
  while (stack.length > 0) {
    const file = stack.pop()!;
    if (seen.has(file)) continue;
    seen.add(file);
    stack.push(...(graph.get(file)?.relative ?? []));
  }
  return seen;
}

const fake = (edges: Record<string, string[]>): Graph =>
  new Map(
    Object.entries(edges).map(([file, to]) => [
      file,
      { relative: to.filter((t) => t.endsWith('.ts')), packages: to.filter((t) => !t.endsWith('.ts')) },
    ]),
  );

describe('the checker itself', () => {
  it('reports a back-edge, a forbidden package, an unknown layer and a dangling import', () => {
    const graph = fake({
      'roles/a.ts': ['judge/run.ts', 'undici'],
      'judge/run.ts': ['roles/a.ts', 'server/app.ts'],
      'server/app.ts': [],
      'widgets/w.ts': [],
      'text/t.ts': ['text/missing.ts'],
    });
    expect(layerViolations(graph)).toEqual([
      'roles/a.ts -> judge/run.ts',
      'roles/a.ts -> undici',
      'judge/run.ts -> server/app.ts',
      "widgets/w.ts: layer 'widgets' is not in LAYERS",
      'text/t.ts -> text/missing.ts (no such file)',
    ]);
  });

  it('finds a cycle inside one layer and leaves acyclic graphs alone', () => {
    expect(
      importCycles(
        fake({ 'judge/a.ts': ['judge/b.ts'], 'judge/b.ts': ['judge/c.ts'], 'judge/c.ts': ['judge/a.ts'] }),
      ),
    ).toEqual([['judge/a.ts', 'judge/b.ts', 'judge/c.ts']]);
    expect(
      importCycles(
        fake({ 'judge/a.ts': ['judge/b.ts', 'judge/c.ts'], 'judge/b.ts': ['judge/c.ts'], 'judge/c.ts': [] }),
      ),
    ).toEqual([]);
  });
});

describe('src/ layering', () => {
  const graph = importGraph(SRC);

  it('reads the whole tree', () => {
    for (const file of [
      'config.ts',
      'judge/run.ts',
      'judge/backends/openai.ts',
      'server/http/app.ts',
      'roles/index.ts',
    ])
      expect(graph.has(file)).toBe(true);
  });

  it('has no import that crosses a layer the wrong way or pulls in a foreign package', () => {
    expect(layerViolations(graph)).toEqual([]);
  });

  it('keeps src/ablations grouped by command: no command imports another the wrong way', () => {
    expect(ablationViolations(graph)).toEqual([]);
    const top = readdirSync(join(SRC, 'ablations'), { withFileTypes: true });
    expect(top.filter((e) => e.isFile()).length).toBeLessThanOrEqual(20);
    expect(top.filter((e) => e.isDirectory()).map((e) => e.name)).toEqual(
      expect.arrayContaining(['ablate', 'probe', 'calibrate', 'evaluate', 'stats']),
    );
  });

  it('flags a shared file importing a command and a command importing another', () => {
    const bad: Graph = new Map([
      ['ablations/records.ts', { relative: ['ablations/ablate/runner.ts'], packages: [] }],
      [
        'ablations/evaluate/run.ts',
        { relative: ['ablations/probe/run.ts', 'ablations/pool.ts'], packages: [] },
      ],
      ['ablations/ablate/runner.ts', { relative: [], packages: [] }],
      ['ablations/probe/run.ts', { relative: ['ablations/ablate/runner.ts'], packages: [] }],
      ['ablations/pool.ts', { relative: [], packages: [] }],
    ]);
    expect(ablationViolations(bad)).toEqual([
      'ablations/records.ts -> ablations/ablate/runner.ts',
      'ablations/evaluate/run.ts -> ablations/probe/run.ts',
    ]);
  });

  it('keeps src/server grouped by role: at most 12 entries at its top, no arrow up the parts', () => {
    expect(serverViolations(graph)).toEqual([]);
    const top = readdirSync(join(SRC, 'server'), { withFileTypes: true });
    expect(top.length).toBeLessThanOrEqual(12);
    expect(
      top
        .filter((e) => e.isDirectory())
        .map((e) => e.name)
        .sort(),
    ).toEqual([...SERVER_PARTS.keys()].filter((p) => p !== 'main').sort());
  });

  it('flags a server part importing one above it', () => {
    const bad: Graph = new Map([
      ['server/controls/stamps.ts', { relative: ['server/http/context.ts'], packages: [] }],
      ['server/http/context.ts', { relative: ['server/serving/results.ts'], packages: [] }],
      ['server/serving/results.ts', { relative: [], packages: [] }],
    ]);
    expect(serverViolations(bad)).toEqual(['server/controls/stamps.ts -> server/http/context.ts']);
  });

  it('has no import cycle anywhere', () => {
    expect(importCycles(graph)).toEqual([]);
  });

  it('never reaches src/ablations (statistics, reports) from the server entry point', () => {
    const files = [...reachable(graph, 'server/main.ts')];
    expect(files).toContain('server/http/app.ts');
    expect(files).toContain('judge/run.ts');
    expect(files.filter((f) => f.startsWith('ablations/'))).toEqual([]);
  });
});
