import { readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

import { describe, expect, it } from 'vitest';

const SRC = fileURLToPath(new URL('../../src/', import.meta.url));

/** Every src file reachable from `entry` through relative imports (static, dynamic and type-only). */
function reachable(entry: string): Set<string> {
  const seen = new Set<string>();
  const stack = [entry];
  for (let guard = 0; stack.length > 0 && guard < 10_000; guard++) {
    const file = stack.pop()!;
    if (seen.has(file)) continue;
    seen.add(file);
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)\.js'/g)) {
      stack.push(join(dirname(file), `${m[1]}.ts`));
    }
  }
  return seen;
}

describe('serving dependencies', () => {
  it('never imports src/ablations (statistics, reports) from the server', () => {
    const files = [...reachable(join(SRC, 'server', 'main.ts'))].map((f) => relative(SRC, f));
    expect(files).toContain('server/app.ts');
    expect(files).toContain('judge/run.ts');
    expect(files.filter((f) => f.startsWith('ablations'))).toEqual([]);
  });
});
