/** Reads the reference tables of the docs, so tests can hold them against the code. */
import { readFileSync } from 'node:fs';

export const ROOT_URL = new URL('../../', import.meta.url);

export function readDoc(path: string): string {
  return readFileSync(new URL(path, ROOT_URL), 'utf8');
}

export interface Table {
  header: string[];
  rows: string[][];
}

/** Splits a table line on unescaped `|` and trims the cells (`\|` is a literal pipe). */
function cells(line: string): string[] {
  const inner = line.trim().replace(/^\|/, '').replace(/\|$/, '');
  return inner.split(/(?<!\\)\|/).map((cell) => cell.trim().replace(/\\\|/g, '|'));
}

/** Every GitHub-flavoured table in a markdown text (header row, delimiter row, body rows). */
export function markdownTables(text: string): Table[] {
  const lines = text.split('\n');
  const tables: Table[] = [];
  for (let i = 0; i + 1 < lines.length; i++) {
    if (
      !lines[i]!.trimStart().startsWith('|') ||
      !/^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$/.test(lines[i + 1]!)
    )
      continue;
    const header = cells(lines[i]!);
    const rows: string[][] = [];
    let j = i + 2;
    for (; j < lines.length && lines[j]!.trimStart().startsWith('|'); j++) rows.push(cells(lines[j]!));
    tables.push({ header, rows });
    i = j - 1;
  }
  return tables;
}

/**
 * The one table of `path` whose header starts with `header` (later columns may be added freely); throws
 * when there is none or several.
 */
export function docTable(path: string, header: string[]): Table {
  const found = markdownTables(readDoc(path)).filter((t) => header.every((h, i) => t.header[i] === h));
  if (found.length !== 1)
    throw new Error(`${path}: expected one table | ${header.join(' | ')} |, found ${found.length}`);
  return found[0]!;
}

/** The backticked names in a cell, e.g. "`MIN_X` / `MAX_X`" → ["MIN_X", "MAX_X"]. */
export function codeSpans(cell: string): string[] {
  return [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
}
