/**
 * The shape test's measure (test/shape.test.ts), apart so it can be run alone:
 *
 *   npx tsx test/support/shape.ts [count]   # the longest function bodies of src/ and bench/, by own lines
 *
 * Every function, method, accessor, constructor and class is measured with the TypeScript compiler from its
 * first token to its last (comments above it excluded, as the lead's `fnlen` counts), and by its own
 * lines: that length less the functions and classes nested in it, each of which counts as the one line a
 * reader meets it on and is measured on its own. A factory's closures or a class's methods are thus not
 * its body; what is left is the wall a reader reads as one.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

import ts from 'typescript';

export interface Measured {
  /** `<path> › <name>`. */
  key: string;
  /** 1-based line of its first token. */
  line: number;
  /** From its first token to its last. */
  lines: number;
  /** `lines` less its nested functions and classes, each counted as one line. */
  own: number;
}

const isFunctionWithBody = (node: ts.Node): boolean =>
  (ts.isFunctionDeclaration(node) ||
    ts.isFunctionExpression(node) ||
    ts.isArrowFunction(node) ||
    ts.isMethodDeclaration(node) ||
    ts.isConstructorDeclaration(node) ||
    ts.isGetAccessorDeclaration(node) ||
    ts.isSetAccessorDeclaration(node)) &&
  node.body !== undefined;

/**
 * Every function-like node and class of a source, measured. Named by its own name (methods, accessors and
 * constructors as `Class.member`), else by the variable or property it is assigned to, else as
 * `<enclosing> › (anonymous)`.
 */
export function measure(path: string, text: string): Measured[] {
  const sf = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const out: Measured[] = [];
  const lineOf = (pos: number): number => sf.getLineAndCharacterOfPosition(pos).line;
  const nameOf = (node: ts.Node, enclosing: string | undefined): string => {
    const own =
      (ts.isFunctionDeclaration(node) ||
        ts.isFunctionExpression(node) ||
        ts.isClassDeclaration(node) ||
        ts.isClassExpression(node) ||
        ts.isMethodDeclaration(node) ||
        ts.isGetAccessorDeclaration(node) ||
        ts.isSetAccessorDeclaration(node)) &&
      node.name !== undefined
        ? node.name.getText(sf)
        : ts.isConstructorDeclaration(node)
          ? 'constructor'
          : undefined;
    const parent = node.parent;
    if (own !== undefined) {
      const member = ts.isClassElement(node) && ts.isClassLike(parent) && parent.name !== undefined;
      return member ? `${parent.name.getText(sf)}.${own}` : own;
    }
    if (ts.isVariableDeclaration(parent) && ts.isIdentifier(parent.name)) return parent.name.text;
    if (ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) return parent.name.getText(sf);
    return `${enclosing ?? '(module)'} › (anonymous)`;
  };
  /** Measures what `node` holds; returns the lines its outermost functions and classes take beyond one each. */
  const visit = (node: ts.Node, enclosing: string | undefined): number => {
    const measured = isFunctionWithBody(node) || ts.isClassLike(node);
    const name = measured ? nameOf(node, enclosing) : enclosing;
    let nested = 0;
    let entry: Measured | undefined;
    if (measured) {
      const start = lineOf(node.getStart(sf));
      const lines = lineOf(node.end) - start + 1;
      entry = { key: `${path} › ${name}`, line: start + 1, lines, own: lines };
      out.push(entry);
    }
    ts.forEachChild(node, (child) => {
      nested += visit(child, name);
    });
    if (entry === undefined) return nested;
    entry.own = entry.lines - nested;
    return entry.lines - 1;
  };
  visit(sf, undefined);
  return out;
}

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

function* sources(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* sources(path);
    else if (entry.name.endsWith('.ts')) yield path;
  }
}

/** Every function and class of src/ and bench/, measured; `files` counts the sources read. */
export function measureTree(root = ROOT): { files: number; measured: Measured[] } {
  const measured: Measured[] = [];
  let files = 0;
  for (const dir of ['src', 'bench']) {
    for (const file of sources(join(root, dir))) {
      files += 1;
      measured.push(...measure(relative(root, file), readFileSync(file, 'utf8')));
    }
  }
  return { files, measured };
}

/** The `count` longest by own lines, one a line. */
export function longest(measured: readonly Measured[], count: number): string[] {
  return [...measured]
    .sort((a, b) => b.own - a.own || b.lines - a.lines)
    .slice(0, count)
    .map(
      (m) =>
        `${String(m.own).padStart(4)} own ${String(m.lines).padStart(4)} outer  ${m.key} (line ${m.line})`,
    );
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  for (const row of longest(measureTree().measured, Number(process.argv[2] ?? 10))) console.log(row);
}
